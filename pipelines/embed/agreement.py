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

from apache_beam.metrics import Metrics

from model.aspects.vocabulary import normalise_value
from pipelines.catalog_io import METRICS_NAMESPACE

# An aspect's gaps are filled only when, on the products whose value the catalog gives, the predictions at
# the threshold agree with it this often. A model trained on another taxonomy predicts the store export's
# categories at P >= 0.7 with precision 0.70 (docs/RESULTS.md, issue 23): its category guesses for gaps
# would be as wrong. Fewer than MIN_AGREEMENT_CHECKS such products are no evidence either way: filled.
DEFAULT_MIN_AGREEMENT = 0.8
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
