"""Whether a model's predictions for an aspect can be trusted to fill this catalog's gaps.

A model trained on another catalog predicts its own taxonomy: confident, calibrated on its own held-out
products, and wrong here. The catalog says so itself: on the products whose value it gives, the
predictions can be compared with it. `madr enrich` fills an aspect's gaps only when they agree often
enough there (`AgreementWithCatalog.withheld`); the gaps it leaves are counted as "withheld".
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import apache_beam as beam
from apache_beam.metrics import Metrics

from model.aspects.vocabulary import normalise_value
from pipelines.io.catalog_io import METRICS_NAMESPACE

# Fewer than this many products whose value the catalog gives are no evidence either way: filled
# (`--min_agreement`'s default and why: `pipelines.settings.options.DEFAULT_MIN_AGREEMENT`).
MIN_AGREEMENT_CHECKS = 20


@dataclass(frozen=True)
class AgreementWithCatalog:
    """Per aspect, on products whose value the catalog gives: predictions at the threshold, and how many
    name a value the catalog gives."""

    checked: Mapping[str, int]
    agreed: Mapping[str, int]

    @classmethod
    def from_sums(cls, sums: Mapping[str, tuple[int, int]]) -> AgreementWithCatalog:
        """From the (aspect, (checked, agreed)) sums of `agreement_checks` + `sum_pairs` (a side input)."""
        return cls(
            {a: checked for a, (checked, _) in sums.items()}, {a: agreed for a, (_, agreed) in sums.items()}
        )

    def withheld(self, min_agreement: float) -> frozenset[str]:
        """Aspects checked often enough whose predictions agree less than `min_agreement` of the time."""
        return frozenset(
            aspect
            for aspect, checked in self.checked.items()
            if checked >= MIN_AGREEMENT_CHECKS and self.agreed.get(aspect, 0) / checked < min_agreement
        )


def agreement_checks(
    joined: tuple[str, Mapping[str, Iterable[Any]]], aspects: Sequence[str], min_confidence: float
) -> Iterator[tuple[str, tuple[int, int]]]:
    """(aspect, (1, agreed)) for each aspect the catalog gives and the model predicts at the threshold."""
    _, groups = joined
    catalog_rows, predictions = list(groups["products"]), list(groups["predictions"])
    if not catalog_rows or not predictions:
        return
    values, confidences = predictions[0].get("values") or {}, predictions[0].get("confidences") or {}
    for aspect in aspects:
        known = {normalise_value(v) for row in catalog_rows for v in row.get(aspect) or () if v}
        value, confidence = values.get(aspect), confidences.get(aspect)
        if known and value and confidence is not None and confidence >= min_confidence:
            agreed = int(normalise_value(value) in known)
            Metrics.counter(METRICS_NAMESPACE, f"{aspect}_checked").inc()
            Metrics.counter(METRICS_NAMESPACE, f"{aspect}_agreed").inc(agreed)
            yield aspect, (1, agreed)


def sum_pairs(pairs: Iterable[tuple[int, int]]) -> tuple[int, int]:
    checked = agreed = 0
    for one, hit in pairs:
        checked, agreed = checked + one, agreed + hit
    return checked, agreed


class JoinWithAgreement(beam.PTransform):
    """{"products": (product_id, catalog aspects), "predictions": (product_id, predictions)} ->
    {"joined": (product_id, {"products": catalog rows, "predictions": predictions}), "agreement":
    (aspect, (checked, agreed))}.

    The catalog joined with the predictions `madr embed` wrote beside each vector (a dict with "values"
    and "confidences", and whatever else a stage carries along), and per aspect how often those at
    `min_confidence` agree with the catalog's own values: the side input `AgreementWithCatalog.from_sums`
    reads. `madr enrich` and `madr export-vertex` fill gaps from the same two.
    """

    def __init__(self, aspects: Sequence[str], min_confidence: float) -> None:
        super().__init__()
        self.aspects, self.min_confidence = tuple(aspects), min_confidence

    def expand(self, inputs: Mapping[str, beam.PCollection]) -> dict[str, beam.PCollection]:
        joined = {
            "products": inputs["products"],
            "predictions": inputs["predictions"],
        } | "JoinPredictions" >> beam.CoGroupByKey()
        agreement = (
            joined
            | "CheckAgainstCatalog" >> beam.FlatMap(agreement_checks, self.aspects, self.min_confidence)
            | "SumAgreement" >> beam.CombinePerKey(sum_pairs)
        )
        return {"joined": joined, "agreement": agreement}


def merged_catalog(
    rows: Sequence[Mapping[str, Sequence[str]]], distinct: bool = False
) -> dict[str, list[str]]:
    """A product's catalog aspects over its rows (several rows for one id: the union of their values);
    `distinct`: each value once, sorted, so reruns agree."""
    merged: dict[str, list[str]] = {}
    for row in rows:
        for name, values in row.items():
            merged.setdefault(name, []).extend(values)
    if distinct and len(rows) > 1:
        return {name: sorted(set(values)) for name, values in merged.items()}
    return merged
