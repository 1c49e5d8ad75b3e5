"""`madr compare`: two hand-written evaluations, deltas and a paired t-test p-value computed by hand."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from evaluation import ESCI_RELEVANCE, RelevanceRule, aggregate, write_metrics
from jobs.cli import main
from jobs.compare import compare_runs
from schemas import ArtifactError

NAN = math.nan
# recall@10: q5 is undefined in A, q6 exists only in B -> the pairs are q1..q4, differences B − A of
# 0.25, 0.5, 0, 0.25. ndcg@5 is the same in both runs. auc is only in A.
RUN_A = {
    "q1": {"recall@10": 0.5, "ndcg@5": 0.4, "auc": 0.5},
    "q2": {"recall@10": 0.0, "ndcg@5": 0.1, "auc": 0.7},
    "q3": {"recall@10": 1.0, "ndcg@5": 0.9, "auc": 1.0},
    "q4": {"recall@10": 0.25, "ndcg@5": 0.3, "auc": 0.2},
    "q5": {"recall@10": NAN, "ndcg@5": 0.6, "auc": NAN},
}
RUN_B = {
    "q1": {"recall@10": 0.75, "ndcg@5": 0.4},
    "q2": {"recall@10": 0.5, "ndcg@5": 0.1},
    "q3": {"recall@10": 1.0, "ndcg@5": 0.9},
    "q4": {"recall@10": 0.5, "ndcg@5": 0.3},
    "q5": {"recall@10": 1.0, "ndcg@5": 0.6},
    "q6": {"recall@10": 0.0, "ndcg@5": 0.0},
}


def _write(folder: Path, rows: dict[str, dict[str, float]], rule: RelevanceRule | None = None) -> str:
    per_query = [{"query_id": query_id, **values} for query_id, values in rows.items()]
    write_metrics(folder, aggregate(per_query), per_query, rule or RelevanceRule())
    return str(folder)


def _t3_two_sided_p(t: float) -> float:
    """Student's t with 3 degrees of freedom has a closed-form CDF (independent of significance.py)."""
    x = t / math.sqrt(3)
    return 1.0 - (2.0 / math.pi) * (x / (1.0 + x * x) + math.atan(x))


def test_deltas_means_and_paired_t_test_by_hand(tmp_path) -> None:
    report = compare_runs(_write(tmp_path / "a", RUN_A), _write(tmp_path / "b", RUN_B))
    assert (report.queries_a, report.queries_b, report.common_queries) == (5, 6, 5)
    by_name = {m.metric: m for m in report.metrics}
    assert list(by_name) == ["recall@10", "ndcg@5"]

    recall = by_name["recall@10"]
    assert recall.queries == 4
    assert recall.mean_a == pytest.approx((0.5 + 0.0 + 1.0 + 0.25) / 4)
    assert recall.mean_b == pytest.approx((0.75 + 0.5 + 1.0 + 0.5) / 4)
    assert recall.delta == pytest.approx(0.25)
    # differences 0.25, 0.5, 0, 0.25: mean 0.25, sd sqrt(0.125 / 3), t = 0.25 / (sd / 2) = sqrt(6)
    assert recall.pvalue == pytest.approx(_t3_two_sided_p(math.sqrt(6)), abs=1e-10)
    assert recall.pvalue == pytest.approx(0.0917, abs=1e-4)

    ndcg = by_name["ndcg@5"]
    assert (ndcg.queries, ndcg.delta) == (5, pytest.approx(0.0))
    assert math.isnan(ndcg.pvalue)  # every difference is 0: the t statistic is undefined
    assert "auc is only in A" in report.notes
    assert "only the 5 queries in both runs are compared" in report.notes

    text = report.format()
    assert "recall@10" in text and "n/a" in text
    recall_line = next(line for line in text.splitlines() if line.startswith("recall@10"))
    assert recall_line.split() == ["recall@10", "0.4375", "0.6875", "+0.2500", "0.09172", "4"]
    assert report.to_dict()["metrics"]["ndcg@5"]["pvalue"] is None


def test_run_folders_with_eval_inside_and_mismatched_rules(tmp_path) -> None:
    # A nightly run folder (OUT/<run id>/eval/) is accepted for either argument.
    a = _write(tmp_path / "nightly" / "2026-11-20" / "eval", RUN_A)
    b = _write(tmp_path / "nightly" / "2026-11-21" / "eval", RUN_B, ESCI_RELEVANCE)
    report = compare_runs(str(tmp_path / "nightly" / "2026-11-20"), str(tmp_path / "nightly" / "2026-11-21"))
    assert (report.run_a, report.run_b) == (a, b)
    assert any("judge relevance differently" in note for note in report.notes)
    with pytest.raises(ArtifactError, match="neither it nor"):
        compare_runs(str(tmp_path / "nightly"), b)


def test_madr_compare_prints_the_table(tmp_path, capsys) -> None:
    a, b = _write(tmp_path / "a", RUN_A), _write(tmp_path / "b", RUN_B)
    assert main(["compare", a, b]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0] == f"A: {a} (5 queries)" and lines[1] == f"B: {b} (6 queries)"
    header = next(line for line in lines if line.startswith("metric"))
    assert header.split() == ["metric", "mean", "A", "mean", "B", "delta", "p-value", "queries"]
    assert any(line.split()[:4] == ["recall@10", "0.4375", "0.6875", "+0.2500"] for line in lines)
    assert "note: auc is only in A" in out
