"""ExactSearcher is the ground truth, so it is checked against the most naive top-k there is."""

from __future__ import annotations

import numpy as np
import pytest

from index_builder import ExactSearcher


def naive_top_k(queries: np.ndarray, embeddings: np.ndarray, k: int) -> np.ndarray:
    """Full sort of every row by (score descending, index ascending)."""
    scores = queries @ embeddings.T
    return np.array([sorted(range(len(row)), key=lambda i: (-row[i], i))[:k] for row in scores])


@pytest.fixture(scope="module")
def tied_corpus() -> tuple[np.ndarray, np.ndarray, list[str]]:
    # Small integer vectors: dot products are exact in float32 and tie often, also at the k-th place.
    rng = np.random.default_rng(7)
    embeddings = rng.integers(-2, 3, size=(400, 6)).astype(np.float32)
    queries = rng.integers(-2, 3, size=(25, 6)).astype(np.float32)
    return embeddings, queries, [f"p{i}" for i in range(400)]


@pytest.mark.parametrize("k", [1, 7, 50, 399, 400, 1_000])
@pytest.mark.parametrize("block_bytes", [400 * 12, 400 * 12 * 4, 512 * 1024 * 1024])
def test_matches_naive_full_sort_including_ties(tied_corpus, k: int, block_bytes: int) -> None:
    embeddings, queries, ids = tied_corpus
    searcher = ExactSearcher(embeddings, ids, max_block_bytes=block_bytes)
    result = searcher.search(queries, k)
    expected = naive_top_k(queries, embeddings, k)
    np.testing.assert_array_equal(result.indices, expected)
    np.testing.assert_array_equal(result.scores, np.take_along_axis(queries @ embeddings.T, expected, axis=1))
    assert result.ids == [[ids[i] for i in row] for row in expected]
    assert result.k == min(k, 400) and result.scores.dtype == np.float32


def test_memory_bound_sets_query_block() -> None:
    searcher = ExactSearcher(np.eye(1_000, 8, dtype=np.float32), [str(i) for i in range(1_000)])
    # 512 MiB / (1000 cells × 12 bytes) queries per block; never below one query
    assert searcher.query_block_size == 512 * 1024 * 1024 // 12_000
    ids = [str(i) for i in range(10)]
    tiny_budget = ExactSearcher(np.eye(10, 8, dtype=np.float32), ids, max_block_bytes=1)
    assert tiny_budget.query_block_size == 1


def test_float64_inputs_are_scored_as_float32(tied_corpus) -> None:
    embeddings, queries, ids = tied_corpus
    result = ExactSearcher(embeddings.astype(np.float64), ids).search(queries.astype(np.float64), 5)
    assert result.scores.dtype == np.float32
    np.testing.assert_array_equal(result.indices, naive_top_k(queries, embeddings, 5))


@pytest.mark.parametrize(
    "make",
    [
        lambda e, i: ExactSearcher(e, i[:-1]),
        lambda e, i: ExactSearcher(e, ["x"] * len(i)),
        lambda e, i: ExactSearcher(np.full_like(e, np.nan), i),
        lambda e, i: ExactSearcher(e.astype(np.int32), i),
        lambda e, i: ExactSearcher(e, i).search(e[:, :3], 5),
        lambda e, i: ExactSearcher(e, i).search(e[:2], 0),
        lambda e, i: ExactSearcher(e, i).search(np.full((1, e.shape[1]), np.inf, dtype=np.float32), 5),
    ],
)
def test_rejects_bad_input(tied_corpus, make) -> None:
    embeddings, _, ids = tied_corpus
    with pytest.raises(ValueError):
        make(embeddings, ids)
