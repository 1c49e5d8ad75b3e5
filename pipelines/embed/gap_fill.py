"""The rule every output of predicted aspects follows: a catalog value is never overwritten, and a gap is
filled by a prediction only at or above the threshold and only for an aspect not withheld
(`pipelines.embed.agreement`). `madr enrich` and `madr export-vertex` (`--restricts`) both apply it.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from schemas import PROVENANCE_CATALOG, PROVENANCE_PREDICTED

SOURCES = ("catalog", "predicted", "both")  # which values an output may use


@dataclass(frozen=True)
class FilledAspect:
    """One aspect of one product after filling: its values and where they came from."""

    values: tuple[str, ...]
    provenance: str
    confidence: float | None = None

    def as_row(self, aspect: str) -> dict[str, Any]:
        return {
            "aspect": aspect,
            "values": list(self.values),
            "provenance": self.provenance,
            "confidence": self.confidence,
        }


def fill_aspects(
    catalog: Mapping[str, Sequence[str]],
    predicted_values: Mapping[str, str] | None,
    predicted_confidences: Mapping[str, float] | None,
    aspects: Sequence[str],
    min_confidence: float,
    source: str = "both",
    withheld: Collection[str] = (),
) -> dict[str, FilledAspect]:
    """Each named aspect's values: the catalog's (never overwritten), else a sure enough prediction.

    `source` "catalog" uses catalog values only, "predicted" predictions only, "both" fills the
    catalog's gaps with predictions. An aspect with no usable value is left out, and so is the
    prediction of an aspect in `withheld` (`AgreementWithCatalog`).
    """
    if source not in SOURCES:
        raise ValueError(f"source must be one of {SOURCES}, got {source!r}")
    predicted, confidences = predicted_values or {}, predicted_confidences or {}
    filled: dict[str, FilledAspect] = {}
    for aspect in aspects:
        known = tuple(dict.fromkeys(v for v in catalog.get(aspect) or () if v))
        if known and source != "predicted":
            filled[aspect] = FilledAspect(known, PROVENANCE_CATALOG)
            continue
        value, confidence = predicted.get(aspect), confidences.get(aspect)
        if aspect in withheld:
            continue
        if source != "catalog" and value and confidence is not None and confidence >= min_confidence:
            filled[aspect] = FilledAspect((value,), PROVENANCE_PREDICTED, round(float(confidence), 6))
    return filled


def fill_or_withhold(
    *fill: Any, source: str = "both", withheld: Collection[str] = ()
) -> tuple[dict[str, FilledAspect], frozenset[str]]:
    """`fill_aspects(*fill, source, withheld)`, and the aspects whose prediction would have filled a gap
    had they not been withheld (what enrich and export-vertex count as withheld)."""
    filled = fill_aspects(*fill, source, withheld)
    if not withheld:
        return filled, frozenset()
    return filled, frozenset(fill_aspects(*fill, source)) - frozenset(filled)
