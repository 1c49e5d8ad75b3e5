"""Exact top-k by dot product in numpy: the ground truth the ScaNN index is measured against.

It must be right before it is fast, so ties are resolved exactly (by corpus index,
even at the k-th place), and memory is bounded by scoring blocks of queries rather
than the whole (q × n) matrix, which at 10k queries × 1M products would be 40 GB.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from index_builder.searcher import (
    SearchResult,
    as_corpus,
    as_query_matrix,
    effective_k,
    make_result,
    sort_rows,
)

# Working memory per query block: the float32 score matrix plus argpartition's int64 indices.
DEFAULT_BLOCK_BYTES = 512 * 1024 * 1024
_BYTES_PER_CELL = 4 + 8


class ExactSearcher:
    """Brute-force top-k over an in-memory corpus; same contract as `ScannIndex.search`.

    Args:
        embeddings: (n, d) float vectors, stored as float32.
        ids: n unique product ids; ``ids[i]`` names row i.
        max_block_bytes: working-memory budget per query block (scores + partition indices).
    """

    def __init__(
        self,
        embeddings: np.ndarray,
        ids: Sequence[str],
        *,
        max_block_bytes: int = DEFAULT_BLOCK_BYTES,
    ) -> None:
        self._embeddings, self._ids = as_corpus(embeddings, ids)
        if max_block_bytes < 1:
            raise ValueError(f"max_block_bytes must be positive, got {max_block_bytes}")
        self._max_block_bytes = max_block_bytes

    @property
    def dimension(self) -> int:
        return int(self._embeddings.shape[1])

    @property
    def size(self) -> int:
        return int(self._embeddings.shape[0])

    @property
    def ids(self) -> tuple[str, ...]:
        return tuple(self._ids.tolist())

    def __len__(self) -> int:
        return self.size

    def __repr__(self) -> str:
        return f"ExactSearcher({self.size} × {self.dimension})"

    @property
    def query_block_size(self) -> int:
        """Queries scored at once so that (block × n) cells fit the memory budget (at least 1)."""
        return max(1, self._max_block_bytes // (self.size * _BYTES_PER_CELL))

    def search(self, queries: np.ndarray, k: int) -> SearchResult:
        """Top-min(k, n) corpus rows per query by dot product, ties broken by lower row index."""
        matrix = as_query_matrix(queries, self.dimension)
        k_eff = effective_k(k, self.size)
        indices = np.empty((matrix.shape[0], k_eff), dtype=np.int64)
        scores = np.empty((matrix.shape[0], k_eff), dtype=np.float32)
        block = self.query_block_size
        for start in range(0, matrix.shape[0], block):
            stop = start + block
            indices[start:stop], scores[start:stop] = self._top_k(matrix[start:stop], k_eff)
        return make_result(indices, scores, self._ids)

    def _top_k(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        all_scores = queries @ self._embeddings.T
        if k == self.size:
            everything = np.broadcast_to(np.arange(self.size), all_scores.shape)
            return sort_rows(everything, all_scores)
        # argpartition finds the k best in O(n) per row; only those k are then sorted.
        top = np.argpartition(-all_scores, k - 1, axis=1)[:, :k]
        top_scores = np.take_along_axis(all_scores, top, axis=1)
        top, top_scores = sort_rows(top, top_scores)
        # argpartition picks arbitrarily among vectors tied with the k-th score. Where a row has
        # such ties beyond its selection, redo that row with a full sort so the lowest indices win.
        kth = top_scores[:, -1:]
        tied_total = np.count_nonzero(all_scores == kth, axis=1)
        tied_kept = np.count_nonzero(top_scores == kth, axis=1)
        for row in np.flatnonzero(tied_total > tied_kept):
            order = np.lexsort((np.arange(self.size), -all_scores[row]))[:k]
            top[row], top_scores[row] = order, all_scores[row, order]
        return top, top_scores
