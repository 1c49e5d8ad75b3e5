"""`madr compare` and `report`: evaluations and nightly runs read back, one beside another."""

from __future__ import annotations

from dataclasses import dataclass

from apache_beam.options.pipeline_options import PipelineOptions

from jobs.command_table import command
from jobs.compare import compare_runs
from pipelines.report.page import DEFAULT_NIGHTS, write_report
from pipelines.settings.stage_config import setting


@dataclass(frozen=True)
class CompareConfig:
    run_a: str = setting("", "Evaluation output or run folder (the baseline)", positional=True)
    run_b: str = setting("", "Evaluation output or run folder (the candidate)", positional=True)


@command("compare", CompareConfig)
def _compare(config: CompareConfig, beam_options: PipelineOptions) -> None:
    """Align two evaluation outputs (or run folders with eval/ inside) by query id; print per metric
    mean A, mean B, delta (B − A), the paired t-test p-value and the queries compared."""
    print(compare_runs(config.run_a, config.run_b).format())


@dataclass(frozen=True)
class ReportConfig:
    root: str = setting("", "A nightly root: the --output of `madr nightly`", required=True)
    run_id: str | None = setting(None, "The run reported on (the last run)", flag="run")
    output: str | None = setting(None, "HTML file to write (ROOT/RUN_ID/report.html)")
    nights: int = setting(DEFAULT_NIGHTS, "Runs the trends show")


@command("report", ReportConfig, show_defaults=True)
def _report(config: ReportConfig, beam_options: PipelineOptions) -> None:
    """One self-contained HTML page (inline CSS, embedded plots, no network) for a run of a nightly root:
    the verdict (published, or why not), the catalog and its dead letters, retrieval beside last night
    and the backbone used zero-shot with paired p-values, trends over the last nights, annotations,
    the index's schedule, the cost per stage and the queries that fell most."""
    print(write_report(config.root, config.run_id, config.output, config.nights))
