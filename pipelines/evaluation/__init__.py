"""Offline evaluation: per-query metrics, means, significance tests, report files (§8.3, madral-kdd22)."""

from pipelines.evaluation.metrics import (
    DEFAULT_METRICS,
    UNDEFINED,
    MetricMean,
    MetricSpec,
    aggregate,
    check_depth,
    evaluate_query,
    evaluate_ranks,
    parse_metric,
    parse_metrics,
)
from pipelines.evaluation.relevance import ESCI_RELEVANCE, RelevanceRule
from pipelines.evaluation.report import format_table, read_run, write_metrics, write_run
from pipelines.evaluation.significance import TTestResult, paired_t_test, student_t_cdf

__all__ = [
    "DEFAULT_METRICS",
    "ESCI_RELEVANCE",
    "UNDEFINED",
    "MetricMean",
    "MetricSpec",
    "RelevanceRule",
    "TTestResult",
    "aggregate",
    "check_depth",
    "evaluate_query",
    "evaluate_ranks",
    "format_table",
    "paired_t_test",
    "parse_metric",
    "parse_metrics",
    "read_run",
    "student_t_cdf",
    "write_metrics",
    "write_run",
]
