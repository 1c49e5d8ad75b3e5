"""An experiment's figures: per variant, means over the test queries (± sd over training seeds), and
paired t-tests against the baseline and the zero-shot backbone, Holm-adjusted over the table's marks.

A variant trained with several seeds is pooled first (`pool_seeds`): each query's metric is averaged
over the seeds, and the paired tests compare those per-query means, so the queries stay the unit of the
test and the seeds' noise is averaged out of each pair instead of counted as more queries.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Collection
from typing import Any

import numpy as np

from evaluation.metrics import aggregate
from evaluation.significance import SIGNIFICANCE, holm_adjusted, paired_t_test

_ACCURACIES = ("accuracy", "accuracy_at_3")
# The power line of the table: Recall@100, at 80 % power (issue 27: detect 2 points of it).
POWER_METRIC = "recall@100"
POWER = 0.8


def pool_seeds(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One variant's result from its runs, one per training seed (in seed order).

    `per_query`: each query's metrics averaged over the runs that define them; `sd`: per metric, the
    standard deviation over the runs of their means (absent with one run); accuracies averaged per aspect;
    timings summed; everything else (sparse index figures) from the first run.
    """
    first = runs[0]
    if len(runs) == 1:
        return {**first, "seeds": 1}
    per_query: dict[str, dict[str, Any]] = {}
    for query_id in first["per_query"]:
        rows = [run["per_query"][query_id] for run in runs if query_id in run["per_query"]]
        names = {name for row in rows for name, value in row.items() if isinstance(value, (int, float))}
        per_query[query_id] = {"query_id": query_id}
        for name in names:
            values = [row[name] for row in rows if name in row and not np.isnan(row[name])]
            per_query[query_id][name] = float(np.mean(values)) if values else float("nan")
    run_means = [
        {name: m.mean for name, m in aggregate(list(run["per_query"].values())).items()} for run in runs
    ]
    sd = {
        name: statistics.stdev([means[name] for means in run_means])
        for name in run_means[0]
        if all(name in means and not np.isnan(means[name]) for means in run_means)
    }
    timings: dict[str, float] = {}
    for run in runs:
        for stage, seconds in run["timings"].items():
            timings[stage] = round(timings.get(stage, 0.0) + seconds, 1)
    return {
        **first,
        "per_query": per_query,
        "sd": sd,
        "seeds": len(runs),
        "timings": timings,
        "query_accuracy": _mean_accuracy([run["query_accuracy"] for run in runs]),
        "product_accuracy": _mean_accuracy([run["product_accuracy"] for run in runs]),
        "document_cosine": _mean_of([run.get("document_cosine") for run in runs]),
    }


def _mean_of(values: list[float | None]) -> float | None:
    present = [value for value in values if value is not None]
    return float(np.mean(present)) if present else None


def _mean_accuracy(accuracies: list[dict[str, Any] | None]) -> dict[str, Any] | None:
    """Per aspect, the mean over the runs of Accuracy@1 and @3 (the first run's other fields)."""
    present = [accuracy for accuracy in accuracies if accuracy]
    if not present:
        return None
    pooled = dict(present[0])
    for key in _ACCURACIES:
        if present[0].get(key):
            pooled[key] = {
                aspect: float(np.mean([a[key][aspect] for a in present if aspect in (a.get(key) or {})]))
                for aspect in present[0][key]
            }
    return pooled


def paired_values(
    per_query: dict[str, Any], base: dict[str, Any], name: str
) -> tuple[np.ndarray, np.ndarray]:
    """`name`'s values in `per_query` and in `base` over the queries where both define it (not nan)."""
    pairs = [
        (row[name], base[qid][name])
        for qid, row in per_query.items()
        if qid in base and name in row and name in base[qid]
    ]
    pairs = [(a, b) for a, b in pairs if not (np.isnan(a) or np.isnan(b))]
    return np.array([a for a, _ in pairs], dtype=float), np.array([b for _, b in pairs], dtype=float)


def _pvalues(per_query: dict[str, Any], base: dict[str, Any], names: list[str]) -> dict[str, float]:
    """Paired t-test p-value per metric, over the queries where both define it."""
    pvalues = {}
    for name in names:
        mine, theirs = paired_values(per_query, base, name)
        if len(mine) >= 2:
            pvalues[name] = paired_t_test(mine, theirs).pvalue
    return pvalues


