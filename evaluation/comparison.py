"""Two systems on the same queries, metric by metric: mean difference and paired t-test.

Per-query rows are aligned by query id. For each metric both report, the means are taken over the
queries where the metric is defined in *both*, so mean B − mean A is exactly the mean paired difference
that the two-sided paired t-test (§8.3, madral-kdd22; `evaluation.significance`) tests against 0. Means
over different query sets would mix a model change with a change in which queries count. `madr compare`
reads two evaluation folders into this; `madr evaluate` compares the model with the backbone used
zero-shot the same way.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from evaluation.significance import paired_t_test
from evaluation.text_table import format_text_table

QueryRows = Mapping[str, Mapping[str, float]]


@dataclass(frozen=True)
class MetricComparison:
    """One metric over the queries where both runs define it; delta is B − A, pvalue nan when untestable."""

    metric: str
    mean_a: float
    mean_b: float
    delta: float
    pvalue: float
    queries: int


@dataclass(frozen=True)
class ComparisonReport:
    """Per-metric comparison of two evaluations, plus what could not be compared and why."""

    run_a: str
    run_b: str
    queries_a: int
    queries_b: int
    common_queries: int
    metrics: tuple[MetricComparison, ...]
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        def number(value: float) -> float | None:
            return None if math.isnan(value) else value

        return {
            "run_a": self.run_a,
            "run_b": self.run_b,
            "queries_a": self.queries_a,
            "queries_b": self.queries_b,
            "common_queries": self.common_queries,
            "metrics": {
                m.metric: {
                    "mean_a": number(m.mean_a),
                    "mean_b": number(m.mean_b),
                    "delta": number(m.delta),
                    "pvalue": number(m.pvalue),
                    "queries": m.queries,
                }
                for m in self.metrics
            },
            "notes": list(self.notes),
        }

    def format(self) -> str:
        """A text table: metric, mean A, mean B, delta (B − A), paired t-test p-value, paired queries."""

        def cell(value: float, spec: str) -> str:
            return "n/a" if math.isnan(value) else format(value, spec)

        header = ("metric", "mean A", "mean B", "delta", "p-value", "queries")
        body = [
            (
                m.metric,
                cell(m.mean_a, ".4f"),
                cell(m.mean_b, ".4f"),
                cell(m.delta, "+.4f"),
                cell(m.pvalue, ".4g"),
                str(m.queries),
            )
            for m in self.metrics
        ]
        intro = [
            f"A: {self.run_a} ({self.queries_a} queries)",
            f"B: {self.run_b} ({self.queries_b} queries)",
            f"{self.common_queries} queries in both; delta = B − A; p: two-sided paired t-test",
            "",
        ]
        return "\n".join([*intro, format_text_table(header, body), *(f"note: {note}" for note in self.notes)])


def _compare_metric(
    name: str, a: Mapping[str, Mapping[str, float]], b: Mapping[str, Mapping[str, float]], common: list[str]
) -> MetricComparison:
    pairs = [
        (a[query][name], b[query][name])
        for query in common
        if not (math.isnan(a[query][name]) or math.isnan(b[query][name]))
    ]
    if not pairs:
        return MetricComparison(name, math.nan, math.nan, math.nan, math.nan, 0)
    first, second = [x for x, _ in pairs], [y for _, y in pairs]
    mean_a, mean_b = math.fsum(first) / len(pairs), math.fsum(second) / len(pairs)
    # paired_t_test(b, a) tests mean(b − a) = 0; the p-value is the same either way round.
    pvalue = paired_t_test(second, first).pvalue if len(pairs) >= 2 else math.nan
    return MetricComparison(name, mean_a, mean_b, mean_b - mean_a, pvalue, len(pairs))


def by_query(rows: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per-query metric rows ({"query_id": ..., metric: value}) as `QueryRows`: query id -> metrics."""
    return {str(row["query_id"]): {k: v for k, v in row.items() if k != "query_id"} for row in rows}


def compare_query_rows(
    run_a: str,
    rows_a: QueryRows,
    names_a: Sequence[str],
    run_b: str,
    rows_b: QueryRows,
    names_b: Sequence[str],
    notes: Sequence[str] = (),
) -> ComparisonReport:
    """Compare B with A on the queries both scored, for every metric both report (`notes` are kept)."""
    common = sorted(rows_a.keys() & rows_b.keys())
    found = list(notes)
    if not common:
        found.append("the runs share no query id: nothing to compare")
    elif len(common) < max(len(rows_a), len(rows_b)):
        found.append(f"only the {len(common)} queries in both runs are compared")
    only = [(name, "A") for name in names_a if name not in names_b] + [
        (name, "B") for name in names_b if name not in names_a
    ]
    found.extend(f"{name} is only in {side}" for name, side in only)
    metrics = tuple(_compare_metric(name, rows_a, rows_b, common) for name in names_a if name in names_b)
    return ComparisonReport(run_a, run_b, len(rows_a), len(rows_b), len(common), metrics, tuple(found))


__all__ = ["ComparisonReport", "MetricComparison", "QueryRows", "by_query", "compare_query_rows"]
