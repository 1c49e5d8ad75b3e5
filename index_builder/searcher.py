"""The search contract shared by the ScaNN index and the exact ground truth.

Evaluation swaps one searcher for the other to measure what the index costs in
recall, so both must agree on more than a method name: k is capped at the corpus
size, rows are sorted by score descending with ties broken by the lower corpus
index, and scores are true float32 dot products. Those rules are written once here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Protocol, runtime_checkable

import numpy as np


@dataclass(frozen=True, eq=False)
class SearchResult:
    """Top-k neighbours of a batch of queries.

    Attributes:
        scores: float32 (num_queries, k_eff) dot products, descending along each row.
        indices: int64 (num_queries, k_eff) corpus rows (row i of the embeddings / of ``ids.parquet``);
            handy for recall and for tie checks.
        id_table: the corpus's product ids by row, from which ``ids`` is read.

    ``ids[i][j]``, the product id of query i's j-th neighbour, is made when first asked for: a server
    that maps only the neighbours it returns, or a caller that needs rows alone, does not pay for turning
    every row into Python strings (10 ms per 5,000 queries at k = 10, 7 % of a tree search there).
    """

    scores: np.ndarray
    indices: np.ndarray
    id_table: np.ndarray = field(repr=False)

    def __post_init__(self) -> None:
        if self.scores.ndim != 2 or self.scores.dtype != np.float32:
            raise ValueError(f"scores must be 2-D float32, got {self.scores.dtype} {self.scores.shape}")
        if self.indices.shape != self.scores.shape:
            raise ValueError(f"indices {self.indices.shape} and scores {self.scores.shape} differ in shape")

    @cached_property
    def ids(self) -> list[list[str]]:
        return self.id_table[self.indices].tolist()

    @property
    def k(self) -> int:
        """k_eff: the requested k capped at the corpus size."""
        return int(self.scores.shape[1])

    def __len__(self) -> int:
        return int(self.scores.shape[0])


class CorpusRows:
    """`ids` and `len()` of a searcher whose corpus's product ids are `_ids` (an object array by row): one
    definition for the exact, ScaNN, partitioned and inverted searchers."""

    _ids: np.ndarray

    @property
    def size(self) -> int:
        raise NotImplementedError

    @property
    def ids(self) -> tuple[str, ...]:
        """Product ids by corpus row: ``ids[i]`` is what index i of a result names."""
        return tuple(self._ids.tolist())

    def __len__(self) -> int:
        return self.size


@runtime_checkable
class Searcher(Protocol):
    """Anything that returns the top-k corpus vectors by dot product for a batch of queries."""

    @property
    def dimension(self) -> int: ...

    @property
    def size(self) -> int: ...

    def search(self, queries: np.ndarray, k: int) -> SearchResult: ...


def effective_k(k: int, corpus_size: int) -> int:
    """Validate ``k`` and cap it at the corpus size (asking for all of a tiny corpus is legitimate)."""
    if not isinstance(k, int | np.integer) or isinstance(k, bool) or k < 1:
        raise ValueError(f"k must be a positive int, got {k!r}")
    return min(int(k), corpus_size)


def as_query_matrix(queries: np.ndarray, dimension: int) -> np.ndarray:
    """Queries as a C-contiguous float32 (q, dimension) matrix, rejecting what would score as garbage."""
    matrix = np.asarray(queries)
    if matrix.ndim != 2 or matrix.shape[1] != dimension:
        raise ValueError(f"queries must have shape (num_queries, {dimension}), got {matrix.shape}")
    if not np.issubdtype(matrix.dtype, np.floating):
        raise ValueError(f"queries must be floating point, got {matrix.dtype}")
    matrix = np.ascontiguousarray(matrix, dtype=np.float32)
    if not np.isfinite(matrix).all():
        raise ValueError("queries contain NaN or infinite values")
    return matrix


def as_corpus(embeddings: np.ndarray, ids: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Validate a corpus: a finite float (n, d) matrix and n unique, non-empty string ids."""
    matrix = np.asarray(embeddings)
    if matrix.ndim != 2 or matrix.shape[0] < 1 or matrix.shape[1] < 1:
        raise ValueError(f"embeddings must be a non-empty (n, d) matrix, got shape {matrix.shape}")
    if not np.issubdtype(matrix.dtype, np.floating):
        raise ValueError(f"embeddings must be floating point, got {matrix.dtype}")
    matrix = np.ascontiguousarray(matrix, dtype=np.float32)
    if not np.isfinite(matrix).all():
        raise ValueError("embeddings contain NaN or infinite values")
    if isinstance(ids, str):
        raise ValueError("ids must be a sequence of strings, not one string")
    id_array = np.asarray(list(ids), dtype=object)
    if id_array.shape != (matrix.shape[0],):
        raise ValueError(f"{len(id_array)} ids for {matrix.shape[0]} embeddings")
    if not all(isinstance(i, str) and i for i in id_array):
        raise ValueError("ids must be non-empty strings")
    if len(set(id_array.tolist())) != len(id_array):
        raise ValueError("ids repeat: every product must appear once in an index")
    return matrix, id_array


def sort_rows(indices: np.ndarray, scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Order each row by score descending, ties by ascending corpus index (deterministic output).

    Rows already in strictly descending score order (what ScaNN and the exact searcher return, but for
    ties) are left as they are; only the others are sorted, in copies.
    """
    unordered = np.flatnonzero(~(scores[:, :-1] > scores[:, 1:]).all(axis=1)) if scores.shape[1] > 1 else []
    if not len(unordered):
        return indices, scores
    rows_i, rows_s = indices[unordered], scores[unordered]
    order = np.lexsort((rows_i, -rows_s), axis=-1)
    indices, scores = indices.copy(), scores.copy()
    indices[unordered] = np.take_along_axis(rows_i, order, axis=1)
    scores[unordered] = np.take_along_axis(rows_s, order, axis=1)
    return indices, scores


def make_result(indices: np.ndarray, scores: np.ndarray, ids: np.ndarray) -> SearchResult:
    """Wrap sorted (q, k) index and score arrays; `ids` (the corpus's, by row) name them when asked."""
    indices = indices.astype(np.int64, copy=False)
    scores = scores.astype(np.float32, copy=False)
    return SearchResult(scores=scores, indices=indices, id_table=ids)
