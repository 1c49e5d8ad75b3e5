"""Run and metrics files: written with the schemas in schemas/records.py and read back intact."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from evaluation.metrics import (
    ESCI_RELEVANCE,
    RelevanceRule,
    aggregate,
    evaluate_query,
    parse_metrics,
)
from evaluation.report import format_table, read_run, write_metrics, write_run
from schemas.records import RUN_SCHEMA, per_query_metrics_schema


def _run_rows() -> list[dict[str, object]]:
    rows: list[dict[str, object]] = [
        {"query_id": "q2", "product_id": "b", "rank": 2, "score": 0.5},
        {"query_id": "q1", "product_id": "x", "rank": 1, "score": 3.25},
        {"query_id": "q2", "product_id": "a", "rank": 1, "score": 0.75},
        {"query_id": "q1", "product_id": "y", "rank": 2, "score": 3.0},
        {"query_id": "q1", "product_id": "z", "rank": 3, "score": 3.0},
    ]
    return rows


def test_run_file_has_run_schema_and_reads_back(tmp_path: Path) -> None:
    path = write_run(tmp_path / "run" / "run.parquet", _run_rows(), metadata={"model_id": "madral-test"})
    table = pq.read_table(path)
    assert table.schema.equals(RUN_SCHEMA)
    assert table.schema.metadata == {b"model_id": b"madral-test"}
    assert table.column("query_id").to_pylist() == ["q1", "q1", "q1", "q2", "q2"]
    assert table.column("rank").to_pylist() == [1, 2, 3, 1, 2]
    assert table.column("score").to_pylist() == [3.25, 3.0, 3.0, 0.75, 0.5]
    assert read_run(path) == {"q1": ["x", "y", "z"], "q2": ["a", "b"]}
    assert not list(path.parent.glob("*.tmp"))


def test_write_run_accepts_numpy_scalars(tmp_path: Path) -> None:
    rows = [{"query_id": "q", "product_id": "p", "rank": np.int32(1), "score": np.float32(0.25)}]
    assert pq.read_table(write_run(tmp_path / "run.parquet", rows)).to_pylist() == [
        {"query_id": "q", "product_id": "p", "rank": 1, "score": 0.25}
    ]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"rank": 3}, "ranks must be 1..n"),  # q2 ranks 3, 1: rank 2 is missing
        ({"rank": 0}, "rank >= 1"),
        ({"product_id": "a"}, "twice"),
        ({"score": math.nan}, "finite score"),
        ({"query_id": ""}, "non-empty"),
    ],
)
def test_write_run_rejects_malformed_rankings(
    tmp_path: Path, change: dict[str, object], message: str
) -> None:
    rows = _run_rows()
    rows[0] = {**rows[0], **change}
    with pytest.raises(ValueError, match=message):
        write_run(tmp_path / "run.parquet", rows)
    assert not (tmp_path / "run.parquet").exists()


def test_read_run_refuses_other_files(tmp_path: Path) -> None:
    per_query = [{"query_id": "q1", "recall@10": 1.0}]
    _, per_query_path = write_metrics(tmp_path, aggregate(per_query), per_query, RelevanceRule())
    with pytest.raises(ValueError, match="not a run file"):
        read_run(per_query_path)


def _evaluated() -> tuple[list[dict[str, object]], dict]:
    specs = parse_metrics(["recall@10", "ndcg@5", "auc"])
    judgments = {"q1": {"a": 3, "b": 0}, "q2": {"c": 1}, "q0": {"d": 2, "e": 3}}
    rankings = {"q1": ["b", "a"], "q2": ["c"], "q0": ["e", "x"]}
    per_query: list[dict[str, object]] = [
        {
            "query_id": query_id,
            **evaluate_query(rankings[query_id], judgments[query_id], specs, RelevanceRule()),
        }
        for query_id in judgments
    ]
    return per_query, aggregate(per_query)


def test_metrics_files(tmp_path: Path) -> None:
    per_query, summary = _evaluated()
    metrics_path, per_query_path = write_metrics(tmp_path / "eval", summary, per_query, ESCI_RELEVANCE)
    document = json.loads(metrics_path.read_text())
    assert document["num_queries"] == 3
    assert document["relevance_rule"] == {
        "positive_min_grade": 3,
        "gains": {"0": 0.0, "1": 0.01, "2": 0.1, "3": 1.0},
    }
    assert RelevanceRule.from_dict(document["relevance_rule"]) == ESCI_RELEVANCE
    assert list(document["metrics"]) == ["recall@10", "ndcg@5", "auc"]
    assert document["metrics"]["recall@10"] == {
        "mean": 0.75,
        "count": 2,
        "undefined": 1,
        "definition": document["metrics"]["recall@10"]["definition"],
    }
    assert "not a hit rate" in document["metrics"]["recall@10"]["definition"]
    assert document["metrics"]["auc"]["count"] == 1 and document["metrics"]["auc"]["mean"] == 0.0

    table = pq.read_table(per_query_path)
    assert table.schema.equals(per_query_metrics_schema(["recall@10", "ndcg@5", "auc"]))
    rows = table.to_pylist()
    assert [row["query_id"] for row in rows] == ["q0", "q1", "q2"]
    assert rows[1]["recall@10"] == 1.0 and rows[1]["auc"] == 0.0
    assert math.isnan(rows[2]["recall@10"]) and math.isnan(rows[2]["auc"])  # undefined stays nan
    assert rows[2]["ndcg@5"] == 1.0


def test_a_mean_over_no_query_is_null_in_json(tmp_path: Path) -> None:
    per_query = [{"query_id": "q1", "auc": math.nan}]
    metrics_path, _ = write_metrics(tmp_path, aggregate(per_query), per_query, RelevanceRule())
    document = json.loads(metrics_path.read_text())
    assert document["metrics"]["auc"] == {**document["metrics"]["auc"], "mean": None, "count": 0}
    assert document["relevance_rule"] == {"positive_min_grade": 2, "gains": "2^grade - 1"}


def test_write_metrics_rejects_rows_that_do_not_fit_the_summary(tmp_path: Path) -> None:
    per_query, summary = _evaluated()
    with pytest.raises(ValueError, match="differ"):
        write_metrics(
            tmp_path, summary, [*per_query[:2], {"query_id": "q9", "recall@10": 1.0}], RelevanceRule()
        )
    with pytest.raises(ValueError, match="covers"):
        write_metrics(tmp_path, summary, per_query[:2], RelevanceRule())
    with pytest.raises(ValueError, match="repeats"):
        write_metrics(tmp_path, summary, [per_query[0], per_query[0], per_query[1]], RelevanceRule())
    with pytest.raises(ValueError, match="known metrics"):
        write_metrics(tmp_path, {"hits@10": summary["recall@10"]}, [], RelevanceRule())


def test_format_table_is_aligned() -> None:
    _, summary = _evaluated()
    lines = format_table(summary).splitlines()
    assert lines[0].split() == ["metric", "mean", "queries", "undefined"]
    assert lines[1].split() == ["recall@10", "0.7500", "2", "1"]
    assert lines[3].split() == ["auc", "0.0000", "1", "2"]
    starts = {tuple(match.start() for match in re.finditer(r"\S+", line))[:1] for line in lines}
    ends = {tuple(match.end() for match in re.finditer(r"\S+", line))[1:] for line in lines}
    assert starts == {(0,)} and len(ends) == 1  # metric names left-aligned, numbers right-aligned
    empty = format_table(aggregate([{"auc": math.nan}]))
    assert empty.splitlines()[1].split() == ["auc", "n/a", "0", "1"]
