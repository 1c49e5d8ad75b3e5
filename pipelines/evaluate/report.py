"""The driver side of the evaluation stage: which grades are relevant, and the report files.

The Beam pipeline (pipelines/evaluate/stage.py) leaves small per-query rows behind in temporary Parquet files;
this module reads them back, deletes them, and writes what a reader of the output folder looks at:
metrics.json (means, plus the recall the index loses against exact search and the recall@k curve),
per_query.parquet and recall_at_k.png, all through `local_output` so a gs:// output folder works too.
"""

from __future__ import annotations

import json
import logging
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq
from apache_beam.io.filesystems import FileSystems

from evaluation import MetricMean, RelevanceRule, aggregate, format_table, write_metrics
from evaluation.comparison import by_query
from evaluation.cutoffs import CutoffPlan
from evaluation.plot import PLOT_FILE, k_grid, recall_curve, write_recall_plot
from evaluation.report import METRICS_FILE, PER_QUERY_FILE
from evaluation.text_table import format_text_table
from pipelines.io.parquet_reading import read_parquet_table
from pipelines.storage.local_copies import local_output
from pipelines.storage.stage_manifests import list_files
from pipelines.storage.staged_output import is_local
from schemas.manifest import MANIFEST_FILE

if TYPE_CHECKING:  # the searchers' timings; importing them brings the encoder
    from pipelines.evaluate.calibration import Calibration

LOGGER = logging.getLogger(__name__)

DEFAULT_POSITIVE_MIN_GRADE = 2  # §8.1, madral-kdd22: grade <= 1 is negative
# One row per scored query: how many judged products are relevant, and the ranks of those retrieved.
RELEVANT_RANKS_SCHEMA = pa.schema(
    [
        pa.field("query_id", pa.string(), nullable=False),
        pa.field("num_relevant", pa.int64(), nullable=False),
        pa.field("ranks", pa.list_(pa.int64()), nullable=False),
    ]
)


def read_per_query(folder: str) -> tuple[dict[str, dict[str, float]], list[str]]:
    """An evaluation folder's per_query.parquet (local or gs://): rows by query id, metric names in file
    order."""
    with FileSystems.open(FileSystems.join(folder, PER_QUERY_FILE)) as handle:
        table = pq.read_table(handle)
    return by_query(table.to_pylist()), [name for name in table.column_names if name != "query_id"]


def dataset_positive_min_grade(judgments: str) -> int | None:
    """The lowest relevant grade the dataset declares in the manifest.json next to its judgments.

    The label scale belongs to the data: ESCI's Exact is grade 3 and WANDS' is 2, so a fixed "grade >= 2"
    would count ESCI Substitutes as relevant. Ingested datasets (product_data/ingest/writer.py) keep it at the
    top level, the synthetic benchmark under "relevance"; None when there is no manifest or it says nothing.
    """
    path = FileSystems.join(FileSystems.split(judgments)[0], MANIFEST_FILE)
    if not FileSystems.exists(path):
        return None
    with FileSystems.open(path) as handle:
        manifest = json.loads(handle.read())
    relevance = manifest.get("relevance")
    grade = manifest.get("positive_min_grade")
    if grade is None and isinstance(relevance, Mapping):
        grade = relevance.get("positive_min_grade")
    if grade is not None and (isinstance(grade, bool) or not isinstance(grade, int) or grade < 1):
        raise ValueError(f"{path}: positive_min_grade must be an int >= 1, got {grade!r}")
    return grade


def resolve_rule(judgments: str, flag: int | None) -> tuple[RelevanceRule, str]:
    """The relevance rule, and where its positive_min_grade came from: flag, dataset manifest or default."""
    if flag is not None:
        return RelevanceRule(positive_min_grade=flag), "--positive_min_grade"
    from_dataset = dataset_positive_min_grade(judgments)
    if from_dataset is not None:
        return RelevanceRule(positive_min_grade=from_dataset), f"the {MANIFEST_FILE} next to --judgments"
    return RelevanceRule(positive_min_grade=DEFAULT_POSITIVE_MIN_GRADE), "default"


def collect_rows(folder: str, prefix: str) -> list[dict[str, Any]]:
    """Read the temporary `prefix*.parquet` rows a pipeline left in `folder`, then delete those files."""
    rows = read_parquet_table(folder, prefix).to_pylist()
    FileSystems.delete(list_files(folder, f"{prefix}*"))
    return rows


@dataclass
class SearcherRows:
    """What one searcher's branch of the pipeline produced: metric rows and relevant ranks, per query."""

    per_query: list[dict[str, Any]]
    relevant_ranks: list[dict[str, Any]]
    summary: dict[str, MetricMean] = field(init=False)

    def __post_init__(self) -> None:
        self.summary = aggregate(self.per_query)


def _number(value: float) -> float | None:
    return None if math.isnan(value) else value


