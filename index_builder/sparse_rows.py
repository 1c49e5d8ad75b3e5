"""Sparse items (documents or queries of B buckets × n dims) as CSR arrays over terms t = bucket·n + dim,
and the exact top-k of a block of accumulated scores.

What `index_builder.inverted` builds postings from and searches with; kept apart so the index module
holds only the index. An item is B buckets, each either an int array of active dims (weight 1) or an
object with `.indices` and `.values` (such as `model.sparse.SparseVector`); a dense [items, B·n]
matrix is read by its non-zeros, so `UhdOutput.embedding` rows are accepted as they are.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeAlias

import numpy as np

from index_builder.searcher import sort_rows

# Per item (document or query), B buckets, each an int array of active dims (weight 1) or a `.indices`/
# `.values` object such as `model.sparse.SparseVector`; or a dense [items, B·n] matrix (non-zeros active).
SparseRows: TypeAlias = "np.ndarray | Sequence[Sequence[Any]]"


def csr_rows(data: SparseRows, buckets: int, dimensions: int, what: str) -> tuple[np.ndarray, ...]:
    """Items as CSR over terms: (indptr [items + 1], terms int64 [nnz], weights float64 [nnz])."""
    width = buckets * dimensions
    if isinstance(data, np.ndarray):
        if data.ndim != 2 or data.shape[1] != width:
            raise ValueError(f"a dense {what} matrix must have shape (num, {width}), got {data.shape}")
        if data.dtype.kind not in "biuf" or not np.isfinite(data).all():
            raise ValueError(f"a dense {what} matrix must hold finite numbers, got {data.dtype}")
        rows, terms = np.nonzero(data)
        weights = data[rows, terms].astype(np.float64)
        return indptr_of(np.bincount(rows, minlength=data.shape[0])), terms.astype(np.int64), weights
    if isinstance(data, str | bytes):
        raise ValueError(f"{what}s must be a sequence of per-bucket dims or a matrix, not a string")
    dims, weights = [], []  # per bucket: int64 active dims, float64 weights
    for i, item in enumerate(data):
        if len(item) != buckets:
            raise ValueError(f"{what} {i} has {len(item)} buckets, expected {buckets}")
        for bucket in item:
            found = np.asarray(getattr(bucket, "indices", bucket))
            if found.ndim != 1 or (found.size and not np.issubdtype(found.dtype, np.integer)):
                raise ValueError(f"{what} {i}: a bucket must be a 1-D integer array, got {found.dtype}")
            dims.append(found.astype(np.int64))
            values = getattr(bucket, "values", None)
            weights.append(np.ones(found.size) if values is None else np.asarray(values, np.float64))
            if weights[-1].shape != found.shape:
                raise ValueError(f"{what} {i}: a bucket's values do not match its indices")
    lengths_array = np.asarray([d.size for d in dims], dtype=np.int64).reshape(-1, buckets)
    flat = np.concatenate(dims) if dims else np.empty(0, np.int64)
    bad = np.flatnonzero((flat < 0) | (flat >= dimensions))
    indptr = indptr_of(lengths_array.sum(axis=1))
    if bad.size:
        item = int(np.searchsorted(indptr, bad[0], side="right")) - 1
        raise ValueError(f"{what} {item}: dimension {flat[bad[0]]} is outside [0, {dimensions})")
    bucket_of = np.repeat(np.tile(np.arange(buckets), len(lengths_array)), lengths_array.ravel())
    values = np.concatenate(weights) if weights else np.empty(0)
    if not np.isfinite(values).all():
        raise ValueError(f"{what} weights contain NaN or infinite values")
    terms = bucket_of * dimensions + flat
    # A binary vector cannot hold a dimension twice; a repeat would be counted twice in Eq. 7.
    keys = np.sort(np.repeat(np.arange(len(indptr) - 1), np.diff(indptr)) * width + terms)
    repeated = np.flatnonzero(keys[1:] == keys[:-1])
    if repeated.size:
        raise ValueError(f"{what} {keys[repeated[0]] // width} repeats a dimension in a bucket")
    return indptr, terms, values


def indptr_of(counts: np.ndarray) -> np.ndarray:
    """CSR row pointers from per-row counts: [0, c0, c0 + c1, ...] as int64."""
    return np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)


def densify(rows: np.ndarray, terms: np.ndarray, values: np.ndarray, width: int) -> np.ndarray:
    """CSR rows back to a dense float32 [items, width] matrix (for brute-force ground truth)."""
    matrix = np.zeros((len(rows) - 1, width), dtype=np.float32)
    matrix[np.repeat(np.arange(len(rows) - 1), np.diff(rows)), terms] = values
    return matrix


def top_k_rows(scores: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Exact per-row top-k of a float32 [q, n] score block: score desc, ties by lower row (`sort_rows`)."""
    size = scores.shape[1]
    if k == size:
        return sort_rows(np.broadcast_to(np.arange(size), scores.shape), scores)
    top = np.argpartition(-scores, k - 1, axis=1)[:, :k]
    top, top_scores = sort_rows(top, np.take_along_axis(scores, top, axis=1))
    # argpartition chooses arbitrarily among documents tied with the k-th score (common: binary scores
    # are small integers). In such rows, keep everything above it plus the lowest tied rows: O(n), no sort.
    kth = top_scores[:, -1:]
    redo = np.count_nonzero(scores == kth, axis=1) > np.count_nonzero(top_scores == kth, axis=1)
    for row in np.flatnonzero(redo):
        above = np.flatnonzero(scores[row] > kth[row])
        chosen = np.concatenate([above, np.flatnonzero(scores[row] == kth[row])[: k - above.size]])
        order = np.lexsort((chosen, -scores[row, chosen]))
        top[row], top_scores[row] = chosen[order], scores[row, chosen[order]]
    return top, top_scores
