"""Fit each aspect's confidence temperature on products the model never trained on, and save it.

`model.aspects.calibration` explains why; this is the step `madr adapt` and `madr train` (of a model
pre-trained with held-out products) run after the head refit, on half of the products held out
(`calibration_share`), so that the other half still measures the calibrated confidences honestly
(`madr evaluate` leaves the calibration half out).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from model import Side, load_config, text_for_model
from model.aspects.calibration import fit_temperature
from model.aspects.vocabulary import UNSEEN
from model.text_encoder import TextEncoder
from pipelines.evaluate.annotation_quality import held_out_products, tuned_products
from pipelines.layout import DatasetLayout
from schemas.splits import HeldOutProducts

LOGGER = logging.getLogger(__name__)


def calibration_share(held_out: HeldOutProducts) -> HeldOutProducts:
    """The half of the held-out products that calibrates: a rule with half the fraction holds out a
    subset of the same products (`HeldOutProducts` grows by adding products)."""
    return HeldOutProducts(held_out.fraction / 2, held_out.by)


def calibrate_confidences(
    model_dir: str, texts: Sequence[str], annotations: Sequence[Mapping[str, Sequence[str]]]
) -> dict[str, float]:
    """Fit a temperature per aspect on `texts` and their annotated values, save it into the model's
    config.json, and return it (aspects with too few annotated, in-vocabulary products keep 1)."""
    model = TextEncoder.load(model_dir)
    encoder, tokenizer = model.encoder, model.tokenizer
    vocabulary = getattr(encoder, "vocabulary", None)
    if vocabulary is None or not texts:
        return {}
    outputs = model.outputs(list(texts), Side.DOCUMENT)
    temperatures: dict[str, float] = {}
    for aspect in encoder.config.aspects:
        if not outputs or aspect not in outputs[0].aspect_logits:
            continue
        logits = torch.cat([output.aspect_logits[aspect] for output in outputs])
        labels = [_classes(vocabulary, aspect, record, tokenizer.tokenize) for record in annotations]
        fitted = fit_temperature(logits, labels, aspect)
        if fitted is not None:
            temperatures[aspect] = fitted
    encoder.config.replace(aspect_temperatures=temperatures).save(model_dir)
    LOGGER.info(
        "aspect confidence temperatures, fitted on %d held-out products: %s", len(texts), temperatures
    )
    return temperatures


def _classes(vocabulary: Any, aspect: str, record: Mapping[str, Sequence[str]], tokenize: Any) -> list[int]:
    return sorted(set(vocabulary.encode(aspect, list(record.get(aspect) or []), tokenize)) - {UNSEEN})


CALIBRATION_SAMPLE = 2_000  # temperatures settle well before this; the catalog is streamed, never held


def calibrate_on_catalog(
    model_dir: str, dataset: DatasetLayout, held_out: HeldOutProducts
) -> tuple[HeldOutProducts, dict[str, float]]:
    """`calibrate_confidences` on the annotated products of `calibration_share(held_out)` in the dataset's
    catalog, less those judged for training queries (fine-tuning reads them): the share, and the fit."""
    share = calibration_share(held_out)
    excluded = tuned_products(dataset.queries, dataset.judgments, "test")
    chosen = held_out_products(dataset.products, share, excluded, CALIBRATION_SAMPLE)
    config = load_config(model_dir)
    texts = [text_for_model(product, config) for product in chosen]
    return share, calibrate_confidences(model_dir, texts, [dict(p["aspects"] or {}) for p in chosen])
