"""Tune a trained tree per depth: the cheapest search reaching the recall target at each k, timed
against exact scoring at that k, makes a `SearchSchedule`.

For each depth d of the schedule (`schedule.schedule_depths`):

1. **Leaves.** With the deepest re-ranking of the ladder (32 d), the fewest leaves whose recall@d on
   held-out corpus vectors reaches the target (binary search: recall grows with the leaves), on the
   ladder a user sweeps by hand: 1 to 6 leaves one by one, then 25 % more per rung. None: the tree
   cannot serve d.
2. **Re-ranking.** For that leaf count and the next rungs (more leaves can need fewer re-ranked
   candidates), the smallest re-ranking depth reaching the target, among 1, 1.5, 2, 3, 4, 6, ... 32 d.
3. **Speed.** Each such candidate and exact scoring are timed at d on the same held-out corpus vectors;
   the fastest candidate is the tree's, and the faster of tree and exact serves d.

Recall is measured as `index_builder.recall` does (own row excluded, neighbours as near as the true
k-th count), on fewer queries for deeper depths (each averages more hits): 1,000 at k = 10, 100 from
k = 200 on. A ladder of leaves and re-ranking is what a plain ScaNN user would sweep by hand; the
figure to beat is the best queries/s such a sweep finds at the same recall (bench/serving_bench.py).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import NamedTuple

import numpy as np

from index_builder.config import ReorderPrecision
from index_builder.exact import ExactSearcher
from index_builder.recall import RecallProbe, recall_queries
from index_builder.scann_index import ScannIndex
from index_builder.schedule import EXACT, TREE, DepthEntry, SearchSchedule

logger = logging.getLogger(__name__)

# Held-out corpus vectors each searcher is timed on (the same ones for both), and how often.
SPEED_QUERIES = 200
SPEED_REPEATS = 3
# Recall queries per depth: about this many neighbours in all, between the bounds.
RECALL_HITS = 20_000
MIN_RECALL_QUERIES, MAX_RECALL_QUERIES = 100, 1_000
# The ladders are as fine as a hand sweep's (bench/serving_bench.py sweeps every searcher on them): with
# leaves doubling and re-ranking doubling from 20, the 500,000-vector schedule served k = 10 from 8
# leaves and 40 candidates where a sweep found 5-6 leaves and 30, at about two thirds of its queries/s.
# Leaves: 1 to LEAVES_ONE_BY_ONE one by one, then LEAF_STEP times more per rung, up to every leaf.
LEAVES_ONE_BY_ONE = 6
LEAF_STEP = 1.25
# Re-ranking: these multiples of the depth (capped at n).
REORDER_MULTIPLES = (1, 1.5, 2, 3, 4, 6, 8, 12, 16, 24, 32)
# Settings are tuned to reach the target plus this margin where the tree can: recall measured on 1,000
# queries x 10 neighbours varies by about 0.002 between query samples, and the finer ladders pick
# settings just over the line. A recheck on a retrained or updated tree re-tunes a depth that falls
# short (`verify(retune=True)`); 0.005 cost a re-ranking rung at k = 100 on 500,000 vectors (0.76x the
# hand sweep's queries/s, against 1.04x at k = 10).
TUNING_MARGIN = 0.002
# Leaf counts whose cheapest re-ranking is timed: the fewest that reach the target and the next rungs
# (five rungs span about twice the leaves).
LEAF_CANDIDATES = 5


def queries_per_second(searcher: ScannIndex | ExactSearcher, queries: np.ndarray, k: int, **options) -> float:
    """The best of `SPEED_REPEATS` timed searches of `queries` at `k`, after one warm-up."""
    searcher.search(queries[:1], k, **options)
    best = float("inf")
    for _ in range(SPEED_REPEATS):
        started = time.perf_counter()
        searcher.search(queries, k, **options)
        best = min(best, time.perf_counter() - started)
    return len(queries) / max(best, 1e-9)


def recall_query_count(depth: int) -> int:
    return min(MAX_RECALL_QUERIES, max(MIN_RECALL_QUERIES, RECALL_HITS // max(depth, 1)))


def leaf_ladder(num_leaves: int | None) -> list[int | None]:
    """Leaves to search, in increasing cost, up to all `num_leaves` ([None] without a tree)."""
    if num_leaves is None:
        return [None]
    rungs = list(range(1, min(num_leaves, LEAVES_ONE_BY_ONE) + 1))
    while rungs[-1] < num_leaves:
        rungs.append(min(num_leaves, max(rungs[-1] + 1, round(rungs[-1] * LEAF_STEP))))
    return rungs


def reorder_ladder(depth: int, num_vectors: int, reranks: bool) -> list[int]:
    """Re-ranking depths to try for `depth` neighbours ([depth] alone when the scoring is exact)."""
    if not reranks:
        return [depth]
    return sorted({min(num_vectors, max(depth, round(depth * multiple))) for multiple in REORDER_MULTIPLES})


@dataclass
class _Candidate:
    leaves: int | None
    reorder: int
    recall: float
    qps: float = 0.0


def _first_reaching(values: Sequence, reaches) -> int | None:
    """Index of the first value for which `reaches` holds (monotone), by binary search; None if none."""
    if not values or not reaches(values[-1]):
        return None
    low, high = 0, len(values) - 1
    while low < high:
        middle = (low + high) // 2
        if reaches(values[middle]):
            high = middle
        else:
            low = middle + 1
    return low


class DepthTuner:
    """Tunes one trained tree (`index`) for each depth, against exact scoring over the same vectors."""

    def __init__(
        self,
        index: ScannIndex,
        exact: ExactSearcher,
        embeddings: np.ndarray,
        target: float,
        *,
        exact_available: bool = True,
        evaluation_queries: np.ndarray | None = None,
    ) -> None:
        self.index, self.exact, self.embeddings, self.target = index, exact, embeddings, target
        self.exact_available = exact_available
        self.evaluation_queries = evaluation_queries
        rows = recall_queries(embeddings, SPEED_QUERIES)
        self.speed_queries = np.ascontiguousarray(embeddings[rows], dtype=np.float32)
        self.measurements = 0

    @classmethod
    def over(
        cls,
        index: ScannIndex,
        exact: ExactSearcher,
        embeddings: np.ndarray,
        target: float,
        evaluation_queries: np.ndarray | None = None,
    ) -> DepthTuner:
        """A tuner of `index` (whose rows are `embeddings`' rows) that may choose exact scoring at a depth
        only where the artifact keeps float32 vectors to score (not with int8 re-ranking)."""
        exact_available = index.config.reorder_precision is ReorderPrecision.FLOAT32
        return cls(
            index,
            exact,
            embeddings,
            target,
            exact_available=exact_available,
            evaluation_queries=evaluation_queries,
        )

    def tune(self, depths: Sequence[int]) -> SearchSchedule:
        return SearchSchedule(tuple(self.tune_depth(depth) for depth in depths))

    def tune_depth(self, depth: int) -> DepthEntry:
        count = recall_query_count(depth)
        # Evaluation queries are as many as the held-out vectors at this depth: 1,000 of them searched
        # 10,000 deep at every step made a 500,000-vector build 4x slower (508 s against 128 s).
        evaluation = None if self.evaluation_queries is None else self.evaluation_queries[:count]
        probe = RecallProbe(self.index, self.embeddings, depth, count, evaluation, self.exact)
        config = self.index.config
        reorders = reorder_ladder(depth, self.index.size, config.reorder_candidates is not None)
        measured: dict[tuple[int | None, int], float] = {}

        def recall(leaves: int | None, reorder: int) -> float:
            # With evaluation queries (real queries, encoded by the query side), both sets must reach the
            # target: at 500,000 shipped-model vectors a schedule tuned on corpus vectors alone reached
            # 0.95 on them and 0.93 on the generator's queries.
            if (leaves, reorder) not in measured:
                held_out, evaluation = probe.measure_each(leaves, reorder)
                measured[leaves, reorder] = held_out if evaluation is None else min(held_out, evaluation)
                self.measurements += 1
            return measured[leaves, reorder]

        leaves_rungs = leaf_ladder(config.num_leaves)
        # Tuned to a little above the target where the tree gets there, so that a recheck on other
        # vectors, a retrained tree or a night's churn does not fall short by the measurement's noise.
        goal = self.target + TUNING_MARGIN
        if recall(leaves_rungs[-1], reorders[-1]) < goal:
            goal = self.target
        first = _first_reaching(leaves_rungs, lambda leaves: recall(leaves, reorders[-1]) >= goal)
        if first is None:
            best = max(measured.values())
            reason = f"the tree reaches recall {best:.3f} at best, below the target {self.target}"
            return self._exact_entry(depth, None, reason)
        candidates = []
        for leaves in leaves_rungs[first : first + LEAF_CANDIDATES]:
            at = _first_reaching(reorders, lambda r, leaves=leaves: recall(leaves, r) >= goal)
            if at is not None:
                candidates.append(_Candidate(leaves, reorders[at], recall(leaves, reorders[at])))
        for candidate in candidates:
            options = {"leaves_to_search": candidate.leaves, "pre_reorder_num_neighbors": candidate.reorder}
            candidate.qps = queries_per_second(self.index, self.speed_queries, depth, **options)
        tree = max(candidates, key=lambda c: c.qps)
        exact_qps = None
        if self.exact_available:
            exact_qps = queries_per_second(self.exact, self.speed_queries, depth)
        logger.info(
            "k=%d: tree %s leaves, re-rank %d: recall %.4f, %.0f queries/s; exact %s queries/s",
            depth,
            tree.leaves,
            tree.reorder,
            tree.recall,
            tree.qps,
            exact_qps and round(exact_qps),
        )
        if exact_qps is not None and exact_qps >= tree.qps:
            reason = f"exact scoring answers {exact_qps:,.0f} queries/s, the tree {tree.qps:,.0f}"
            return self._exact_entry(depth, tree, reason, exact_qps)
        reason = "the artifact keeps no float32 vectors to score exactly (int8 re-ranking)"
        if exact_qps:
            reason = f"the tree answers {tree.qps / exact_qps:.1f}x exact scoring's queries/s at the target"
        return DepthEntry(depth, TREE, tree.leaves, tree.reorder, tree.recall, tree.qps, exact_qps, reason)

    @staticmethod
    def _exact_entry(
        depth: int, tree: _Candidate | None, reason: str, exact_qps: float | None = None
    ) -> DepthEntry:
        if tree is None:
            return DepthEntry(depth, EXACT, None, None, None, None, exact_qps, reason)
        return DepthEntry(depth, EXACT, tree.leaves, tree.reorder, tree.recall, tree.qps, exact_qps, reason)

    def verify(self, schedule: SearchSchedule, *, retune: bool = False) -> Recheck:
        """Recheck an earlier schedule's tree settings on this index: the schedule with each tree depth's
        recall as measured now (what the manifest then records), and the depths now below the target.

        With `retune`, a depth below the target is tuned anew on this tree (`tune_depth`: the settings
        a tree updated in place needs may be a rung wider than last night's, which were the cheapest that
        reached the target), and it is short only when no setting of the tree reaches the target."""
        entries, short, retuned = [], [], []
        for entry in schedule.entries:
            if entry.searcher != TREE:
                entries.append(entry)
                continue
            count = recall_query_count(entry.depth)
            evaluation = None if self.evaluation_queries is None else self.evaluation_queries[:count]
            probe = RecallProbe(self.index, self.embeddings, entry.depth, count, evaluation, self.exact)
            measured = probe.measure_each(entry.leaves_to_search, entry.pre_reorder_num_neighbors)
            recall = min(r for r in measured if r is not None)
            self.measurements += 1
            if recall >= self.target:
                entries.append(replace(entry, tree_recall=recall))
                continue
            missed = f"k={entry.depth}: recall {recall:.3f} < {self.target}"
            again = self.tune_depth(entry.depth) if retune else None
            if again is None or again.tree_recall is None:  # no setting of the tree reaches the target
                entries.append(replace(entry, tree_recall=recall))
                short.append(missed)
                continue
            entries.append(again)
            retuned.append(
                f"{missed} at {entry.leaves_to_search} leaves, {entry.pre_reorder_num_neighbors} re-ranked; "
                f"re-tuned: {again.searcher} ({again.leaves_to_search} leaves, "
                f"{again.pre_reorder_num_neighbors} re-ranked, recall {again.tree_recall:.3f})"
            )
        return Recheck(SearchSchedule(tuple(entries)), short, retuned)


class Recheck(NamedTuple):
    """An earlier schedule rechecked on a tree (`DepthTuner.verify`)."""

    schedule: SearchSchedule
    short: list[str]  # depths the tree no longer serves at the target
    retuned: list[str]  # depths whose settings were tuned anew, as a line each


__all__ = [
    "DepthTuner",
    "Recheck",
    "leaf_ladder",
    "queries_per_second",
    "recall_query_count",
    "reorder_ladder",
]
