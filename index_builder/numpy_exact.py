"""Exact top-k by dot product in NumPy alone: what a search server scores exactly with, where torch is not
installed (`madr serve` loads its bundle without torch).

`ExactSearcher` is the fast one for batches of thousands of queries (blocked products on torch's threads,
survivor filtering); a server scores a handful of queries at a time, where one BLAS product of the
queries with the corpus and a partition per query is all it needs. The rules are `ExactSearcher`'s: score
descending, ties by corpus row ascending, exactly, even at the k-th place; k is capped at the corpus size.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from index_builder.searcher import (
    CorpusRows,
    SearchResult,
    as_corpus,
    as_query_matrix,
    effective_k,
    make_result,
)


class NumpyExactSearcher(CorpusRows):
    """Every vector of `embeddings` scored against each query: the exact top-k, ties by row."""

    def __init__(self, embeddings: np.ndarray, ids: Sequence[str]) -> None:
        self.corpus, self._ids = as_corpus(embeddings, ids)

    @property
    def dimension(self) -> int:
        return int(self.corpus.shape[1])

    @property
    def size(self) -> int:
        return int(self.corpus.shape[0])

    def search(self, queries: np.ndarray, k: int) -> SearchResult:
        matrix = as_query_matrix(queries, self.dimension)
        k = effective_k(k, self.size)
        scores = matrix @ self.corpus.T
        indices = np.empty((len(matrix), k), dtype=np.int64)
        for row, query_scores in enumerate(scores):
            # Every score at or above the k-th largest is a candidate: ties at the k-th place included.
            cut = np.partition(query_scores, self.size - k)[self.size - k]
            candidates = np.flatnonzero(query_scores >= cut)
            order = np.lexsort((candidates, -query_scores[candidates]))[:k]
            indices[row] = candidates[order]
        return make_result(indices, np.take_along_axis(scores, indices, axis=1), self._ids)
