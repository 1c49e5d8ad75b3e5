"""ExactSearcher is the ground truth, so it is checked against the most naive top-k there is.

Most corpora here hold multiples of 1/4 in few dimensions: their dot products are exact in float32
whatever order a BLAS sums them in, so the answer is unique and ties (at the k-th place too) are
frequent. Small ``chunk_size`` values make the corpus span many chunks, so seeding, survivor
filtering (by comparison, and by 64-score segments when the chunk is a multiple of 64), merging and
the sampled threshold all run on a few thousand rows.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import index_builder.exact as exact_module
from index_builder import ExactSearcher


def naive_top_k(queries: np.ndarray, embeddings: np.ndarray, k: int) -> np.ndarray:
    """Full sort of every row by (score descending, index ascending)."""
    scores = queries @ embeddings.T
    return np.array([sorted(range(len(row)), key=lambda i: (-row[i], i))[:k] for row in scores])


def reference_top_k(queries: np.ndarray, embeddings: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """(indices, scores) by a numpy lexsort of the full score rows: score descending, index ascending."""
    scores = queries.astype(np.float32) @ embeddings.astype(np.float32).T
    order = np.lexsort((np.broadcast_to(np.arange(scores.shape[1]), scores.shape), -scores), axis=1)[:, :k]
    return order, np.take_along_axis(scores, order, axis=1)


def quarters(rng: np.random.Generator, shape: tuple[int, int], spread: int = 2) -> np.ndarray:
    return (rng.integers(-spread, spread + 1, size=shape) / 4).astype(np.float32)


def assert_matches_reference(
    searcher: ExactSearcher, queries: np.ndarray, embeddings: np.ndarray, k: int
) -> None:
    result = searcher.search(queries, k)
    indices, scores = reference_top_k(queries, embeddings, k)
    np.testing.assert_array_equal(result.indices, indices)
    np.testing.assert_array_equal(result.scores, scores)
    assert result.k == min(k, len(embeddings)) and result.scores.dtype == np.float32


@pytest.fixture(scope="module")
def tied_corpus() -> tuple[np.ndarray, np.ndarray, list[str]]:
    # Small integer vectors: dot products are exact in float32 and tie often, also at the k-th place.
    rng = np.random.default_rng(7)
    embeddings = rng.integers(-2, 3, size=(400, 6)).astype(np.float32)
    queries = rng.integers(-2, 3, size=(25, 6)).astype(np.float32)
    return embeddings, queries, [f"p{i}" for i in range(400)]


@pytest.mark.parametrize("k", [1, 7, 50, 399, 400, 1_000])
@pytest.mark.parametrize("block_bytes", [1, 400 * 60, 512 * 1024 * 1024])
@pytest.mark.parametrize("chunk_size", [1, 7, 64, 8192])
def test_matches_naive_full_sort_including_ties(
    tied_corpus, k: int, block_bytes: int, chunk_size: int
) -> None:
    embeddings, queries, ids = tied_corpus
    searcher = ExactSearcher(embeddings, ids, max_block_bytes=block_bytes, chunk_size=chunk_size)
    result = searcher.search(queries, k)
    expected = naive_top_k(queries, embeddings, k)
    np.testing.assert_array_equal(result.indices, expected)
    np.testing.assert_array_equal(result.scores, np.take_along_axis(queries @ embeddings.T, expected, axis=1))
    assert result.ids == [[ids[i] for i in row] for row in expected]
    assert result.k == min(k, 400) and result.scores.dtype == np.float32


@pytest.mark.parametrize("k", [1, 10, 63, 64, 65, 500, 2_999, 3_000, 5_000])
@pytest.mark.parametrize("chunk_size", [64, 100, 512])
def test_matches_numpy_reference_across_chunk_boundaries(k: int, chunk_size: int) -> None:
    rng = np.random.default_rng(k * 31 + chunk_size)
    embeddings, queries = quarters(rng, (3_000, 5)), quarters(rng, (40, 5))
    searcher = ExactSearcher(embeddings, [f"p{i}" for i in range(3_000)], chunk_size=chunk_size)
    assert_matches_reference(searcher, queries, embeddings, k)


def test_many_shapes_match_the_reference() -> None:
    """Seeded random corpora, query counts, k and chunk sizes: ragged last chunks, one-row chunks,
    blocks of one query, sorted corpora. Fixed seeds, so a failure reproduces."""
    rng = np.random.default_rng(2024)
    for _ in range(60):
        n, dim, count = int(rng.integers(1, 1_500)), int(rng.integers(1, 6)), int(rng.integers(1, 12))
        embeddings, queries = quarters(rng, (n, dim)), quarters(rng, (count, dim))
        if rng.random() < 0.3:
            embeddings = embeddings[np.argsort(embeddings.sum(axis=1), kind="stable")]
        chunk = int(rng.choice([1, 3, 64, 128, int(rng.integers(2, 300))]))
        budget = int(rng.choice([1, 100_000, 10**9]))
        searcher = ExactSearcher(
            embeddings, [f"p{i}" for i in range(n)], max_block_bytes=budget, chunk_size=chunk
        )
        assert_matches_reference(searcher, queries, embeddings, int(rng.integers(1, n + 3)))


def test_ascending_scores_make_every_chunk_survive() -> None:
    """Rows sorted by score: each chunk beats the whole top-k so far, the filter's worst case."""
    rng = np.random.default_rng(5)
    embeddings = quarters(rng, (2_000, 3), spread=8)
    embeddings = embeddings[np.argsort(embeddings.sum(axis=1), kind="stable")]
    queries = np.ones((6, 3), dtype=np.float32)
    searcher = ExactSearcher(embeddings, [f"p{i}" for i in range(2_000)], chunk_size=128)
    for k in (1, 10, 300):
        assert_matches_reference(searcher, queries, embeddings, k)


