"""Offline evaluation: per-query metrics, means, significance tests, report files (§8.3, madral-kdd22).

Plain Python on NumPy, pyarrow and matplotlib: no Beam, no model, and of madr's packages only
`schemas`, so a metric can be checked (and reused) without a pipeline. The Beam stage that runs
these over a catalog is `pipelines.evaluate`.
"""

from evaluation.metrics import (
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
from evaluation.relevance import ESCI_RELEVANCE, RelevanceRule
from evaluation.report import format_table, read_run, write_metrics, write_run
from evaluation.significance import TTestResult, holm_adjusted, paired_t_test, student_t_cdf

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
    "holm_adjusted",
    "paired_t_test",
    "parse_metric",
    "parse_metrics",
    "read_run",
    "student_t_cdf",
    "write_metrics",
    "write_run",
]
