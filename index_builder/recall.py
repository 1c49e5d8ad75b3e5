"""Recall you can rely on: measure a built index against exact search, and tune it to a target.

The sizing rule (`index_builder.config`) was measured on clustered data; on diffuse data (an
isotropic Gaussian corpus) the same settings can lose half the true neighbours. So every build
measures what it got, on the corpus it was given, at the depth the artifact will be searched:

* **Queries.** ``DEFAULT_RECALL_QUERIES`` corpus vectors drawn with a fixed seed (and, when given,
  the evaluation queries). A sampled vector is "held out" by excluding its own row from both
  result lists: both searches ask for k + 1 neighbours, drop the query's own row wherever it
  appears (or the last one if it does not), and compare the first k. Otherwise every query would
  find itself and recall@10 would start at 0.1.
* **Depth.** k = min(depth, n - 1), searched exactly as `ScannIndex.search` would (its config's
  leaves and re-ranking depth, widened for k), against `ExactSearcher`.
* **Figure.** recall@k = |ann ∩ exact| / k, averaged over the queries.

`tune_recall` then raises the stored leaves-to-search and re-ranking depth (both doubled per step,
up to every leaf and the whole corpus, or ``max_leaves_to_search``; re-ranking stops deepening once
it gains nothing at the capped leaves) until the target is met, and
returns the index with those settings in its config; they are a floor for every later search,
so a shallower k keeps at least the same settings. If the target cannot be met it raises
`RecallTargetError` naming the best recall reached and the settings to try. A brute-force index
scores every vector exactly: its recall is 1.0 and nothing is searched to show it.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from index_builder.config import DEFAULT_TARGET_RECALL, Scoring
from index_builder.exact import ExactSearcher
from index_builder.scann_index import ScannIndex
from index_builder.searcher import Searcher

logger = logging.getLogger(__name__)

# Corpus vectors sampled as queries: recall over 1,000 queries has a standard error under 0.01 at
# k = 10 (and far less at deeper k, where each query averages k hits).
DEFAULT_RECALL_QUERIES = 1_000
RECALL_SEED = 20_240_611


class RecallTargetError(ValueError):
    """The index could not reach the requested recall within the allowed settings."""


@dataclass
class RecallReport:
    """What the build measured: written into the index manifest as ``recall``."""

    k: int
    queries: int
    recall_at_k: float
    target: float | None
    settings_tried: list[dict[str, Any]] = field(default_factory=list)
    evaluation_queries: int = 0
    exact: bool = False
    # What `index_builder.tuned.train_within_target` chose ("approximate" or "exact"), why, both
    # speeds, and the approximate index's recall@10 when tuned deeper.
    choice: str | None = None
    reason: str | None = None
    speed: dict[str, Any] | None = None
    recall_at_10: float | None = None
    # The search settings per depth (`index_builder.schedule.SearchSchedule.to_list`): what serves each
    # k, with the recall and both speeds measured there. `ScannIndex.load` searches by it.
    schedule: list[dict[str, Any]] | None = None
    # A tree's distance from the one trained (`TreeHistory.to_dict`): nights updated, products changed.
    tree_history: dict[str, int] | None = None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class TreeHistory:
    """How far a shipped tree is from the one that was trained: written into ``recall.tree_history``."""

    trained_vectors: int
    updates: int = 0
    changed_since_training: int = 0

    def to_dict(self) -> dict[str, int]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> TreeHistory | None:
        try:
            return cls(**{name: int(data[name]) for name in cls.__dataclass_fields__}) if data else None
        except (KeyError, TypeError, ValueError):
            return None


def check_target(target_recall: float | None) -> float | None:
    """None or 0 disables tuning (recall is still measured); otherwise a recall in (0, 1]."""
    if target_recall is None or target_recall == 0:
        return None
    if isinstance(target_recall, bool) or not isinstance(target_recall, int | float):
        raise ValueError(f"target_recall must be a number in [0, 1], got {target_recall!r}")
    if not 0 < target_recall <= 1:
        raise ValueError(
            f"target_recall must be in [0, 1] (0 measures without tuning), got {target_recall}: "
            "no index can find more than every true neighbour"
        )
    return float(target_recall)


def recall_queries(embeddings: np.ndarray, count: int = DEFAULT_RECALL_QUERIES) -> np.ndarray:
    """Rows of the corpus to hold out as queries: ``count`` of them (at most n), seeded."""
    return recall_rows(embeddings.shape[0], count)


def recall_rows(n: int, count: int = DEFAULT_RECALL_QUERIES) -> np.ndarray:
    """`recall_queries` for a corpus of `n` rows that is not in memory (one shard at a time)."""
    rng = np.random.default_rng(RECALL_SEED)
    return np.sort(rng.choice(n, size=min(count, n), replace=False))


def held_out_mask(rows: np.ndarray, own: np.ndarray) -> np.ndarray:
    """Which entries of each query's k + 1 results to keep: all but its own row (or, when its own row
    is not among them, all but the last), k per query."""
    keep = rows != own[:, None]
    keep[keep.all(axis=1), -1] = False
    return keep


def _drop_self(rows: np.ndarray, own: np.ndarray | None, k: int) -> np.ndarray:
    """Each row's first k entries other than its query's own row (``own``: -1 for none)."""
    if own is None:
        return rows[:, :k]
    return rows[held_out_mask(rows, own)].reshape(rows.shape[0], k)


# Float32 dot products of the same two vectors computed in another order differ by ~1e-7 per unit;
# a neighbour scoring within this of the k-th true neighbour is as near as it.
TIE_TOLERANCE = 1e-5


def _overlap(
    found: np.ndarray, truth: np.ndarray, queries: np.ndarray, embeddings: np.ndarray, k: int
) -> float:
    """Mean share of each query's k found neighbours that are as near as its k-th true neighbour.

    Counting by score rather than by id: a corpus with duplicate or equidistant vectors (catalogs have
    both) has many equally right top-k lists, and exact search keeps one of them by its tie order. By
    ids, a search that returned another, equally near, list measured 0.44 at 1M products of a tiny
    untrained model, with every leaf searched and every candidate re-ranked.
    """
    if not len(found):
        return 1.0
    kth = np.einsum("qd,qd->q", queries, embeddings[truth[:, k - 1]])
    hits = 0
    for query, rows, threshold in zip(queries, found, kth, strict=True):
        hits += int(np.count_nonzero(embeddings[rows] @ query >= threshold - TIE_TOLERANCE))
    return hits / (len(found) * k)


class RecallProbe:
    """Held-out (and evaluation) queries with their exact top-k, for measuring many settings."""

    def __init__(
        self,
        index: ScannIndex,
        embeddings: np.ndarray,
        k: int,
        num_queries: int,
        evaluation_queries: np.ndarray | None,
        exact: ExactSearcher | None = None,
    ) -> None:
        self.index = index
        self.embeddings = embeddings
        self.k = k
        self.own = recall_queries(embeddings, num_queries)
        self.held_out = np.ascontiguousarray(embeddings[self.own], dtype=np.float32)
        self.evaluation = None if evaluation_queries is None else np.asarray(evaluation_queries, np.float32)
        exact = exact or ExactSearcher(embeddings, index.ids)
        self.truth = _drop_self(exact.search(self.held_out, k + 1).indices, self.own, k)
        self.evaluation_truth = None
        if self.evaluation is not None and len(self.evaluation):
            self.evaluation_truth = exact.search(self.evaluation, k).indices

    @property
    def count(self) -> int:
        return len(self.own) + (0 if self.evaluation_truth is None else len(self.evaluation_truth))

    def measure(self, leaves: int | None, depth: int) -> float:
        """recall@k over every query, searched with these leaves and re-ranking depth."""
        held_out, evaluation = self.measure_each(leaves, depth)
        hits = held_out * len(self.own)
        if evaluation is not None:
            hits += evaluation * len(self.evaluation_truth)
        return hits / self.count

    def measure_each(self, leaves: int | None, depth: int) -> tuple[float, float | None]:
        """(recall@k of the held-out corpus vectors, of the evaluation queries or None)."""
        options = {"leaves_to_search": leaves, "pre_reorder_num_neighbors": depth}
        found = self.index.search(self.held_out, self.k + 1, **options).indices
        found = _drop_self(found, self.own, self.k)
        held_out = _overlap(found, self.truth, self.held_out, self.embeddings, self.k)
        if self.evaluation_truth is None:
            return held_out, None
        found = self.index.search(self.evaluation, self.k, **options).indices
        return held_out, _overlap(found, self.evaluation_truth, self.evaluation, self.embeddings, self.k)


def tune_recall(
    index: ScannIndex,
    embeddings: np.ndarray,
    depth: int,
    target_recall: float | None = DEFAULT_TARGET_RECALL,
    *,
    num_queries: int = DEFAULT_RECALL_QUERIES,
    evaluation_queries: np.ndarray | None = None,
    max_leaves_to_search: int | None = None,
) -> tuple[ScannIndex, RecallReport]:
    """Measure recall@min(depth, n - 1) of ``index``; with a target, widen its search until it is met.

    ``embeddings`` are the vectors the index was built on (row i is ``index.ids[i]``).
    ``target_recall`` None or 0 measures only. ``max_leaves_to_search`` caps the tuning (default:
    every leaf). Returns the index (with the tuned settings stored in its config, a new object
    when they changed) and the report to write into its manifest.

    Raises:
        RecallTargetError: the target was not met at the widest settings allowed.
        ValueError: a bad target or cap.
    """
    target = check_target(target_recall)
    config = index.config
    n = index.size
    k = max(1, min(depth, n - 1))
    if config.scoring is Scoring.BRUTE_FORCE and not config.uses_tree:
        return index, RecallReport(k, 0, 1.0, target, exact=True)
    if embeddings.shape[0] != n:
        raise ValueError(f"{embeddings.shape[0]} embeddings for an index of {n} vectors")
    probe = RecallProbe(index, embeddings, k, num_queries, evaluation_queries)
    num_leaves = config.num_leaves
    cap = num_leaves
    if max_leaves_to_search is not None and num_leaves is not None:
        if not isinstance(max_leaves_to_search, int) or max_leaves_to_search < 1:
            raise ValueError(f"max_leaves_to_search must be a positive int, got {max_leaves_to_search!r}")
        cap = min(num_leaves, max_leaves_to_search)
    # Start where a search for k starts (held-out queries ask for k + 1, at the same settings).
    leaves = config.search_leaves(k)
    reorder = min(n, config.search_reorder(k))
    if leaves is not None and cap is not None:
        leaves = min(leaves, cap)
    tried: list[dict[str, Any]] = []
    while True:
        recall = probe.measure(leaves, reorder)
        tried.append({"leaves_to_search": leaves, "pre_reorder_num_neighbors": reorder, "recall": recall})
        logger.info("recall@%d %.4f with %s leaves, re-ranking %d", k, recall, leaves, reorder)
        wider_leaves = leaves if leaves is None or cap is None else min(cap, 2 * leaves)
        wider_reorder = min(n, 2 * reorder) if config.reorder_candidates is not None else reorder
        if target is None or recall >= target or (wider_leaves, wider_reorder) == (leaves, reorder):
            break
        if len(tried) > 1 and leaves == tried[-2]["leaves_to_search"] and recall <= tried[-2]["recall"]:
            break  # the leaves are capped and a deeper re-ranking gained nothing
        leaves, reorder = wider_leaves, wider_reorder
    best = max(tried, key=lambda s: s["recall"])
    report = RecallReport(k, probe.count, best["recall"], target, tried, probe.count - len(probe.own))
    if target is not None and best["recall"] < target:
        raise RecallTargetError(_shortfall(report, num_leaves, cap, n))
    if len(tried) == 1:
        return index, report
    leaves_stored = config.num_leaves_to_search
    if leaves_stored is not None and best["leaves_to_search"] is not None:
        leaves_stored = max(leaves_stored, best["leaves_to_search"])
    reorder_stored = config.reorder_candidates
    if reorder_stored is not None:
        reorder_stored = max(reorder_stored, best["pre_reorder_num_neighbors"])
    return index.with_search_settings(leaves_stored, reorder_stored), report


def _shortfall(report: RecallReport, num_leaves: int | None, cap: int | None, n: int) -> str:
    best = max(report.settings_tried, key=lambda s: s["recall"])
    last = report.settings_tried[-1]
    tried = ", ".join(
        f"{s['leaves_to_search']}/{num_leaves} leaves + re-rank {s['pre_reorder_num_neighbors']} -> "
        f"{s['recall']:.3f}"
        for s in report.settings_tried
    )
    if cap is not None and num_leaves is not None and cap < num_leaves:
        advice = (
            f"allow more leaves (leaves_to_search up to {min(num_leaves, 2 * last['leaves_to_search'])} "
            f"of {num_leaves}, re-rank {min(n, 2 * last['pre_reorder_num_neighbors'])})"
        )
    else:
        advice = "every leaf and re-ranking depth allowed was tried; use exact search for this corpus"
    return (
        f"recall@{report.k} reached at best {best['recall']:.3f} over {report.queries} queries, "
        f"below --target_recall {report.target} (tried {tried}); {advice}, or lower --target_recall "
        "(0 measures without tuning)"
    )


def recall_summary(report: RecallReport) -> str:
    """One line for a log or the CLI."""
    if report.exact:
        why = f"; {report.reason}" if report.reason else ""
        return f"recall@{report.k} 1.0 (exact brute-force scoring{why})"
    return f"recall@{report.k} {report.recall_at_k:.3f} over {report.queries} queries"


__all__: Sequence[str] = (
    "DEFAULT_RECALL_QUERIES",
    "DEFAULT_TARGET_RECALL",
    "TIE_TOLERANCE",
    "RecallProbe",
    "RecallReport",
    "RecallTargetError",
    "check_target",
    "held_out_mask",
    "measure_recall",
    "recall_queries",
    "recall_rows",
    "recall_summary",
    "tune_recall",
)


def measure_recall(
    searcher: Searcher, embeddings: np.ndarray, depth: int, num_queries: int = DEFAULT_RECALL_QUERIES
) -> RecallReport:
    """recall@min(depth, n - 1) of any searcher at its stored settings, measure only.

    For artifacts whose search settings are not tuned here, such as a partitioned index: held-out
    corpus vectors (``recall_queries``) searched by ``searcher`` and by exact search over
    ``embeddings``, whose row i must be ``searcher.ids[i]``.
    """
    n = len(searcher.ids)
    if embeddings.shape[0] != n:
        raise ValueError(f"{embeddings.shape[0]} embeddings for an index of {n} vectors")
    k = max(1, min(depth, n - 1))
    own = recall_queries(embeddings, num_queries)
    held_out = np.ascontiguousarray(embeddings[own], dtype=np.float32)
    truth = _drop_self(ExactSearcher(embeddings, searcher.ids).search(held_out, k + 1).indices, own, k)
    found = _drop_self(searcher.search(held_out, k + 1).indices, own, k)
    recall = _overlap(found, truth, held_out, embeddings, k)
    return RecallReport(k, len(own), recall, None, [{"stored_settings": True, "recall": recall}])
