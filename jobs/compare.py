"""`madr compare RUN_A RUN_B`: is B better than A on the same queries, and is the difference real?

Two evaluation outputs (or nightly/demo run folders holding one in eval/) are read here and compared by
`evaluation.comparison` (query by query, over the queries both define a metric for, paired t-test).
"""

from __future__ import annotations

import json
from typing import Any

from apache_beam.io.filesystems import FileSystems

from evaluation.comparison import ComparisonReport, MetricComparison, compare_query_rows
from evaluation.report import METRICS_FILE, PER_QUERY_FILE
from pipelines.evaluate.report import read_per_query
from schemas import ArtifactError


def evaluation_folder(path: str) -> str:
    """The evaluation output in `path`: the folder itself, or the eval/ of a run folder (nightly, demo)."""
    for folder in (path, FileSystems.join(path, "eval")):
        if FileSystems.exists(FileSystems.join(folder, PER_QUERY_FILE)):
            return folder
    raise ArtifactError(
        f"{path}: neither it nor {path}/eval holds {PER_QUERY_FILE}; give an evaluation output "
        "(`madr evaluate --output`) or a run folder with eval/ inside"
    )


def _read(folder: str) -> tuple[dict[str, dict[str, float]], list[str], dict[str, Any]]:
    """Per-query rows keyed by query id, the metric names in file order, and metrics.json."""
    rows, names = read_per_query(folder)
    metrics_path = FileSystems.join(folder, METRICS_FILE)
    document: dict[str, Any] = {}
    if FileSystems.exists(metrics_path):
        with FileSystems.open(metrics_path) as handle:
            document = json.loads(handle.read())
    return rows, names, document


def compare_runs(a: str, b: str) -> ComparisonReport:
    """Compare evaluation outputs (or run folders) `a` and `b` query by query, metric by metric."""
    folder_a, folder_b = evaluation_folder(a), evaluation_folder(b)
    rows_a, names_a, document_a = _read(folder_a)
    rows_b, names_b, document_b = _read(folder_b)
    notes = []
    rule_a, rule_b = document_a.get("relevance_rule"), document_b.get("relevance_rule")
    if rule_a != rule_b:
        notes.append(
            f"the runs judge relevance differently (A: {rule_a}, B: {rule_b}); their means differ in kind"
        )
    return compare_query_rows(folder_a, rows_a, names_a, folder_b, rows_b, names_b, notes)


__all__ = ["ComparisonReport", "MetricComparison", "compare_runs", "evaluation_folder"]
