"""The experiment's table marks a difference only when it survives Holm's correction (issue 27, item 4)."""

from __future__ import annotations

import numpy as np

from evaluation import holm_adjusted, paired_t_test
from jobs.experiment import summarise
from jobs.experiment_report import SIGNIFICANCE, write_report

QUERIES = 40
METRICS = ("recall@100", "ndcg@10")


def _result(values: dict[str, np.ndarray]) -> dict:
    per_query = {f"q{i}": {name: float(v[i]) for name, v in values.items()} for i in range(QUERIES)}
    return {"per_query": per_query, "query_accuracy": None, "product_accuracy": None, "timings": {}}


def _results(shift: float) -> dict:
    rng = np.random.default_rng(7)
    base = {name: rng.uniform(0.3, 0.7, QUERIES) for name in METRICS}
    noise = {name: rng.normal(0, 0.2, QUERIES) for name in METRICS}
    return {
        "bibert": _result(base),
        "strong": _result({name: base[name] + 0.3 + noise[name] * 0.1 for name in METRICS}),
        "weak": _result({name: base[name] + shift + noise[name] for name in METRICS}),
    }


def test_marks_follow_holm_adjusted_p_values_and_not_the_raw_ones(tmp_path) -> None:
    # The weak variant's shift where its raw p-value is below 0.01 but its adjusted one is not.
    for shift in np.linspace(0.05, 0.2, 151):
        summary = summarise(_results(float(shift)), "bibert")
        raw, adjusted = summary["weak"]["pvalues"], summary["weak"]["pvalues_holm"]
        if raw["recall@100"] < SIGNIFICANCE <= adjusted["recall@100"]:
            break
    else:
        raise AssertionError("no shift puts the weak variant between the raw and the adjusted threshold")
    # Adjusted over the 4 comparisons the table marks (2 variants x 2 metrics), as holm_adjusted does.
    family = {(v, m): summary[v]["pvalues"][m] for v in ("strong", "weak") for m in METRICS}
    assert {(v, m): summary[v]["pvalues_holm"][m] for v, m in family} == holm_adjusted(family)
    results = _results(float(shift))
    a = [row["recall@100"] for row in results["weak"]["per_query"].values()]
    b = [row["recall@100"] for row in results["bibert"]["per_query"].values()]
    assert raw["recall@100"] == paired_t_test(a, b).pvalue
    config = {"num_products": 100, "num_queries": QUERIES, "baseline": "bibert"}
    markdown = write_report({"config": config, "summary": summary, "wall_seconds": 1}, tmp_path / "r.md")
    rows = {
        line.split(" | ")[0].strip("| "): line.split(" | ") for line in markdown.splitlines() if " | " in line
    }
    assert rows["strong"][1].endswith("↑")  # R@100: p tiny, marked after adjustment too
    assert not rows["weak"][1].endswith(("↑", "↓"))  # raw p < 0.01, adjusted not: unmarked
    assert "Holm-adjusted" in markdown
