"""Confidence temperatures: fitted on unseen products, they change P(x) and never the ranking."""

from __future__ import annotations

import math

import pytest
import torch

from model.aspects.calibration import MIN_LABELLED, aspect_probabilities, fit_temperature


def _logits(
    rows: int, classes: int, scale: float, accuracy: float, seed: int = 0
) -> tuple[torch.Tensor, list]:
    """Logits whose argmax is the label in `accuracy` of the rows, every margin times `scale`."""
    generator = torch.Generator().manual_seed(0)
    logits = torch.randn(rows, classes, generator=generator)
    labels = []
    for row in range(rows):
        top = int(logits[row].argmax())
        right = row < accuracy * rows
        labels.append([top] if right else [(top + 1) % classes])
    return logits * scale, labels


def test_an_underconfident_head_gets_a_temperature_below_one_and_an_overconfident_one_above() -> None:
    # Right 90 % of the time with logits squeezed near zero: P(top) ~ 0.1, far below its accuracy.
    shy, labels = _logits(400, 20, scale=0.3, accuracy=0.9)
    cold = fit_temperature(shy, labels)
    assert cold is not None and cold < 0.5
    before = aspect_probabilities(shy).max(-1).values.mean().item()
    after = aspect_probabilities(shy, cold).max(-1).values.mean().item()
    assert before < 0.15 and after > 0.4  # far nearer its 0.9 accuracy
    assert torch.equal(aspect_probabilities(shy, cold).argmax(-1), shy.argmax(-1))
    # Right half the time with huge margins: P(top) ~ 1 must come down.
    bold, labels = _logits(400, 20, scale=50.0, accuracy=0.5)
    hot = fit_temperature(bold, labels)
    assert hot is not None and hot > 5


def test_too_few_labelled_products_fit_nothing() -> None:
    logits, labels = _logits(MIN_LABELLED - 1, 5, 1.0, 1.0)
    assert fit_temperature(logits, labels) is None
    unlabelled = [[] for _ in range(50)]
    assert fit_temperature(torch.randn(50, 5), unlabelled) is None


def test_the_annotations_read_the_model_configs_temperature() -> None:
    from model import new_encoder
    from model.annotations import annotate
    from model.batch import EncoderOutput
    from tests.conftest import tiny_backbone
    from tests.test_aspect_initialisation import VOCABULARY

    encoder, _ = new_encoder(
        "madral", pretrained=False, backbone=tiny_backbone(), vocabulary=VOCABULARY, projection_dim=8
    )
    brand = torch.tensor([[0.0, 1.0, 0.0]])
    output = EncoderOutput(embedding=torch.zeros(1, 8), aspect_logits={"brand": brand})
    plain = annotate(encoder, output)[0].aspect_confidences["brand"]
    assert plain == pytest.approx(math.e / (math.e + 2), abs=1e-6)
    encoder.config = encoder.config.replace(aspect_temperatures={"brand": 0.25})
    sharp = annotate(encoder, output)[0].aspect_confidences["brand"]
    assert sharp == pytest.approx(math.exp(4) / (math.exp(4) + 2), abs=1e-6)
    with pytest.raises(ValueError, match="aspect_temperatures must be positive"):
        encoder.config.replace(aspect_temperatures={"brand": 0.0})


def test_a_fit_on_the_grids_bound_keeps_the_uncalibrated_confidences(caplog) -> None:
    """Every calibration product right with small margins: the likelihood keeps rising as T falls, so
    the grid's lowest temperature would win as a clamp, not a fit (as category and brand did on a
    200-product store export). It is refused, with a warning naming the aspect."""
    logits, labels = _logits(60, 10, scale=0.5, accuracy=1.0)
    with caplog.at_level("WARNING"):
        assert fit_temperature(logits, labels, "category") is None
    assert "category: the confidence temperature" in caplog.text and "grid's bound (0.01)" in caplog.text
    inside, labels = _logits(400, 20, scale=0.3, accuracy=0.9)
    assert fit_temperature(inside, labels) is not None
