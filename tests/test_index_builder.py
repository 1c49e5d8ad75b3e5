"""ScannIndexBuilder / ScannIndexConfig: the derivation rule, validation, and recall against exact search.

Real ScaNN on seeded clustered unit vectors (20k × 32, 50 clusters, noise as large as the
cluster spread so that clusters overlap the way real embedding neighbourhoods do).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from index_builder import (
    ExactSearcher,
    ReorderPrecision,
    ScannIndex,
    ScannIndexBuilder,
    ScannIndexConfig,
    Scoring,
    Searcher,
    SearchResult,
)
from index_builder.builder import config_for_corpus
from index_builder.config import leaves_for_k

N, DIM, CLUSTERS = 20_000, 32, 50
# Below n/20, so for_corpus builds a tree (141 leaves) rather than brute force.
MAX_K = 500
# Measured over repeated builds (ScaNN 1.4.2 k-means is not seeded, so builds differ slightly):
# recall@10 = 1.0, recall@1000 = 0.986-0.987. Broken variants of the same index fail: 1 leaf ->
# recall@10 ≈ 0.55; 5 % of the leaves -> recall@1000 ≈ 0.70; no re-ranking slack -> ≈ 0.85.
RECALL_AT_10_MIN = 0.98
RECALL_AT_1000_MIN = 0.97


def clustered_unit_vectors(rng: np.random.Generator, centres: np.ndarray, count: int) -> np.ndarray:
    points = centres[rng.integers(0, len(centres), count)] + rng.normal(size=(count, centres.shape[1]))
    return (points / np.linalg.norm(points, axis=1, keepdims=True)).astype(np.float32)


@pytest.fixture(scope="module")
def corpus() -> tuple[np.ndarray, list[str], np.ndarray]:
    rng = np.random.default_rng(20240611)
    centres = rng.normal(size=(CLUSTERS, DIM))
    embeddings = clustered_unit_vectors(rng, centres, N)
    queries = clustered_unit_vectors(rng, centres, 200)
    return embeddings, [f"prod-{i:05d}" for i in range(N)], queries


@pytest.fixture(scope="module")
def index(corpus: tuple[np.ndarray, list[str], np.ndarray]) -> ScannIndex:
    embeddings, ids, _ = corpus
    return ScannIndexBuilder.for_corpus(N, DIM, depth=MAX_K).build(embeddings, ids)


@pytest.fixture(scope="module")
def exact(corpus: tuple[np.ndarray, list[str], np.ndarray]) -> ExactSearcher:
    embeddings, ids, _ = corpus
    return ExactSearcher(embeddings, ids)


def recall(approximate: SearchResult, truth: SearchResult) -> float:
    """Mean over queries of |approximate top-k ∩ exact top-k| / k."""
    pairs = zip(approximate.ids, truth.ids, strict=True)
    return float(np.mean([len(set(found) & set(true)) / len(true) for found, true in pairs]))


# ---- the derivation rule ----


@pytest.mark.parametrize(
    ("n", "max_k", "expected"),
    [
        # tiny corpus: brute force
        (1_000, 10, {"scoring": Scoring.BRUTE_FORCE, "num_leaves": None, "reorder_candidates": None}),
        (4_999, 10, {"scoring": Scoring.BRUTE_FORCE, "num_leaves": None}),
        # k >= n/20: exact search is faster than any index, so brute force
        (20_000, 10_000, {"scoring": Scoring.BRUTE_FORCE, "num_leaves": None}),
        (20_000, 1_000, {"scoring": Scoring.BRUTE_FORCE}),
        (100_000, 10_000, {"scoring": Scoring.BRUTE_FORCE}),
        (200_000, 10_000, {"scoring": Scoring.BRUTE_FORCE}),
        # 2 sqrt(n) leaves; stored settings for k = 10: ceil(leaves · 0.06·10^0.3) searched, reorder 1000
        (5_000, 10, {"num_leaves": 141, "num_leaves_to_search": 17, "reorder_candidates": 1_000}),
        (20_000, 500, {"num_leaves": 283, "num_leaves_to_search": 34, "reorder_candidates": 1_000}),
        (200_000, 1_000, {"num_leaves": 894, "num_leaves_to_search": 108, "reorder_candidates": 1_000}),
        (1_000_000, 10, {"num_leaves": 2_000, "num_leaves_to_search": 240, "training_sample_size": 250_000}),
        (1_000_000, 10_000, {"num_leaves_to_search": 240, "reorder_candidates": 1_000}),
        (2_000_000, 10_000, {"num_leaves": 2_828, "num_leaves_to_search": 339}),
        # leaves capped at 4096
        (
            50_000_000,
            100,
            {"num_leaves": 4_096, "num_leaves_to_search": 491, "training_sample_size": 409_600},
        ),
    ],
)
def test_for_corpus_follows_documented_rule(n: int, max_k: int, expected: dict[str, object]) -> None:
    config = ScannIndexBuilder.for_corpus(n, 64, depth=max_k).create_config()
    for name, value in expected.items():
        assert getattr(config, name) == value, (name, config)
    if config.scoring is Scoring.ASYMMETRIC_HASHING:
        k = min(max_k, n)
        assert config.num_leaves is not None and config.num_leaves_to_search is not None
        assert config.num_leaves == min(4_096, round(2 * math.sqrt(n)))
        assert k < n / 20
        # stored settings serve k = 10: at least a tenth of the leaves, 1,000 candidates
        assert config.num_leaves_to_search >= config.num_leaves / 10
        assert config.reorder_candidates == min(n, 1_000)
        # a search for k widens to max(0.06·k^0.3, 10·k/n) of the leaves (at least the stored ones)
        # and 8·k candidates
        expected_fraction = min(1.0, max(0.10, 0.06 * k**0.3, 10 * k / n))
        assert config.search_leaves(k) == max(
            config.num_leaves_to_search, math.ceil(config.num_leaves * expected_fraction - 1e-9)
        )
        assert config.search_reorder(k) == max(min(n, 1_000), min(n, 8 * k))
        assert config.training_sample_size == min(n, max(250_000, 100 * config.num_leaves))
        assert (config.dimensions_per_block, config.anisotropic_quantization_threshold) == (2, 0.2)


def test_for_corpus_caps_k_and_block_width() -> None:
    assert ScannIndexBuilder.for_corpus(3, 8, depth=10_000).create_config().num_vectors == 3
    one_dim = ScannIndexBuilder.for_corpus(50_000, 1, depth=10).create_config()
    assert one_dim.dimensions_per_block == 1


def test_builder_records_steps_and_does_no_work_until_build() -> None:
    builder = ScannIndexBuilder(dimension=DIM, num_vectors=N).tree(100, 10, 5_000).score_ah(2).reorder(500)
    config = builder.create_config()
    assert "tree(num_leaves=100" in repr(builder)
    assert "100 leaves, search 10" in str(config)
    assert config == ScannIndexConfig.from_json(config.to_json())
    assert config.to_dict()["scoring"] == "asymmetric_hashing"
    # AH without a tree still trains its codebooks on a (capped) sample
    no_tree = ScannIndexBuilder(8, 300_000).score_ah().reorder(100).create_config()
    assert no_tree.training_sample_size == 250_000


@pytest.mark.parametrize(
    "make",
    [
        lambda: ScannIndexBuilder(DIM, N).tree(100, 10, 5_000).tree(100, 10, 5_000),
        lambda: ScannIndexBuilder(DIM, N).score_ah(2).score_brute_force(),
        lambda: ScannIndexBuilder(DIM, N).tree(100, 10, 5_000).create_config(),  # no scoring
        lambda: ScannIndexBuilder(DIM, N).score_ah(2).create_config(),  # AH without reorder
        lambda: ScannIndexBuilder(DIM, N).score_brute_force().reorder(100).create_config(),
        lambda: ScannIndexBuilder(DIM, N).tree(100, 101, 5_000).score_brute_force().create_config(),
        lambda: ScannIndexBuilder(DIM, N).tree(100, 0, 5_000).score_brute_force().create_config(),
        lambda: ScannIndexBuilder(DIM, N).tree(100, 10, 50).score_brute_force().create_config(),
        lambda: ScannIndexBuilder(DIM, N).tree(N + 1, 10, N).score_brute_force().create_config(),
        lambda: ScannIndexBuilder(DIM, N).score_ah(DIM + 1).reorder(100).create_config(),
        lambda: ScannIndexBuilder(DIM, N).score_ah(2, 1.5).reorder(100).create_config(),
        lambda: ScannIndexBuilder(DIM, N).score_ah(2).reorder(N + 1).create_config(),
        lambda: ScannIndexBuilder(DIM, N).tree(True, 1, 5_000).score_brute_force().create_config(),
        lambda: ScannIndexBuilder(0, N),
        lambda: ScannIndexBuilder.for_corpus(N, DIM, depth=0),
        lambda: ScannIndexConfig(dimension=DIM, num_vectors=N, scoring="brute_force", distance="cosine"),
        lambda: ScannIndexConfig(dimension=DIM, num_vectors=N, scoring="pq"),
        lambda: ScannIndexConfig.from_json('{"dimension": 4}'),
        lambda: ScannIndexConfig.from_json("not json"),
    ],
)
def test_invalid_configurations_raise_value_error(make) -> None:
    with pytest.raises(ValueError):
        make()


@pytest.mark.parametrize(
    ("embeddings", "ids"),
    [
        (np.ones((N, DIM), dtype=np.float32), None),  # not unit norm
        (np.zeros((N - 1, DIM), dtype=np.float32), None),  # wrong shape
        (None, ["same"] * N),  # repeated ids
    ],
)
def test_build_rejects_bad_corpus(corpus, embeddings, ids) -> None:
    good_embeddings, good_ids, _ = corpus
    builder = ScannIndexBuilder(DIM, N).score_brute_force()
    with pytest.raises(ValueError):
        builder.build(good_embeddings if embeddings is None else embeddings, good_ids if ids is None else ids)


# ---- recall against the exact ground truth ----


def test_both_searchers_satisfy_protocol(index: ScannIndex, exact: ExactSearcher) -> None:
    assert isinstance(index, Searcher) and isinstance(exact, Searcher)
    assert (index.size, index.dimension) == (exact.size, exact.dimension) == (N, DIM)


def test_recall_at_10_and_1000_against_exact(corpus, index: ScannIndex, exact: ExactSearcher) -> None:
    _, _, queries = corpus
    at_10 = recall(index.search(queries, 10), exact.search(queries, 10))
    at_1000 = recall(index.search(queries, 1000), exact.search(queries, 1000))
    assert at_10 >= RECALL_AT_10_MIN, at_10
    assert at_1000 >= RECALL_AT_1000_MIN, at_1000


def test_thresholds_catch_a_broken_index(corpus, index: ScannIndex, exact: ExactSearcher) -> None:
    """The same index searched too narrowly, or without re-ranking slack, must fail the thresholds."""
    _, _, queries = corpus
    truth_1000 = exact.search(queries, 1000)
    one_leaf = recall(index.search(queries, 10, leaves_to_search=1), exact.search(queries, 10))
    # Leaves holding about 1.5 x 1,000 vectors: enough to fill k, far from every neighbour (fewer would
    # leave rows short, and a short row is searched again over every leaf).
    narrow = math.ceil(1.5 * 1000 * index.config.num_leaves / N)
    few_leaves = recall(index.search(queries, 1000, leaves_to_search=narrow), truth_1000)
    no_slack = recall(index.search(queries, 1000, pre_reorder_num_neighbors=1000), truth_1000)
    assert one_leaf < RECALL_AT_10_MIN and few_leaves < RECALL_AT_1000_MIN and no_slack < RECALL_AT_1000_MIN


def test_results_sorted_with_true_scores(corpus, index: ScannIndex) -> None:
    embeddings, _, queries = corpus
    result = index.search(queries[:20], 100)
    assert result.scores.dtype == np.float32 and result.scores.shape == (20, 100)
    assert np.all(np.diff(result.scores, axis=1) <= 0)
    true_scores = np.einsum("qd,qkd->qk", queries[:20], embeddings[result.indices])
    np.testing.assert_allclose(result.scores, true_scores, atol=1e-5)
    assert result.ids[3][0] == f"prod-{result.indices[3, 0]:05d}"


def test_k_equal_to_n_returns_every_id(corpus, index: ScannIndex) -> None:
    _, ids, queries = corpus
    for k in (N, N + 5):
        result = index.search(queries[:2], k)
        assert result.k == N
        for row in result.ids:
            assert sorted(row) == ids
        assert np.all(np.diff(result.scores, axis=1) <= 0)


def test_rows_one_leaf_cannot_fill_are_searched_again(corpus, index: ScannIndex, exact) -> None:
    """A leaf holds ~141 vectors; ScaNN pads the other 859 of k=1000 with NaN, we must not."""
    _, _, queries = corpus
    result = index.search(queries[:5], 1000, leaves_to_search=1)
    assert np.isfinite(result.scores).all() and result.scores.shape == (5, 1000)
    assert recall(result, exact.search(queries[:5], 1000)) >= RECALL_AT_1000_MIN


def test_tiny_corpus_brute_force_is_exact(corpus) -> None:
    embeddings, ids, queries = corpus
    small = ScannIndexBuilder.for_corpus(500, DIM, depth=50)
    assert small.create_config().scoring is Scoring.BRUTE_FORCE
    tiny = small.build(embeddings[:500], ids[:500])
    truth = ExactSearcher(embeddings[:500], ids[:500]).search(queries, 50)
    result = tiny.search(queries, 50)
    assert recall(result, truth) == 1.0
    np.testing.assert_allclose(result.scores, truth.scores, atol=1e-5)
    assert tiny.search(queries[:1], 10_000).k == 500


def test_search_validates_arguments(corpus, index: ScannIndex) -> None:
    _, _, queries = corpus
    for bad in (lambda: index.search(queries, 0), lambda: index.search(queries[:, :5], 10)):
        with pytest.raises(ValueError):
            bad()
    with pytest.raises(ValueError):
        index.search(queries, 10, leaves_to_search=index.config.num_leaves + 1)
    assert index.search(queries[:0], 10).scores.shape == (0, 10)


# ---- SOAR spilling, int8 re-ranking, search threads ----


def test_soar_and_int8_reorder_reach_scann_and_keep_recall(corpus, exact: ExactSearcher) -> None:
    embeddings, ids, queries = corpus
    builder = ScannIndexBuilder(DIM, N).tree(141, 17, N, soar_lambda=1.5).score_ah(2).reorder(1_000, "int8")
    config = builder.create_config()
    assert config.soar_lambda == 1.5 and config.reorder_precision is ReorderPrecision.INT8
    assert "SOAR spilling λ=1.5" in str(config) and "(int8)" in str(config)
    index = builder.build(embeddings, ids)
    scann_text = index._searcher.config()  # ScaNN's own text config: what it was really told
    assert "lambda: 1.5" in scann_text and "fixed_point" in scann_text
    # int8 re-ranking orders by approximate scores: measured 0.977 here (float32 re-ranking: 1.0).
    found = index.search(queries, 10)
    assert recall(found, exact.search(queries, 10)) >= 0.95
    true_scores = np.einsum("qd,qkd->qk", queries, embeddings[found.indices])
    assert np.abs(found.scores - true_scores).max() < 0.02
    assert ScannIndexConfig.from_json(config.to_json()) == config


@pytest.mark.parametrize(
    "make",
    [
        # SOAR without a tree
        lambda: ScannIndexConfig(dimension=DIM, num_vectors=N, scoring="brute_force", soar_lambda=1.5),
        lambda: ScannIndexBuilder(DIM, N).tree(100, 10, 5_000, soar_lambda=0).score_ah(2).reorder(100),
        lambda: ScannIndexBuilder(DIM, N).tree(100, 10, 5_000, soar_lambda=True).score_ah(2).reorder(100),
        lambda: ScannIndexBuilder(DIM, N).score_ah(2).reorder(100, "int4"),
        lambda: ScannIndexConfig(
            dimension=DIM, num_vectors=N, scoring="brute_force", reorder_precision="int8"
        ),
    ],
)
def test_spilling_and_precision_are_validated(make) -> None:
    with pytest.raises(ValueError):
        result = make()
        if isinstance(result, ScannIndexBuilder):
            result.create_config()


def test_configs_written_before_soar_and_precision_existed_still_load() -> None:
    config = ScannIndexBuilder.for_corpus(N, DIM, depth=MAX_K).create_config()
    old = config.to_dict()
    del old["soar_lambda"], old["reorder_precision"]
    assert ScannIndexConfig.from_dict(old) == config
    with pytest.raises(ValueError, match="unknown"):
        ScannIndexConfig.from_dict({**config.to_dict(), "spill": 2})


def test_search_threads_change_speed_not_results(corpus, index: ScannIndex) -> None:
    _, _, queries = corpus
    assert index.search_threads >= 1
    index.set_search_threads(1)
    one = index.search(queries, 100)
    index.set_search_threads(2)
    two = index.search(queries, 100)
    np.testing.assert_array_equal(one.indices, two.indices)
    assert index.search_threads == 2
    for bad in (0, True, 1.5):
        with pytest.raises(ValueError):
            index.set_search_threads(bad)


def test_config_for_corpus_without_settings_is_the_rule() -> None:
    assert config_for_corpus(50_000, 64, 100) == ScannIndexBuilder.for_corpus(50_000, 64, 100).create_config()


def test_config_for_corpus_settings_bring_what_they_imply() -> None:
    derived = config_for_corpus(50_000, 64, 100)
    assert derived.scoring is Scoring.ASYMMETRIC_HASHING and derived.num_leaves == 447
    exact = config_for_corpus(50_000, 64, 100, {"scoring": "brute_force", "num_leaves": 0})
    assert (exact.scoring, exact.num_leaves, exact.dimensions_per_block, exact.reorder_candidates) == (
        Scoring.BRUTE_FORCE,
        None,
        None,
        None,
    )
    assert exact.training_sample_size is None  # nothing is trained
    wider = config_for_corpus(50_000, 64, 100, {"num_leaves": 1000, "soar_lambda": 1.5})
    assert wider.num_leaves_to_search == leaves_for_k(1000, 50_000, 10)
    assert wider.training_sample_size == 50_000 and wider.soar_lambda == 1.5  # capped at the corpus
    # A corpus the rule scores exactly, asked for asymmetric hashing: ScaNN's defaults for its fields.
    small = config_for_corpus(2_000, 16, 10, {"scoring": "asymmetric_hashing", "reorder_precision": "int8"})
    assert (small.dimensions_per_block, small.reorder_candidates, small.training_sample_size) == (
        2,
        1000,
        2000,
    )
    assert small.reorder_precision is ReorderPrecision.INT8 and small.num_leaves is None
    with pytest.raises(ValueError, match="soar_lambda spills vectors into a second leaf: it needs a tree"):
        config_for_corpus(50_000, 64, 100, {"num_leaves": 0, "soar_lambda": 1.5})
    with pytest.raises(ValueError, match="num_leaves_to_search must be in"):
        config_for_corpus(50_000, 64, 100, {"num_leaves_to_search": 10_000})


def test_asymmetric_hashing_on_fewer_vectors_than_its_centres_is_a_clear_error() -> None:
    """ScaNN failed inside its C++ on a 2-shard nightly of 40 products, shown as a bug in madr."""
    settings = {"scoring": "asymmetric_hashing", "dimensions_per_block": 2, "reorder_candidates": 10}
    settings["anisotropic_quantization_threshold"] = 0.2
    with pytest.raises(ValueError, match="trains on 12: use --scoring brute_force"):
        config_for_corpus(20, 32, 10, {**settings, "training_sample_size": 12})
    assert config_for_corpus(20, 32, 10, {**settings, "training_sample_size": 16}).training_sample_size == 16
