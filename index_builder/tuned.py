"""The one rule every index build follows: reach the recall target, and never ship an index slower
than exact scoring.

`tune_recall` widens an approximate index's search until it meets the target. On diffuse data that
can mean opening every leaf and re-ranking tens of thousands of candidates: an isotropic corpus of
200,000 vectors, tuned for recall@5,000, answered 176 queries/s where exact (brute-force) scoring
answered about 2,000. So after tuning, both are timed on the same held-out corpus vectors, at max_k
and at k = 10 (a search shallower than the one tuned for must not be slower either), and the
approximate index ships only when it is faster at both; otherwise, or when it cannot reach the
target at all, exact scoring ships. An exact index is searched with madr's exact searcher
(`ScannIndex`), so the speed compared is the one `madr evaluate --searcher exact` would give. The
choice, with both speeds and the reason, goes into the manifest's ``recall`` entry, and the
approximate index also records its recall@10, so a user who searches shallower than ``max_k``
knows what they get.

`madr build-index` (`pipelines.index.single`) and the partitioned build (per shard) call
`train_within_target`; `ScannIndexBuilder.build` trains exactly the settings it is given, with no
target. A nightly build is handed last night's ``recall`` entry: where that build timed exact scoring
faster for the same k, target and dimension on a corpus of about this size, exact scoring ships again
without a tree trained, tuned and timed (at 500,000 x 384 and k = 10,000 that tree was most of the index
stage's 205 s and of its 7 GB).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Sequence
from typing import Any

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
# How far the corpus may grow or shrink before an earlier exact-or-approximate timing is redone.
SAME_SIZE = 1.25


def exact_config(config: ScannIndexConfig) -> ScannIndexConfig:
    """The brute-force (exact scoring, no tree) config over the same corpus."""
    return config_for_corpus(
        config.num_vectors, config.dimension, settings={"scoring": "brute_force", "num_leaves": 0}
    )


def exact_measured_before(
    earlier: dict[str, Any] | None, shape: tuple[int, int], max_k: int, target_recall: float | None
) -> str | None:
    """Why exact scoring ships again without timing a tree, or None where it must be timed.

    The earlier build must have timed both (its ``speed``) and shipped exact for the same k, target and
    dimension, on a corpus of between 1 / SAME_SIZE and SAME_SIZE times this one's size. A choice carried
    over keeps the size it was timed at, so slow growth is re-timed once it adds up.
    """
    speed = (earlier or {}).get("speed") or {}
    n, dimension = shape
    if not target_recall or (earlier or {}).get("choice") != "exact" or "vectors" not in speed:
        return None
    timed_at = int(speed["vectors"])
    same = (
        speed.get("k") == min(max_k, n - 1)
        and speed.get("dimension") == dimension
        and earlier.get("target") == target_recall
        and 1 / SAME_SIZE <= n / max(timed_at, 1) <= SAME_SIZE
    )
    if not same:
        return None
    return (
        f"exact again without training a tree: a build of {timed_at:,} vectors timed exact scoring at "
        f"{speed['exact_qps']:.0f} queries/s and the approximate index at {speed['approximate_qps']:.0f} "
        f"(k={speed['k']})"
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
    earlier: dict[str, Any] | None = None,
) -> tuple[ScannIndex, RecallReport]:
    """Train `config` on `embeddings`, tune it to `target_recall` at min(max_k, n - 1), and return it,
    or an exact-scoring index when that one is faster or the target cannot be reached otherwise.

    The report says which it is (`exact`, `choice`), and why. With `target_recall` None or 0 the
    settings are kept as given and only measured (no fallback: the user chose them). `earlier` is the
    ``recall`` entry of the last build of this index (last night's): where it timed exact scoring
    faster for this k, target and dimension, on a corpus within `SAME_SIZE` of this one, exact scoring
    ships again without a tree trained, tuned and timed (`exact_measured_before`).
    """
    known = exact_measured_before(earlier, embeddings.shape, max_k, target_recall)
    if known is not None:
        return _exact(config, embeddings, ids, max_k, target_recall, known, earlier["speed"], None)
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
    k, (n, dimension) = report.k, embeddings.shape
    queries = np.ascontiguousarray(embeddings[recall_queries(embeddings, SPEED_QUERIES)], dtype=np.float32)
    # An exact ScannIndex searches with madr's exact searcher (`ScannIndex`): the speed to beat.
    exact = ScannIndex.train(exact_config(config), embeddings, ids)
    speeds: dict[str, Any] = {"k": k, "queries": len(queries), "vectors": n, "dimension": dimension}
    slower = []
    for depth in sorted({k, min(k, SHALLOW_K)}):
        approximate_qps = queries_per_second(index, queries, depth)
        exact_qps = queries_per_second(exact, queries, depth)
        suffix = "" if depth == k else f"_at_{depth}"
        speeds[f"approximate_qps{suffix}"], speeds[f"exact_qps{suffix}"] = approximate_qps, exact_qps
        if approximate_qps < exact_qps:
            slower.append(f"{approximate_qps:.0f} queries/s at k={depth}, exact scoring {exact_qps:.0f}")
    if slower:
        reason = "at the target recall the approximate index answers " + " and ".join(slower)
        return _exact(config, embeddings, ids, max_k, target_recall, reason, speeds, exact)
    shallow = measure_recall(index, embeddings, SHALLOW_K).recall_at_k if k > SHALLOW_K else None
    logger.info(
        "approximate index kept: faster than exact scoring at k=%d and k=%d (%s)", k, SHALLOW_K, speeds
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
