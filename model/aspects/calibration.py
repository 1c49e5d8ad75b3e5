"""Confidences that mean what they say: one temperature per aspect, fitted on unseen products.

The heads' softmax P(x) (madral-kdd22 §5) is what `--min_confidence` thresholds. Trained briefly on a
small catalog, a head ranks well but its probabilities do not match its accuracy: the adapted model of
the store export put the right brand first for 77 % of the products it never trained on while giving
almost none of them P >= 0.3, so a 0.5 threshold filled nothing. Temperature scaling (Guo et al., 2017,
"On Calibration of Modern Neural Networks") divides the logits by one number per aspect, chosen to
minimise the negative log-likelihood of the annotated values on held-out products: the ranking (and
Accuracy@1) is unchanged, and P(x) becomes a probability of being right.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np
import torch

logger = logging.getLogger(__name__)

# Candidate temperatures, log-spaced: a grid search over one parameter needs no optimiser and no seed.
# When every calibration product is right, the likelihood keeps rising as T falls to 0 (a T of 0.02,
# fitted on the demo's 8 colour-annotated calibration products, made every colour P = 1): a minimum on
# either bound is no fit, and `fit_temperature` keeps the uncalibrated confidences then. The grid spans
# four decades so that a real optimum (a head right 90 % of the time with tiny margins: T ~ 0.05) lies
# inside it.
TEMPERATURE_GRID = np.geomspace(0.01, 100.0, 161)
MIN_LABELLED = 20  # fewer labelled products fit noise: the aspect keeps temperature 1


def aspect_probabilities(logits: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """P(x) over an aspect's values (softmax of the logits over `temperature`), in float32."""
    return torch.softmax(logits.float() / temperature, dim=-1)


def fit_temperature(
    logits: torch.Tensor, labels: Sequence[Sequence[int]], aspect: str = "the aspect"
) -> float | None:
    """The temperature that minimises the negative log-likelihood of `labels` (each row's annotated
    classes; a row with several counts the probability of any of them), or None (confidences stay
    uncalibrated): with too few rows, or when the minimum lies on the grid's bound, where the likelihood
    was still falling (every calibration product right, say) and the bound is no fit but a clamp. On a
    200-product store the bound 0.1 put wrong categories (a watering can as "Gardening Gloves") at
    0.75-0.79, above the fill threshold."""
    rows = [row for row, classes in enumerate(labels) if classes]
    if len(rows) < MIN_LABELLED:
        return None
    chosen = logits.float()[rows]
    mask = torch.zeros_like(chosen, dtype=torch.bool)
    for position, row in enumerate(rows):
        mask[position, list(labels[row])] = True
    losses = []
    for temperature in TEMPERATURE_GRID:
        log_p = torch.log_softmax(chosen / float(temperature), dim=-1)
        losses.append(-torch.logsumexp(log_p.masked_fill(~mask, float("-inf")), dim=-1).mean().item())
    best = int(np.argmin(losses))
    if best in (0, len(TEMPERATURE_GRID) - 1):
        logger.warning(
            "%s: the confidence temperature fitted on %d held-out products lands on the grid's bound "
            "(%.2g), not inside it: keeping the uncalibrated confidences",
            aspect,
            len(rows),
            TEMPERATURE_GRID[best],
        )
        return None
    return round(float(TEMPERATURE_GRID[best]), 4)
