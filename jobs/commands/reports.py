"""`madr compare` and `report`: evaluations and nightly runs read back, one beside another."""

from __future__ import annotations

import argparse

from jobs.command_table import command
from jobs.compare import compare_runs
from pipelines.report.page import DEFAULT_NIGHTS, write_report


def _compare_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_a", metavar="RUN_A", help="Evaluation output or run folder (the baseline)")
    parser.add_argument("run_b", metavar="RUN_B", help="Evaluation output or run folder (the candidate)")


@command("compare", _compare_arguments)
def _compare(args: argparse.Namespace, beam_args: list[str], stage_argv: list[str]) -> None:
    """Align two evaluation outputs (or run folders with eval/ inside) by query id; print per metric
    mean A, mean B, delta (B − A), the paired t-test p-value and the queries compared."""
    print(compare_runs(args.run_a, args.run_b).format())


def _report_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--root", required=True, help="A nightly root: the --output of `madr nightly`")
    parser.add_argument("--run", dest="run_id", metavar="RUN_ID", help="The run reported on (the last run)")
    parser.add_argument("--output", default=None, help="HTML file to write (ROOT/RUN_ID/report.html)")
    parser.add_argument("--nights", type=int, default=DEFAULT_NIGHTS, help="Runs the trends show")


@command("report", _report_arguments, show_defaults=True)
def _report(args: argparse.Namespace, beam_args: list[str], stage_argv: list[str]) -> None:
    """One self-contained HTML page (inline CSS, embedded plots, no network) for a run of a nightly root:
    the verdict (published, or why not), the catalog and its dead letters, retrieval beside last night
    and the backbone used zero-shot with paired p-values, trends over the last nights, annotations,
    the index's schedule, the cost per stage and the queries that fell most."""
    print(write_report(args.root, args.run_id, args.output, args.nights))