def ann_vs_exact(ann: Mapping[str, MetricMean], exact: Mapping[str, MetricMean]) -> dict[str, dict[str, Any]]:
    """Per recall@k: exact and ann means and the loss (exact − ann), the recall the index gives up."""
    table = {}
    for name, mean in ann.items():
        if not name.startswith("recall@") or name not in exact:
            continue
        loss = exact[name].mean - mean.mean
        table[name] = {
            "exact": _number(exact[name].mean),
            "ann": _number(mean.mean),
            "loss": _number(loss),
            "queries": mean.count,
        }
    return table


def format_ann_vs_exact(table: Mapping[str, Mapping[str, Any]]) -> str:
    """The recall the index loses, as an aligned text table (n/a where a mean is over no query)."""

    def cell(value: float | None, signed: bool = False) -> str:
        return "n/a" if value is None else (f"{value:+.4f}" if signed else f"{value:.4f}")

    header = ("metric", "exact", "ann", "loss")
    body = [
        (name, cell(row["exact"]), cell(row["ann"]), cell(row["loss"], signed=True))
        for name, row in table.items()
    ]
    return "Recall lost to the index (exact − ann):\n" + format_text_table(header, body)


def _extend_metrics_json(folder: str, fields: Mapping[str, Any]) -> None:
    """Add fields to the metrics.json `write_metrics` wrote, keeping its atomic-rename guarantee."""
    path = Path(folder) / METRICS_FILE
    document = json.loads(path.read_text())
    document.update(fields)
    temporary = path.with_name(METRICS_FILE + ".tmp")
    temporary.write_text(json.dumps(document, indent=2, allow_nan=False) + "\n")
    os.replace(temporary, path)


def add_to_metrics(output: str, fields: Mapping[str, Any]) -> None:
    """More fields in the metrics.json `write_report` wrote into `output` (local or gs://)."""
    if not is_local(output):
        path = FileSystems.join(output, METRICS_FILE)
        with FileSystems.open(path) as handle:
            document = json.loads(handle.read())
        document.update(fields)
        with FileSystems.create(path) as handle:
            handle.write((json.dumps(document, indent=2, allow_nan=False) + "\n").encode("utf-8"))
        return
    _extend_metrics_json(output, fields)


@dataclass(frozen=True)
class EvaluationReport:
    """What the driver reports: the primary searcher's means, the comparison, the curve, the table."""

    summary: dict[str, MetricMean]
    ann_vs_exact: dict[str, dict[str, Any]] | None
    recall_at_k: dict[str, Any]
    table: str


def write_report(
    output: str,
    branches: Mapping[str, SearcherRows],
    primary: str,
    depth: int,
    rule: RelevanceRule,
    rule_source: str,
    calibration: Calibration | None = None,
    cutoffs: CutoffPlan | None = None,
) -> EvaluationReport:
    """Write metrics.json, per_query.parquet and recall_at_k.png for the primary searcher's branch.

    ``branches`` maps a searcher ("ann", "exact") to its rows; with both, metrics.json gains
    "ann_vs_exact" and the table a second part. Every branch gets a line in the recall@k plot. A
    ``calibration`` (--searcher auto) goes into metrics.json as "searcher_choice" and heads the table.
    ``cutoffs`` goes into metrics.json as "cutoffs"; the metrics it dropped are named under the table.
    """
    main = branches[primary]
    comparison = (
        ann_vs_exact(branches["ann"].summary, branches["exact"].summary)
        if {"ann", "exact"} <= branches.keys()
        else None
    )
    ks = k_grid(depth)
    curves: dict[str, Sequence[float]] = {}
    queries = 0
    for name, rows in branches.items():
        curves[name], counted = recall_curve(rows.relevant_ranks, ks)
        queries = max(queries, counted)
    recall_at_k: dict[str, Any] = {
        "k": ks,
        **{name: [_number(value) for value in values] for name, values in curves.items()},
        "queries": queries,
        "plot": PLOT_FILE,
    }
    fields: dict[str, Any] = {"relevance_rule_source": rule_source, "recall_at_k": recall_at_k}
    if comparison is not None:
        fields["ann_vs_exact"] = comparison
    if calibration is not None:
        fields["searcher_choice"] = calibration.to_dict()
    if cutoffs is not None:
        fields["cutoffs"] = cutoffs.to_dict()
    with local_output(output) as folder:  # write_metrics and matplotlib write local files only
        write_metrics(folder, main.summary, main.per_query, rule)
        _extend_metrics_json(folder, fields)
        write_recall_plot(
            Path(folder) / PLOT_FILE,
            ks,
            curves,
            f"Recall@k over {queries} queries (grade ≥ {rule.positive_min_grade} is relevant)",
        )
    table = format_table(main.summary)
    if comparison:
        table += "\n\n" + format_ann_vs_exact(comparison)
    if calibration is not None:
        table = calibration.describe() + "\n\n" + table
    if cutoffs is not None and cutoffs.warning():
        table += f"\n\n{cutoffs.warning()}"
    return EvaluationReport(main.summary, comparison, recall_at_k, table)


__all__ = [
    "RELEVANT_RANKS_SCHEMA",
    "EvaluationReport",
    "SearcherRows",
    "add_to_metrics",
    "ann_vs_exact",
    "collect_rows",
    "dataset_positive_min_grade",
    "format_ann_vs_exact",
    "resolve_rule",
    "write_report",
]