def summarise(
    results: dict[str, Any],
    baseline: str,
    zero_shot: str | None = None,
    marked: Collection[str] | None = None,
) -> dict[str, Any]:
    """Means per variant and metric, with paired t-test p-values against the baseline's queries and,
    when `results` has the `zero_shot` variant, against it (`pvalues_zero_shot`). Holm's correction runs
    over the `marked` metrics (those a table marks; every metric when None)."""
    summary: dict[str, Any] = {}
    base = results[baseline]["per_query"]
    reference = results[zero_shot]["per_query"] if zero_shot in results else None
    for variant, result in results.items():
        rows = list(result["per_query"].values())
        means = {name: mean.mean for name, mean in aggregate(rows).items()}
        pvalues = _pvalues(result["per_query"], base, list(means)) if variant != baseline else {}
        if reference is not None and variant != zero_shot:
            result["pvalues_zero_shot"] = _pvalues(result["per_query"], reference, list(means))
        summary[variant] = {
            "means": means,
            "sd": result.get("sd", {}),
            "seeds": result.get("seeds", 1),
            "pvalues": pvalues,
            "pvalues_zero_shot": result.get("pvalues_zero_shot", {}),
            "query_accuracy": result["query_accuracy"],
            "product_accuracy": result["product_accuracy"],
            "timings": result["timings"],
            "document_cosine": result.get("document_cosine"),
        }
        if "sparse_indexes" in result:  # per inverted index: means, size on disk, ms per query
            summary[variant]["sparse_indexes"] = result["sparse_indexes"]
    for family in ("pvalues", "pvalues_zero_shot"):
        _holm_correct(summary, family, marked)
    for variant, result in results.items():
        if variant != baseline:
            summary[variant]["difference_sd"] = _difference_sd(result["per_query"], base, POWER_METRIC)
    return summary


def _difference_sd(per_query: dict[str, Any], base: dict[str, Any], name: str) -> float | None:
    """The sd of the per-query differences from the baseline in `name` (None with fewer than 2 pairs)."""
    mine, theirs = paired_values(per_query, base, name)
    return statistics.stdev(mine - theirs) if len(mine) >= 2 else None


def detectable_difference(difference_sd: float, queries: int, tests: int, power: float = POWER) -> float:
    """The smallest mean difference a two-sided paired test over `queries` detects with `power`, at
    p < 0.01 after Holm's correction over `tests` comparisons (its first step, α / tests: the bound
    every mark must clear when all are real differences of this size), by the normal approximation."""
    normal = statistics.NormalDist()
    z = normal.inv_cdf(1 - SIGNIFICANCE / tests / 2) + normal.inv_cdf(power)
    return z * difference_sd / math.sqrt(queries)


def queries_needed(difference_sd: float, difference: float, tests: int, power: float = POWER) -> int:
    """Test queries a paired test needs to detect `difference` (see `detectable_difference`)."""
    normal = statistics.NormalDist()
    z = normal.inv_cdf(1 - SIGNIFICANCE / tests / 2) + normal.inv_cdf(power)
    return math.ceil((z * difference_sd / difference) ** 2)


def _holm_correct(summary: dict[str, Any], family: str, marked: Collection[str] | None) -> None:
    """Add `<family>_holm` to every variant: its p-values of the `marked` metrics, Holm-adjusted over all
    the comparisons a table marks (every variant, every marked metric), so that the marks hold jointly
    at p < 0.01 and not once per cell (84 tests for 12 variants and 7 metrics)."""
    tests = {
        (variant, metric): pvalue
        for variant, row in summary.items()
        for metric, pvalue in row[family].items()
        if marked is None or metric in marked
    }
    for variant in summary:
        summary[variant][f"{family}_holm"] = {}
    for (variant, metric), adjusted in holm_adjusted(tests).items():
        summary[variant][f"{family}_holm"][metric] = adjusted


def power_analysis(summary: dict[str, Any], queries: int, target: float = 0.02) -> dict[str, Any] | None:
    """What the table can detect in `POWER_METRIC`: with the median sd of the per-query differences from
    the baseline, the difference detectable over `queries` test queries after Holm's correction over the
    table's comparisons, and the test queries that `target` (2 points) would need.

    `closest`: the same for the comparison of smallest sd. A difference's sd grows with the difference
    (at 60,000 products: 0.11 for Condenser 2 points from BiBERT, 0.33 for a collapsed DSSM 51 points
    away), so the median overstates what the variants a few points apart need."""
    sds = {variant: row["difference_sd"] for variant, row in summary.items() if row.get("difference_sd")}
    if not sds or queries < 2:
        return None
    tests = max(1, sum(len(row.get("pvalues_holm") or {}) for row in summary.values()))  # Holm's family
    sd = statistics.median(sds.values())
    closest = min(sds, key=sds.__getitem__)
    return {
        "metric": POWER_METRIC,
        "queries": queries,
        "tests": tests,
        "difference_sd": sd,
        "detectable": detectable_difference(sd, queries, tests),
        "target": target,
        "queries_for_target": queries_needed(sd, target, tests),
        "closest": {
            "variant": closest,
            "difference_sd": sds[closest],
            "detectable": detectable_difference(sds[closest], queries, tests),
        },
    }