def test_random_floats_agree_with_numpy_up_to_rounding() -> None:
    # BLAS kernels may round differently from numpy's: scores agree to float32 rounding, and a
    # differing id is only allowed where numpy's own scores are that close.
    rng = np.random.default_rng(11)
    embeddings = rng.standard_normal((20_000, 32)).astype(np.float32)
    embeddings /= np.linalg.norm(embeddings, axis=1, keepdims=True)
    queries = embeddings[:50] + 0.1 * rng.standard_normal((50, 32)).astype(np.float32)
    searcher = ExactSearcher(embeddings, [f"p{i}" for i in range(20_000)], chunk_size=1_024)
    for k in (10, 1_000):
        result = searcher.search(queries, k)
        indices, scores = reference_top_k(queries, embeddings, k)
        np.testing.assert_allclose(result.scores, scores, atol=1e-5, rtol=0)
        differ = np.nonzero(result.indices != indices)
        true_scores = (queries @ embeddings.T)[differ[0], result.indices[differ]]
        np.testing.assert_allclose(true_scores, scores[differ], atol=1e-5, rtol=0)
        assert len(differ[0]) < 0.01 * result.indices.size


def test_large_k_uses_the_sampled_threshold(monkeypatch) -> None:
    rng = np.random.default_rng(3)
    embeddings, queries = quarters(rng, (6_000, 6)), quarters(rng, (30, 6))
    calls = []
    sample = exact_module._BlockSearch._sample_threshold
    monkeypatch.setattr(
        exact_module._BlockSearch,
        "_sample_threshold",
        lambda self, q: calls.append(len(q)) or sample(self, q),
    )
    searcher = ExactSearcher(embeddings, [f"p{i}" for i in range(6_000)], chunk_size=64)
    assert_matches_reference(searcher, queries, embeddings, exact_module.SAMPLE_MIN_K)
    assert calls == [30]


def test_sampled_threshold_keeps_few_survivors_and_rarely_overshoots(monkeypatch) -> None:
    """On continuous scores the threshold must sit below every query's k-th (no second search) yet
    let through only a few times k rows: the point of sampling."""
    rng = np.random.default_rng(8)
    embeddings = rng.standard_normal((20_000, 16)).astype(np.float32)
    queries = rng.standard_normal((200, 16)).astype(np.float32)
    k = exact_module.SAMPLE_MIN_K
    survivors, streams = [], []
    add, stream = exact_module._Survivors.add, exact_module._BlockSearch._stream

    def counting_add(self, scores, cut, *args):
        survivors.append(int((scores.numpy() > cut).sum()))
        return add(self, scores, cut, *args)

    monkeypatch.setattr(exact_module._Survivors, "add", counting_add)
    monkeypatch.setattr(
        exact_module._BlockSearch,
        "_stream",
        lambda self, q, t: streams.append(t is None) or stream(self, q, t),
    )
    result = ExactSearcher(embeddings, [f"p{i}" for i in range(20_000)], chunk_size=512).search(queries, k)
    assert streams == [False]
    assert k * len(queries) <= sum(survivors) < 4 * k * len(queries)  # seeded by a chunk instead: 5 k
    np.testing.assert_allclose(result.scores, reference_top_k(queries, embeddings, k)[1], atol=1e-5, rtol=0)


