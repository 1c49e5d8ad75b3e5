"""The one rule every index build follows: reach the recall target, and never ship an index slower
than exact scoring.

`tune_recall` widens an approximate index's search until it meets the target. On diffuse data that
can mean opening every leaf and re-ranking tens of thousands of candidates: an isotropic corpus of
200,000 vectors, tuned for recall@5,000, answered 176 queries/s where exact (brute-force) scoring
answered about 2,000. So after tuning, both are timed on the same held-out corpus vectors at the
same k, and the faster one ships; an approximate index that cannot reach the target at all falls
back to exact scoring too. The choice, with both speeds and the reason, goes into the manifest's
``recall`` entry, and the approximate index also records its recall@10, so a user who searches
shallower than ``max_k`` knows what they get.

`madr build-index` (`pipelines.index.single`) and the partitioned build (per shard) call
`train_within_target`; `ScannIndexBuilder.build` trains exactly the settings it is given, with no
target.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Sequence

import numpy as np

from index_builder.builder import config_for_corpus
from index_builder.config import ScannIndexConfig
from index_builder.exact import ExactSearcher
from index_builder.recall import (
    DEFAULT_TARGET_RECALL,
    RecallReport,
    RecallTargetError,
    measure_recall,
    recall_queries,
    tune_recall,
)
from index_builder.scann_index import ScannIndex

logger = logging.getLogger(__name__)

# Held-out corpus vectors each index is timed on (the same ones for both), and how often.
SPEED_QUERIES = 200
SPEED_REPEATS = 3
SHALLOW_K = 10


def exact_config(config: ScannIndexConfig) -> ScannIndexConfig:
    """The brute-force (exact scoring, no tree) config over the same corpus."""
    return config_for_corpus(
        config.num_vectors, config.dimension, settings={"scoring": "brute_force", "num_leaves": 0}
    )


def queries_per_second(index: ScannIndex | ExactSearcher, queries: np.ndarray, k: int) -> float:
    """The best of `SPEED_REPEATS` timed searches of `queries` at `k`, after one warm-up."""
    index.search(queries[:1], k)
    best = float("inf")
    for _ in range(SPEED_REPEATS):
        started = time.perf_counter()
        index.search(queries, k)
        best = min(best, time.perf_counter() - started)
    return len(queries) / max(best, 1e-9)


def train_within_target(
    config: ScannIndexConfig,
    embeddings: np.ndarray,
    ids: Sequence[str],
    max_k: int,
    target_recall: float | None = DEFAULT_TARGET_RECALL,
    *,
    evaluation_queries: np.ndarray | None = None,
) -> tuple[ScannIndex, RecallReport]:
    """Train `config` on `embeddings`, tune it to `target_recall` at min(max_k, n - 1), and return it,
    or an exact-scoring index when that one is faster or the target cannot be reached otherwise.

    The report says which it is (`exact`, `choice`), and why. With `target_recall` None or 0 the
    settings are kept as given and only measured (no fallback: the user chose them).
    """
    index = ScannIndex.train(config, embeddings, ids)
    try:
        index, report = tune_recall(
            index, embeddings, max_k, target_recall, evaluation_queries=evaluation_queries
        )
    except RecallTargetError as error:
        reason = f"the approximate index could not reach the target ({error})"
        return _exact(config, embeddings, ids, max_k, target_recall, reason, None, None)
    if report.exact or not target_recall:  # exact already (tune_recall says so), or settings as given
        return index, report
    k = report.k
    queries = np.ascontiguousarray(embeddings[recall_queries(embeddings, SPEED_QUERIES)], dtype=np.float32)
    exact = ScannIndex.train(exact_config(config), embeddings, ids)
    approximate_qps = queries_per_second(index, queries, k)
    exact_qps = queries_per_second(exact, queries, k)
    # madr's own exact search (a matrix product in torch) is not a ScaNN artifact, so it cannot ship in
    # the index's place; it is recorded so the figure shows when `--searcher exact` serves faster.
    searcher_qps = queries_per_second(ExactSearcher(embeddings, list(ids)), queries, k)
    speeds = {
        "approximate_qps": approximate_qps,
        "exact_qps": exact_qps,
        "exact_searcher_qps": searcher_qps,
        "k": k,
        "queries": len(queries),
    }
    if searcher_qps > max(approximate_qps, exact_qps):
        logger.warning(
            "at k=%d madr's exact searcher answers %.0f queries/s, the index %.0f: evaluate with --searcher "
            "auto or exact",
            k,
            searcher_qps,
            max(approximate_qps, exact_qps),
        )
    if approximate_qps < exact_qps:
        reason = (
            f"at the target recall the approximate index answers {approximate_qps:.0f} queries/s at k={k}, "
            f"exact scoring {exact_qps:.0f}"
        )
        return _exact(config, embeddings, ids, max_k, target_recall, reason, speeds, exact)
    shallow = measure_recall(index, embeddings, SHALLOW_K).recall_at_k if k > SHALLOW_K else None
    logger.info(
        "approximate index kept: %.0f queries/s against exact %.0f at k=%d", approximate_qps, exact_qps, k
    )
    return index, dataclasses.replace(
        report,
        choice="approximate",
        speed=speeds,
        recall_at_10=shallow,
    )


def _exact(
    config: ScannIndexConfig,
    embeddings: np.ndarray,
    ids: Sequence[str],
    max_k: int,
    target_recall: float | None,
    reason: str,
    speeds: dict | None,
    exact: ScannIndex | None,
) -> tuple[ScannIndex, RecallReport]:
    logger.warning("shipping exact scoring instead of %s: %s", config, reason)
    index = exact or ScannIndex.train(exact_config(config), embeddings, ids)
    _, report = tune_recall(index, embeddings, max_k, target_recall)
    return index, dataclasses.replace(report, choice="exact", reason=reason, speed=speeds)
