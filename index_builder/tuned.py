"""The one rule every index build follows: reach the recall target at each depth a caller asks for,
and never serve a depth slower than exact scoring would.

`tune_recall` used to widen one search setting until recall at depth met the target, and ship the
tree only if it also beat exact scoring at k = 10. At 1M products and depth = 10,000 that shipped
brute force: the tree tuned for k = 10,000 was slower than exact scoring there (38 against 79
queries/s) though 6.5 times faster at k = 10. Now a tree is tuned per depth (`depth_tuning`: 10, 100,
1,000 and depth by default), each depth served by whichever of the tree and exact scoring was faster
there at the target recall (`schedule.SearchSchedule`, written into the manifest), and exact scoring
ships alone only when the tree loses, or cannot reach the target, at every depth. An exact depth of a
tree artifact scores ScaNN's own float32 copy of the vectors with madr's exact searcher.

Every index build (`pipelines.index.shard_build`, per shard) calls `train_within_target`;
`ScannIndexBuilder.build` trains exactly the settings it is given, with no target. A nightly build is
handed last night's ``recall`` entry (`earlier`):

* where every depth was exact, for the same depths, target and dimension on a corpus of about this
  size, exact scoring ships again without a tree trained, tuned and timed (at 500,000 x 384 that tree
  was most of the index stage's 205 s and of its 7 GB);
* where a tree served, the new tree is trained and last night's schedule re-checked at each tree depth
  (one recall measurement each, no timing); it is kept when every depth still reaches the target, and
  tuned anew otherwise.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from typing import Any

import numpy as np

from index_builder.builder import config_for_corpus
from index_builder.config import ScannIndexConfig
from index_builder.depth_tuning import DepthTuner, queries_per_second, recall_query_count
from index_builder.exact import ExactSearcher
from index_builder.recall import (
    DEFAULT_TARGET_RECALL,
    RecallReport,
    RecallTargetError,
    TreeHistory,
    tune_recall,
)
from index_builder.scann_index import ScannIndex
from index_builder.schedule import DEFAULT_SERVING_DEPTHS, TREE, SearchSchedule, schedule_depths

logger = logging.getLogger(__name__)

# How far the corpus may grow or shrink before an earlier schedule is re-tuned and re-timed.
SAME_SIZE = 1.25


def exact_config(config: ScannIndexConfig) -> ScannIndexConfig:
    """The brute-force (exact scoring, no tree) config over the same corpus."""
    return config_for_corpus(
        config.num_vectors, config.dimension, settings={"scoring": "brute_force", "num_leaves": 0}
    )


def sizing_depth(depth: int, serving_depths: Sequence[int], target_recall: float | None) -> int:
    """The k `config_for_corpus` sizes a build for: the shallowest depth the schedule will tune.

    Sized for depth, a corpus where depth is a twentieth or more of it got no tree at all; a schedule
    serves such a depth by exact scoring anyway and lets the tree serve the shallow depths where it
    is faster. Untuned builds (no target) keep the depth rule: nothing will time the tree.
    """
    if not target_recall:
        return depth
    return min(depth, *serving_depths) if serving_depths else depth


def comparable_schedule(
    earlier: dict[str, Any] | None, shape: tuple[int, int], depths: Sequence[int], target: float | None
) -> SearchSchedule | None:
    """The earlier build's schedule when it was tuned for these depths, target and dimension on a
    corpus within `SAME_SIZE` of this one's size; else None (tune and time anew)."""
    earlier = earlier or {}
    speed = earlier.get("speed") or {}
    schedule = SearchSchedule.from_list(earlier.get("schedule"))
    if not target or schedule is None or "vectors" not in speed:
        return None
    n, dimension = shape
    same = (
        tuple(entry.depth for entry in schedule.entries) == tuple(depths)
        and speed.get("dimension") == dimension
        and earlier.get("target") == target
        and 1 / SAME_SIZE <= n / max(int(speed["vectors"]), 1) <= SAME_SIZE
    )
    return schedule if same else None