def test_queries_the_sample_misleads_are_searched_again(monkeypatch) -> None:
    """The sampled rows are the corpus's best: the threshold overshoots and every query falls back."""
    n, k = 4_000, exact_module.SAMPLE_MIN_K
    ids = [f"p{i}" for i in range(n)]
    embeddings = np.zeros((n, 4), dtype=np.float32)
    # _BlockSearch samples every ceil(n / sample size)-th row
    embeddings[:: int(np.ceil(n / ExactSearcher(embeddings, ids, chunk_size=64)._sample_size(k))), 0] = 1.0
    embeddings[:, 1] = np.arange(n, dtype=np.float32) / n  # below the sampled rows, distinct
    queries = np.array([[8.0, 1.0, 0.0, 0.0], [8.0, 0.5, 0.0, 0.0]], dtype=np.float32)
    streams = []
    stream = exact_module._BlockSearch._stream
    monkeypatch.setattr(
        exact_module._BlockSearch,
        "_stream",
        lambda self, q, t: streams.append(t is None) or stream(self, q, t),
    )
    searcher = ExactSearcher(embeddings, ids, chunk_size=64)
    assert_matches_reference(searcher, queries, embeddings, k)
    assert streams == [False, True]


def test_keys_sort_as_score_descending_then_row_and_read_back_exactly() -> None:
    rng = np.random.default_rng(4)
    scores = np.concatenate(
        [
            rng.standard_normal(500),
            rng.integers(-3, 4, 500),
            [0.0, -0.0, -0.0, 0.0, 3e38, -3e38, 1e-45, -1e-45],
        ]
    ).astype(np.float32)
    rows = rng.permutation(len(scores)).astype(np.int64)
    keys = exact_module._key(scores, rows)
    order = np.argsort(keys)
    np.testing.assert_array_equal(order, np.lexsort((rows, -scores)))  # -0.0 ties +0.0: by row
    np.testing.assert_array_equal(exact_module._score_of(keys), scores)  # -0.0 reads back as 0.0, its equal
    padding = np.array([exact_module._PADDING])
    assert keys.max() < padding[0] and exact_module._score_of(padding)[0] == -np.inf


def test_duplicates_tied_with_the_kth_never_survive(monkeypatch) -> None:
    """Later rows lose every tie, so a corpus of one repeated product is settled by the seed alone."""
    merges = []
    merge = exact_module._Survivors.merge
    monkeypatch.setattr(
        exact_module._Survivors, "merge", lambda self, *a: merges.append(1) or merge(self, *a)
    )
    embeddings = np.ones((4_000, 4), dtype=np.float32)
    result = ExactSearcher(embeddings, [f"p{i}" for i in range(4_000)], chunk_size=64).search(
        embeddings[:3], 10
    )
    np.testing.assert_array_equal(result.indices, np.tile(np.arange(10), (3, 1)))
    assert len(merges) == 1


def test_k_beyond_the_corpus_returns_it_all_sorted(tied_corpus) -> None:
    embeddings, queries, ids = tied_corpus
    result = ExactSearcher(embeddings, ids, chunk_size=64).search(queries, 10**9)
    assert result.k == 400
    np.testing.assert_array_equal(result.indices, naive_top_k(queries, embeddings, 400))


def test_no_queries_give_an_empty_result(tied_corpus) -> None:
    embeddings, _, ids = tied_corpus
    result = ExactSearcher(embeddings, ids).search(np.empty((0, 6), dtype=np.float32), 5)
    assert len(result) == 0 and result.ids == [] and result.scores.shape == (0, 5)


