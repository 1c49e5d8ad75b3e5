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

from collections.abc import Sequence

import numpy as np
import torch

# Candidate temperatures, log-spaced: a grid search over one parameter needs no optimiser and no seed.
# Bounded: when every calibration product is right, the likelihood keeps rising as T falls to 0, and a
# T of 0.02 (fitted on the demo's 8 colour-annotated calibration products) made every colour P = 1.
TEMPERATURE_GRID = np.geomspace(0.1, 10.0, 81)
MIN_LABELLED = 20  # fewer labelled products fit noise: the aspect keeps temperature 1


def aspect_probabilities(logits: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """P(x) over an aspect's values (softmax of the logits over `temperature`), in float32."""
    return torch.softmax(logits.float() / temperature, dim=-1)


def fit_temperature(logits: torch.Tensor, labels: Sequence[Sequence[int]]) -> float | None:
    """The temperature that minimises the negative log-likelihood of `labels` (each row's annotated
    classes; a row with several counts the probability of any of them), or None with too few rows."""
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
    return round(float(TEMPERATURE_GRID[int(np.argmin(losses))]), 4)
