"""The experiment's table: marks that survive Holm's correction, mean ± sd over seeds (issue 27, item 4)."""

from __future__ import annotations

import numpy as np
import pytest

from evaluation import holm_adjusted, paired_t_test
from evaluation.experiment_report import SIGNIFICANCE, write_report
from evaluation.experiment_stats import (
    detectable_difference,
    pool_seeds,
    power_analysis,
    queries_needed,
    summarise,
)

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


def test_seeds_pool_into_per_query_means_and_the_table_shows_their_spread(tmp_path) -> None:
    """Three runs of one variant: each query's metric is its mean over the runs, the sd is over the runs'
    means, accuracies average per aspect, and the table prints mean ± sd."""
    rng = np.random.default_rng(3)
    base = {name: rng.uniform(0.3, 0.7, QUERIES) for name in METRICS}
    runs = []
    for offset in (0.10, 0.12, 0.20):
        run = _result({name: base[name] + offset for name in METRICS})
        run["query_accuracy"] = {"accuracy": {"brand": offset}, "accuracy_at_3": {"brand": 2 * offset}}
        run["timings"] = {"train": 10.0}
        runs.append(run)
    pooled = pool_seeds(runs)
    assert pooled["seeds"] == 3 and pooled["timings"] == {"train": 30.0}
    first = pooled["per_query"]["q0"]["recall@100"]
    assert first == pytest.approx(base["recall@100"][0] + (0.10 + 0.12 + 0.20) / 3)
    assert pooled["sd"]["recall@100"] == pytest.approx(np.std([0.10, 0.12, 0.20], ddof=1))
    assert pooled["query_accuracy"]["accuracy"]["brand"] == pytest.approx(0.14)
    assert pooled["query_accuracy"]["accuracy_at_3"]["brand"] == pytest.approx(0.28)
    assert pool_seeds(runs[:1])["seeds"] == 1 and "sd" not in pool_seeds(runs[:1])
    summary = summarise({"bibert": _result(base), "variant": pooled}, "bibert")
    assert summary["variant"]["sd"] == pooled["sd"] and summary["variant"]["seeds"] == 3
    config = {"num_products": 100, "num_queries": QUERIES, "baseline": "bibert", "seeds": 3}
    markdown = write_report({"config": config, "summary": summary, "wall_seconds": 1}, tmp_path / "r.md")
    row = next(line for line in markdown.splitlines() if line.startswith("| variant | 0."))
    mean = summary["variant"]["means"]["recall@100"]
    assert f"{mean:.4f} ± {pooled['sd']['recall@100']:.4f} ↑" in row
    assert "over 3 training seeds" in markdown


def test_the_power_line_follows_the_normal_approximation(tmp_path) -> None:
    """sd 0.18 at α = 0.01 over one test and 80 % power: (2.576 + 0.842) · 0.18 / √150 = 5.0 points, and
    2 points need ((2.576 + 0.842) · 0.18 / 0.02)² = 947 queries; Holm's family of 84 asks for more."""
    assert detectable_difference(0.18, 150, 1) == pytest.approx(0.0502, abs=5e-4)
    assert queries_needed(0.18, 0.02, 1) == pytest.approx(947, abs=2)
    assert queries_needed(0.18, 0.02, 84) > 1.5 * queries_needed(0.18, 0.02, 1)
    summary = summarise(_results(0.1), "bibert")
    power = power_analysis(summary, QUERIES)
    assert power["tests"] == 4 and power["queries"] == QUERIES  # 2 variants x 2 marked metrics
    sds = [summary[v]["difference_sd"] for v in ("strong", "weak")]
    assert power["difference_sd"] == pytest.approx(float(np.median(sds)))
    config = {"num_products": 100, "num_queries": QUERIES, "baseline": "bibert"}
    report = {"config": config, "summary": summary, "wall_seconds": 1, "power": power}
    markdown = write_report(report, tmp_path / "r.md")
    assert f"would need {power['queries_for_target']:,} test queries" in markdown
    closest = min(("strong", "weak"), key=lambda v: summary[v]["difference_sd"])
    assert power["closest"]["variant"] == closest and power["closest"]["difference_sd"] == min(sds)
    assert power["closest"]["detectable"] == pytest.approx(detectable_difference(min(sds), QUERIES, 4))
    assert f"smallest sd ({closest}, {min(sds):.3f}) detects" in markdown


def test_a_variant_equal_to_the_baseline_on_every_query_is_not_marked(tmp_path) -> None:
    """Identical per-query values make the paired t-test undefined (p = nan): no ↑ or ↓, not a ↓."""
    results = _results(0.1)
    results["same"] = results["bibert"]
    summary = summarise(results, "bibert")
    assert all(np.isnan(p) for p in summary["same"]["pvalues"].values())
    config = {"num_products": 100, "num_queries": QUERIES, "baseline": "bibert"}
    markdown = write_report({"config": config, "summary": summary, "wall_seconds": 1}, tmp_path / "r.md")
    row = next(line for line in markdown.splitlines() if line.startswith("| same |"))
    assert "↑" not in row and "↓" not in row