def test_reduced_matmul_precision_scores_with_numpy(tied_corpus, monkeypatch) -> None:
    # Below "highest", torch may multiply float32 in bfloat16 where the CPU has it; the searcher must
    # not call torch.mm then (on CPUs without bfloat16 the two would agree, so the call is what is checked).
    embeddings, queries, ids = tied_corpus
    searcher = ExactSearcher(embeddings, ids, chunk_size=64)

    def no_mm(*args, **kwargs):
        raise AssertionError("torch.mm used below highest float32 matmul precision")

    monkeypatch.setattr(torch, "mm", no_mm)
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("medium")
    try:
        result = searcher.search(queries, 20)
    finally:
        torch.set_float32_matmul_precision(before)
    np.testing.assert_array_equal(result.indices, naive_top_k(queries, embeddings, 20))


def test_memory_bound_sets_query_block() -> None:
    embeddings, ids = np.eye(1_000, 8, dtype=np.float32), [str(i) for i in range(1_000)]
    searcher = ExactSearcher(embeddings, ids, max_block_bytes=10 * 1024 * 1024, chunk_size=256)
    assert searcher.corpus_chunk_size == 256
    for k in (1, 100, 1_000):
        block = searcher.query_block_size_for(k)
        assert 1 < block < exact_module.MAX_QUERY_BLOCK
        assert block * searcher._bytes_per_query(k) <= 10 * 1024 * 1024
    # a wider first chunk and more candidates per query leave room for fewer queries
    assert (
        searcher.query_block_size_for(1_000) < searcher.query_block_size_for(100) < searcher.query_block_size
    )
    assert ExactSearcher(embeddings, ids).query_block_size == exact_module.MAX_QUERY_BLOCK
    assert ExactSearcher(embeddings, ids, max_block_bytes=1).query_block_size == 1


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
        lambda e, i: ExactSearcher(e, i, chunk_size=0),
        lambda e, i: ExactSearcher(e, i, max_block_bytes=0),
        lambda e, i: ExactSearcher(e, i).search(e[:, :3], 5),
        lambda e, i: ExactSearcher(e, i).search(e[:2], 0),
        lambda e, i: ExactSearcher(e, i).search(np.full((1, e.shape[1]), np.inf, dtype=np.float32), 5),
    ],
)
def test_rejects_bad_input(tied_corpus, make) -> None:
    embeddings, _, ids = tied_corpus
    with pytest.raises(ValueError):
        make(embeddings, ids)


def test_scores_that_could_overflow_are_refused(tied_corpus) -> None:
    # ±inf and NaN scores would break the keys (NaN has no order) and the padding (-inf).
    embeddings, queries, ids = tied_corpus
    searcher = ExactSearcher(embeddings * 1e19, ids)
    with pytest.raises(ValueError, match="overflow"):
        searcher.search(queries * 1e19, 5)
    assert searcher.search(queries, 5).k == 5  # the corpus itself is fine


def test_sort_rows_sorts_only_the_rows_out_of_order_and_breaks_ties_by_index() -> None:
    """ScaNN returns rows by score but ties in its own order: those rows (and any out of order) are
    sorted, score descending then index ascending; strictly descending rows come back as they were."""
    from index_builder.searcher import make_result, sort_rows

    indices = np.array([[7, 3, 5], [9, 2, 4], [1, 8, 6]])
    scores = np.array([[0.9, 0.5, 0.1], [0.5, 0.5, 0.2], [0.1, 0.8, 0.3]], dtype=np.float32)
    before = indices.copy()
    got_indices, got_scores = sort_rows(indices, scores)
    assert got_indices.tolist() == [[7, 3, 5], [2, 9, 4], [8, 6, 1]]
    np.testing.assert_allclose(got_scores, [[0.9, 0.5, 0.1], [0.5, 0.5, 0.2], [0.8, 0.3, 0.1]])
    assert indices.tolist() == before.tolist()  # the caller's arrays are not reordered in place
    ordered = np.array([[3, 1]]), np.array([[0.7, 0.2]], dtype=np.float32)
    assert sort_rows(*ordered)[0] is ordered[0]
    ids = np.array([f"p{i}" for i in range(10)], dtype=object)
    result = make_result(got_indices, got_scores, ids)
    assert result.ids == [["p7", "p3", "p5"], ["p2", "p9", "p4"], ["p8", "p6", "p1"]]
