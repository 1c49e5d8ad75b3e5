"""The indexed products as a search shows and filters them: titles and, per aspect, the values shown (the
catalog's, or else the model's prediction at or above the threshold, with its confidence).

`madr search` builds one from the catalog and the embed output (`pipelines.serve.search.load_catalog`); a
serving bundle carries one as `catalog.parquet` (`serving.bundle`). Filters compare values by `filter_key`
(case, accents and punctuation aside), so both find what `madr enrich` would write.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol

import numpy as np

from schemas.value_folding import filter_key

# The title shown for an indexed product the catalog no longer has.
NOT_IN_PRODUCTS = "(not in --products)"


class AspectShown(Protocol):
    """One aspect of one product as shown: its values and the confidence (None: a catalog value)."""

    @property
    def values(self) -> Sequence[str]: ...

    @property
    def confidence(self) -> float | None: ...


class ShownValues(NamedTuple):
    """An `AspectShown` read back from a bundle's catalog."""

    values: tuple[str, ...]
    confidence: float | None


@dataclass
class Catalog:
    """The indexed products' titles and shown aspect values, row i being the index's row i; `load_vectors`
    gives their embeddings in the same order (read on first use: only a selective filter needs them)."""

    ids: Sequence[str]
    titles: list[str]
    aspects: list[Mapping[str, AspectShown]]
    load_vectors: Callable[[], np.ndarray]
    _vectors: np.ndarray | None = field(default=None, repr=False)
    # Said on stderr before the results: the catalog shown is not the one the vectors were made from.
    warning: str | None = None

    def matching(self, filters: Sequence[tuple[str, str]]) -> np.ndarray:
        """Rows whose value of every filtered aspect is the filter's (case and accents aside)."""
        keep = np.ones(len(self.ids), dtype=bool)
        for aspect, value in filters:
            self.check_filter(aspect, value)
            wanted = filter_key(value)
            keep &= np.array(
                [
                    aspect in row and any(filter_key(v) == wanted for v in row[aspect].values)
                    for row in self.aspects
                ],
                dtype=bool,
            )
        return np.flatnonzero(keep)

    def known_values(self, aspect: str) -> dict[str, str]:
        """Normalised -> spelt value of `aspect` over the catalog."""
        values: dict[str, str] = {}
        for row in self.aspects:
            for value in row[aspect].values if aspect in row else ():
                values.setdefault(filter_key(value), value)
        return values

    def check_filter(self, aspect: str, value: str) -> None:
        """ValueError naming the known aspects, or the nearest known values, for a filter nothing matches."""
        known_aspects = sorted({name for row in self.aspects for name in row})
        if aspect not in known_aspects:
            raise ValueError(
                f"unknown aspect {aspect!r} in --filter: the catalog's products have {known_aspects}"
            )
        values = self.known_values(aspect)
        if filter_key(value) not in values:
            close = difflib.get_close_matches(filter_key(value), list(values), n=5, cutoff=0.6)
            hint = f"; nearest known values: {', '.join(values[c] for c in close)}" if close else ""
            raise ValueError(
                f"no product has {aspect} = {value!r} ({len(values)} known {aspect} values){hint}"
            )

    def vectors(self, rows: np.ndarray) -> np.ndarray:
        """The embeddings of `rows` (loaded once, on first use)."""
        if self._vectors is None:
            self._vectors = self.load_vectors()
        return self._vectors[rows]
