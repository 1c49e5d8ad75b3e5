"""JoinJudgments + SearchAndScore + WriteRun on Beam's FnApiRunner with a real exact searcher.

Expected values are computed without Beam: a brute-force ranking by numpy argsort, scored by
`evaluate_query` (checked against trec_eval in tests/test_metrics.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import apache_beam as beam
import numpy as np
import pyarrow.parquet as pq
import pytest
from apache_beam.internal import pickler
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from evaluation import RelevanceRule, evaluate_query, parse_metrics
from index_builder import ExactSearcher
from pipelines.evaluate.transforms import JoinJudgments, SearchAndScore, WriteRun
from pipelines.storage.stage_manifests import counter_value

METRICS = parse_metrics(["recall@3", "recall@20", "ndcg@5", "mrr@10", "auc"])
DEPTH = 20
RNG = np.random.default_rng(5)
CORPUS = RNG.standard_normal((50, 8)).astype(np.float32)
IDS = [f"p{row}" for row in range(50)]
VECTORS = {f"q{n}": RNG.standard_normal(8).astype(np.float32) for n in range(7)}
# q0–q5 are judged (q3 also on a product the corpus lacks: left out of its scores, and counted); q6 has
# no judgments; "qx" is judged but was not embedded (a query outside the evaluated split).
JUDGMENTS = {
    **{f"q{n}": {f"p{(7 * n + 3 * m) % 50}": (n + m) % 5 for m in range(6)} for n in range(6)},
    "qx": {"p1": 3},
}
JUDGMENTS["q3"]["gone"] = 4
IN_CORPUS = {
    query_id: {pid: g for pid, g in grades.items() if pid in IDS} for query_id, grades in JUDGMENTS.items()
}


@dataclass(frozen=True)
class ExactSource:
    """A `SearcherSource` holding its corpus: what `SearcherSpec` reads from an embed output."""

    def open(self) -> ExactSearcher:
        return ExactSearcher(CORPUS, IDS)


def _ranking(query_id: str) -> list[str]:
    return [IDS[row] for row in np.argsort(-(CORPUS @ VECTORS[query_id]), kind="stable")[:DEPTH]]


def _run(tmp_path: Path, emit_run: bool) -> tuple[beam.runners.runner.PipelineResult, list[dict]]:
    judgment_rows = [
        {"query_id": query_id, "product_id": pid, "grade": grade}
        for query_id, grades in JUDGMENTS.items()
        for pid, grade in grades.items()
    ]
    expected = [
        {
            "query_id": query_id,
            **evaluate_query(_ranking(query_id), IN_CORPUS[query_id], METRICS, RelevanceRule()),
        }
        for query_id in sorted(VECTORS)
        if query_id in JUDGMENTS
    ]
    pipeline = TestPipeline(runner=beam.runners.portability.fn_api_runner.FnApiRunner())
    joined = {
        "embedded": pipeline | "Embedded" >> beam.Create(list(VECTORS.items())),
        "judgments": pipeline | "Judgments" >> beam.Create(judgment_rows),
    } | JoinJudgments()
    scored = joined | SearchAndScore(
        ExactSource(), DEPTH, METRICS, RelevanceRule(), batch_size=3, emit_run=emit_run
    )
    # nan never equals nan: compare the metric rows with nan replaced by a marker.
    marked = scored["per_query"] | beam.Map(lambda row: {k: "nan" if v != v else v for k, v in row.items()})
    assert_that(
        marked,
        equal_to([{k: "nan" if v != v else v for k, v in row.items()} for row in expected]),
        label="PerQuery",
    )
    ranks = scored["relevant_ranks"] | beam.Map(
        lambda row: (row["query_id"], row["num_relevant"], tuple(row["ranks"]))
    )
    expected_ranks = []
    for query_id in sorted(JUDGMENTS.keys() & VECTORS.keys()):
        relevant = {pid for pid, grade in IN_CORPUS[query_id].items() if grade >= 2}
        found = tuple(rank for rank, pid in enumerate(_ranking(query_id), start=1) if pid in relevant)
        expected_ranks.append((query_id, len(relevant), found))
    assert_that(ranks, equal_to(expected_ranks), label="RelevantRanks")
    _ = scored["run"] | WriteRun(str(tmp_path / "run"))
    result = pipeline.run()
    result.wait_until_finish()
    files = sorted(tmp_path.glob("run-*.parquet"))
    return result, pq.read_table(files).to_pylist() if files else []


def test_search_and_score_matches_brute_force_and_counts(tmp_path) -> None:
    result, run = _run(tmp_path, emit_run=True)
    assert counter_value(result, "queries_searched") == 7
    assert counter_value(result, "queries_scored") == 6
    assert counter_value(result, "queries_without_judgments") == 1
    assert counter_value(result, "judgments_not_in_catalog") == 1  # q3's "gone"
    # Every searched query is in the run, the unjudged q6 too; the unembedded "qx" is not.
    by_query: dict[str, list[dict]] = {}
    for row in run:
        by_query.setdefault(row["query_id"], []).append(row)
    assert sorted(by_query) == sorted(VECTORS)
    for query_id, rows in by_query.items():
        rows.sort(key=lambda row: row["rank"])
        assert [row["rank"] for row in rows] == list(range(1, DEPTH + 1))
        assert [row["product_id"] for row in rows] == _ranking(query_id)
        exact = np.sort(CORPUS @ VECTORS[query_id])[::-1][:DEPTH]
        assert [row["score"] for row in rows] == pytest.approx(exact.tolist(), abs=1e-5)


def test_search_and_score_without_run_keeps_the_metrics(tmp_path) -> None:
    result, run = _run(tmp_path, emit_run=False)
    assert run == []
    assert counter_value(result, "queries_scored") == 6


@dataclass(frozen=True)
class CountingSource:
    """An exact searcher over CORPUS that notes each time it is opened (a file: the DoFns are copies)."""

    log: str

    def open(self) -> ExactSearcher:
        with open(self.log, "a") as handle:
            handle.write("opened\n")
        return ExactSearcher(CORPUS, IDS)


def test_a_worker_holds_one_copy_of_a_searcher_however_many_dofn_instances_it_makes(tmp_path) -> None:
    """A runner makes a DoFn instance per thread and bundle processor by unpickling the transform's DoFn:
    every such copy in a process shares one searcher (at 1M products 1.5 GB, at 100M about 51 GB)."""
    log = tmp_path / "opens.txt"
    transform = SearchAndScore(CountingSource(str(log)), DEPTH, METRICS, RelevanceRule(), batch_size=3)
    serialized = pickler.dumps(transform.fn)
    copies = [pickler.loads(serialized) for _ in range(3)]
    for copy in copies:
        copy.setup()
    assert log.read_text().count("opened") == 1
    assert copies[0].searcher is copies[1].searcher is copies[2].searcher
    found = copies[2].searcher.search(np.stack([VECTORS["q0"]]), DEPTH)
    assert [IDS[row] for row in found.indices[0]] == _ranking("q0")
