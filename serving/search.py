"""One query's results from an index and its catalog: dense, or fused with BM25 by reciprocal rank, and
filtered by aspect values the way a store's search page filters. `madr search` and `madr serve` both
search with `search_one`, so a server answers what the command prints.

A filter leaves a share of the catalog. The index is asked for k / share x `OVERFETCH` neighbours and
the matching ones kept; where that finds fewer than k though more match, or the share is below
`EXACT_BELOW_SHARE`, the matching products are scored exactly (their vectors from the catalog), so a
selective filter still returns k results when k exist.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from index_builder.numpy_exact import NumpyExactSearcher
from serving.catalog import Catalog

if TYPE_CHECKING:  # the bundle imports the index loaders; `madr search` needs only search_one
    from serving.bundle import ServingBundle

# Ask the index for this many times k / (share of products a filter keeps).
OVERFETCH = 2.0
# Below this share of the catalog, a filter's products are scored exactly instead of over-fetched.
EXACT_BELOW_SHARE = 0.01


def search_one(
    index: Any,
    catalog: Catalog,
    query: np.ndarray,
    k: int,
    allowed: np.ndarray | None,
    text: str | None = None,
) -> tuple[list[int], list[float], str]:
    """Rows and scores of one query's results, and how they were found. With `text`, the index's
    ranking is fused with its BM25 ranking of the text (scores then the fused ones)."""
    n = len(catalog.ids)
    if text is not None:
        index_search, source = (lambda q, depth: index.search_hybrid(q, [text], depth)), "index + BM25, RRF"
    else:
        index_search, source = index.search, "index"
    if allowed is None:
        found = index_search(query, k)
        return found.indices[0].tolist(), found.scores[0].tolist(), source
    want = min(k, len(allowed))
    if not want:
        return [], [], "no product matches every filter"
    share = len(allowed) / n
    if share >= EXACT_BELOW_SHARE:
        fetch = min(n, math.ceil(k / share * OVERFETCH))
        found = index_search(query, fetch)
        keep = np.isin(found.indices[0], allowed)
        rows, scores = found.indices[0][keep][:k], found.scores[0][keep][:k]
        if len(rows) >= want:
            return rows.tolist(), scores.tolist(), f"{source}, over-fetched {fetch:,}"
    # One query against the matching vectors is one BLAS product: NumPy's, so a server needs no torch.
    exact = NumpyExactSearcher(catalog.vectors(allowed), [catalog.ids[row] for row in allowed])
    found = exact.search(query, want)
    rows = allowed[found.indices[0]]
    return rows.tolist(), found.scores[0].tolist(), f"scored exactly over the {len(allowed):,} matching"


@dataclass(frozen=True)
class Answer:
    """One query's results as `madr serve` returns them, with where the time went."""

    query: str
    hits: list[dict[str, Any]]
    how: str
    matching: int | None  # products the filters keep (None: no filter)
    encode_ms: float  # the query encoder's share, per query of the request
    search_ms: float  # the index's (and BM25's, and the filter's) share

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def answer_queries(
    bundle: ServingBundle,
    texts: Sequence[str],
    k: int,
    filters: Sequence[tuple[str, str]] = (),
    fused: bool = True,
) -> list[Answer]:
    """`madr search`'s results for `texts` from a bundle: fused with BM25 when `fused` and the index
    carries it, filtered by every (aspect, value) of `filters`. ValueError for a bad k or filter."""
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")
    catalog = bundle.catalog
    allowed = catalog.matching(filters) if filters else None  # a bad filter fails before any work
    started = time.perf_counter()
    vectors = bundle.encoder.encode(texts)
    encode_ms = (time.perf_counter() - started) * 1000 / max(len(texts), 1)
    answers = []
    for text, vector in zip(texts, vectors, strict=True):
        started = time.perf_counter()
        lexical = text if fused and bundle.lexical else None
        rows, scores, how = search_one(bundle.index, catalog, vector[None, :], k, allowed, lexical)
        search_ms = (time.perf_counter() - started) * 1000
        hits = [
            {
                "rank": rank,
                "score": float(score),
                "product_id": catalog.ids[row],
                "title": catalog.titles[row],
                "aspects": {
                    name: {"values": list(shown.values), "confidence": shown.confidence}
                    for name, shown in sorted(catalog.aspects[row].items())
                },
            }
            for rank, (row, score) in enumerate(zip(rows, scores, strict=True), start=1)
        ]
        matching = None if allowed is None else len(allowed)
        answers.append(Answer(text, hits, how, matching, encode_ms, search_ms))
    return answers