def train_within_target(
    config: ScannIndexConfig,
    embeddings: np.ndarray,
    ids: Sequence[str],
    depth: int,
    target_recall: float | None = DEFAULT_TARGET_RECALL,
    *,
    serving_depths: Sequence[int] = DEFAULT_SERVING_DEPTHS,
    evaluation_queries: np.ndarray | None = None,
    earlier: dict[str, Any] | None = None,
) -> tuple[ScannIndex, RecallReport]:
    """Train `config` on `embeddings` and tune its search per depth (`serving_depths` and depth, each
    at most n - 1) to `target_recall`, each depth served by the faster of the tree and exact scoring;
    or an exact-scoring index when that serves every depth (see the module's docstring).

    The report's ``schedule`` lists every depth's choice, settings, recall and speeds; ``choice`` is
    "approximate" when the tree serves any depth. With `target_recall` None or 0 the settings are kept
    as given and only measured at depth (no schedule, no fallback: the user chose them). `earlier` is
    the ``recall`` entry of the last build of this index (last night's).
    """
    n, dimension = embeddings.shape
    depths = schedule_depths(serving_depths, depth, n)
    previous = comparable_schedule(earlier, embeddings.shape, depths, target_recall)
    if previous is not None and not previous.uses_tree:
        timed_at = int(earlier["speed"]["vectors"])
        reason = (
            f"exact again without training a tree: a build of {timed_at:,} vectors timed it faster "
            "at every depth"
        )
        return _exact(config, embeddings, ids, depth, target_recall, reason, earlier["speed"], previous)
    index = ScannIndex.train(config, embeddings, ids)
    if not target_recall or not index.config.uses_tree:
        try:  # exact already (tune_recall says so), or settings as given
            return tune_recall(index, embeddings, depth, target_recall, evaluation_queries=evaluation_queries)
        except RecallTargetError as error:
            reason = f"the approximate index could not reach the target ({error})"
            return _exact(config, embeddings, ids, depth, target_recall, reason, None, None)
    exact = ExactSearcher(embeddings, ids)
    tuner = DepthTuner.over(index, exact, embeddings, target_recall, evaluation_queries)
    schedule, reused = None, None
    if previous is not None and previous.serving_default is not None:
        fits = _fits(previous, index.config)
        checked, short, retuned = (
            tuner.verify(previous, retune=True) if fits else (None, ["another tree"], [])
        )
        if not short:
            schedule = checked
            reused = (
                "last build's schedule, re-checked on this tree: every depth reaches the target"
                + "".join(f"; {line}" for line in retuned)
            )
        else:
            logger.info("last build's schedule no longer serves (%s): tuning anew", "; ".join(short))
    if schedule is None:
        schedule = tuner.tune(depths)
    logger.info("search schedule: %s", schedule.summary())
    speed = {"vectors": n, "dimension": dimension, "queries": len(tuner.speed_queries)}
    if not schedule.uses_tree:
        reasons = "; ".join(f"k={e.depth}: {e.reason}" for e in schedule.entries)
        return _exact(config, embeddings, ids, depth, target_recall, reasons, speed, schedule, exact)
    if schedule.uses_exact and not tuner.exact_available:  # only where the tree cannot reach the target
        reasons = "; ".join(f"k={e.depth}: {e.reason}" for e in schedule.entries if e.searcher != TREE)
        return _exact(config, embeddings, ids, depth, target_recall, reasons, speed, schedule, exact)
    report = tree_report(
        schedule, target_recall, reused or schedule.summary(), speed, TreeHistory(trained_vectors=n)
    )
    return index.with_schedule(schedule, exact), report


def tree_report(
    schedule: SearchSchedule, target: float, reason: str, speed: dict[str, Any], history: TreeHistory
) -> RecallReport:
    """The report of a tree that serves some depth of `schedule`: its deepest and k = 10 entries' recall,
    the schedule, the speeds timed and how far the tree is from the one trained."""
    deepest, shallow = schedule.entries[-1], schedule.entry_for(10)
    return RecallReport(
        k=deepest.depth,
        queries=recall_query_count(deepest.depth),
        recall_at_k=deepest.recall,
        target=target,
        choice="approximate",
        reason=reason,
        speed=speed,
        recall_at_10=shallow.recall,
        schedule=schedule.to_list(),
        tree_history=history.to_dict(),
    )


def _fits(schedule: SearchSchedule, config: ScannIndexConfig) -> bool:
    """Whether an earlier schedule's tree settings are valid on a tree of this config."""
    for entry in schedule.entries:
        leaves, reorder = entry.leaves_to_search, entry.pre_reorder_num_neighbors
        if leaves is not None and (config.num_leaves is None or leaves > config.num_leaves):
            return False
        if reorder is not None and reorder > config.num_vectors:
            return False
    return True


def _exact(
    config: ScannIndexConfig,
    embeddings: np.ndarray,
    ids: Sequence[str],
    depth: int,
    target_recall: float | None,
    reason: str,
    speed: dict | None,
    schedule: SearchSchedule | None,
    exact: ExactSearcher | None = None,
) -> tuple[ScannIndex, RecallReport]:
    logger.warning("shipping exact scoring instead of %s: %s", config, reason)
    exact_index = ScannIndex.train(exact_config(config), embeddings, ids)
    _, report = tune_recall(exact_index, embeddings, depth, target_recall)
    rows = None if schedule is None else schedule.to_list()
    return exact_index, dataclasses.replace(report, choice="exact", reason=reason, speed=speed, schedule=rows)


__all__ = [
    "SAME_SIZE",
    "comparable_schedule",
    "exact_config",
    "queries_per_second",
    "sizing_depth",
    "train_within_target",
]
