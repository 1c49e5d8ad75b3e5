"""--searcher auto: exact search or the ANN index, whichever is faster at the recall evaluation needs.

An index is only worth using for evaluation when it loses (almost) nothing against exact search at the
evaluation depth, and only when it is actually faster there: at depth 10,000 a tree index re-ranks so
deep that brute force often wins on a small catalog. So the driver measures, before the pipeline is
built: a sample of the split's own queries (the first `CALIBRATION_QUERIES`, encoded by the evaluated
model) is searched by both searchers at the evaluation depth; the index's recall@depth against exact
search on that sample and both wall-clock times decide (`choose`). Each is searched part by part (an
index's shards, an embed output's files, one in memory at a time) and the parts' rankings merged, so
the driver's memory does not grow with the catalog. The measurements, the choice and
its reason go into metrics.json, the evaluation manifest and the printed table.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import pyarrow.parquet as pq
from apache_beam.io.filesystems import FileSystems

from index_builder import SearchResult
from pipelines.evaluate.searchers import CorpusSearcher, SearcherSource, opened_part_by_part
from pipelines.inference import TextToEncode
from schemas import InvalidRecord, validate_query

LOGGER = logging.getLogger(__name__)

MIN_RECALL = 0.99  # 'within 1% of exact': the index must find 99% of exact search's top-depth products
CALIBRATION_QUERIES = 128  # enough for a stable mean recall and timing, small next to an evaluation
TIMING_REPEATS = 2  # the faster of two timed runs: the least disturbed on a shared machine


@dataclass(frozen=True)
class Calibration:
    """What --searcher auto measured on its sample, and what it chose and why."""

    queries: int
    depth: int
    ann_seconds: float | None
    exact_seconds: float | None
    ann_recall: float | None  # mean over the sample of |ann top-depth ∩ exact top-depth| / depth
    min_recall: float
    choice: str
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def describe(self) -> str:
        if self.ann_seconds is None or self.exact_seconds is None or self.ann_recall is None:
            return f"Searcher: {self.choice} ({self.reason})"
        return (
            f"Searcher: {self.choice}, measured on {self.queries} queries at depth {self.depth}: "
            f"ann {1000 * self.ann_seconds / self.queries:.2f} ms/query with recall@{self.depth} "
            f"{self.ann_recall:.4f} against exact, exact {1000 * self.exact_seconds / self.queries:.2f} "
            f"ms/query ({self.reason})"
        )


def choose(
    ann_seconds: float, exact_seconds: float, ann_recall: float, min_recall: float = MIN_RECALL
) -> tuple[str, str]:
    """("ann" | "exact", why): the index only when its recall is at least ``min_recall`` and it is faster."""
    if ann_recall < min_recall:
        return "exact", f"the index's recall {ann_recall:.4f} is below {min_recall}"
    if ann_seconds < exact_seconds:
        return "ann", f"recall {ann_recall:.4f} >= {min_recall} and the index is faster"
    return "exact", f"recall {ann_recall:.4f} >= {min_recall}, but exact search is as fast or faster"


def recall_against(found: Sequence[Sequence[str]], truth: Sequence[Sequence[str]]) -> float:
    """Mean over queries of the share of ``truth``'s ranked products (ids per query) that ``found`` also
    ranks.

    Compared by product id, not corpus row: a partitioned index numbers its rows differently.
    """
    shares = [
        len(set(ids) & set(true_ids)) / len(true_ids)
        for ids, true_ids in zip(found, truth, strict=True)
        if len(true_ids)
    ]
    return float(np.mean(shares)) if shares else 1.0


def _timed_search(searcher: CorpusSearcher, queries: np.ndarray, depth: int) -> tuple[SearchResult, float]:
    searcher.search(queries[:1], depth)  # warm-up: a first call pays one-off costs (allocations, caches)
    best: tuple[SearchResult, float] | None = None
    for _ in range(TIMING_REPEATS):
        started = time.perf_counter()
        found = searcher.search(queries, depth)
        seconds = time.perf_counter() - started
        if best is None or seconds < best[1]:
            best = (found, seconds)
    assert best is not None
    return best


@dataclass(frozen=True)
class _Ranked:
    """Each query's top-depth (ids, scores) over the parts searched so far, and their summed seconds."""

    ids: np.ndarray  # object (queries, <= depth)
    scores: np.ndarray
    seconds: float

    def with_part(self, found: SearchResult, seconds: float, depth: int) -> _Ranked:
        """Merged with one part's ranking, later parts' rows after earlier ones' at equal scores (a whole
        corpus's row order: `PartitionedIndex.search`, exact search over the files concatenated)."""
        ids = np.concatenate([self.ids, np.asarray(found.ids, dtype=object)], axis=1)
        scores = np.concatenate([self.scores, found.scores], axis=1)
        order = np.argsort(-scores, axis=1, kind="stable")[:, :depth]
        return _Ranked(
            np.take_along_axis(ids, order, 1), np.take_along_axis(scores, order, 1), self.seconds + seconds
        )


def _timed_by_part(source: SearcherSource, queries: np.ndarray, depth: int) -> _Ranked:
    """Each part of `source` searched and timed in turn, one in memory at a time (`opened_part_by_part`):
    the merged top-`depth`, and the parts' summed seconds: what one process searching them all spends."""
    ranked = _Ranked(np.empty((len(queries), 0), object), np.empty((len(queries), 0), np.float32), 0.0)
    for searcher in opened_part_by_part(source):
        found, seconds = _timed_search(searcher, queries, min(depth, searcher.size))
        del searcher
        ranked = ranked.with_part(found, seconds, depth)
    return ranked


def calibrate(
    ann: SearcherSource,
    exact: SearcherSource,
    queries: np.ndarray,
    depth: int,
    min_recall: float = MIN_RECALL,
) -> Calibration:
    """Time both searchers on ``queries`` at ``depth``, part by part (an index's shards, an embed output's
    files: the driver holds one part at a time, whatever the catalog's size), and choose (see `choose`)."""
    if len(queries) == 0:
        reason = "no query of the split to measure on; exact search is never wrong"
        return Calibration(0, depth, None, None, None, min_recall, "exact", reason)
    truth = _timed_by_part(exact, queries, depth)
    depth = truth.scores.shape[1]  # at most the corpus
    found = _timed_by_part(ann, queries, depth)
    recall = recall_against(found.ids.tolist(), truth.ids.tolist())
    ann_seconds, exact_seconds = found.seconds, truth.seconds
    choice, reason = choose(ann_seconds, exact_seconds, recall, min_recall)
    return Calibration(len(queries), depth, ann_seconds, exact_seconds, recall, min_recall, choice, reason)


def first_queries(pattern: str, split: str, limit: int) -> list[TextToEncode]:
    """The first ``limit`` valid queries of ``split`` in the query files (in file-name order).

    Invalid queries are skipped here; the pipeline dead-letters them.
    """
    found: list[TextToEncode] = []
    paths = sorted(metadata.path for metadata in FileSystems.match([pattern])[0].metadata_list)
    for path in paths:
        with FileSystems.open(path) as handle:
            for batch in pq.ParquetFile(handle).iter_batches(columns=["query_id", "text", "split"]):
                for record in batch.to_pylist():
                    try:
                        query = validate_query(record)
                    except InvalidRecord:
                        continue
                    if query["split"] == split:
                        found.append(TextToEncode(query["query_id"], query["text"]))
                    if len(found) == limit:
                        return found
    return found


__all__ = [
    "CALIBRATION_QUERIES",
    "MIN_RECALL",
    "Calibration",
    "calibrate",
    "choose",
    "first_queries",
    "recall_against",
]
