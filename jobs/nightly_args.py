"""`madr nightly`'s command line: its flags, and the `NightlyJob` they describe (`pipelines.nightly.run`
runs it)."""

from __future__ import annotations

import argparse
import datetime as dt
import shlex
from collections.abc import Sequence

from pipelines.nightly.job import NightlyJob
from pipelines.nightly.publish_guard import DEFAULT_MAX_SHRINK
from pipelines.nightly.quality_guard import GUARD_MODES, GUARDED_METRICS, MARGIN, MAX_PVALUE
from pipelines.options import DEFAULT_PREDICTION_THRESHOLD, IndexSettings
from pipelines.stage_config import InputChecks, add_config_arguments, add_output_argument, config_from_values


def add_nightly_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        # --catalog is the name of earlier releases; --products is every stage's.
        "--products",
        "--catalog",
        dest="catalog",
        metavar="PRODUCTS",
        required=True,
        help="Tonight's product Parquet file, folder or glob (local or gs://)",
    )
    parser.add_argument("--model", required=True, help="Trained model directory")
    add_output_argument(
        parser, required=True, help="Root of the nightly runs; holds <run id>/ folders and LATEST"
    )
    parser.add_argument(
        "--run_id",
        default=None,
        help="Run folder name: letters, digits, '.', '_', '-' (default: today's UTC date, YYYY-MM-DD)",
    )
    parser.add_argument(
        "--restart_run",
        action="store_true",
        help="Discard what the run folder of --run_id holds when it was never published (a run started on "
        "another catalog, say an empty --products, or one that failed or was refused) and run tonight's "
        "catalog there; a run LATEST ever pointed to is never discarded",
    )
    parser.add_argument("--queries", default=None, help="Query Parquet file, to evaluate the new index")
    parser.add_argument("--judgments", default=None, help="Judgment Parquet file, to evaluate the new index")
    # The index stage's settings are the job's own (the nightly's index is what it publishes); --no_verify
    # is every stage's.
    add_config_arguments(parser, IndexSettings)
    add_config_arguments(parser, InputChecks)
    parser.add_argument(
        "--max_shrink",
        type=float,
        default=DEFAULT_MAX_SHRINK,
        help="Largest fraction of the previous published run's products that may be gone tonight; a "
        "larger shrink is not published without --allow_shrink (%(default)s)",
    )
    parser.add_argument(
        "--allow_shrink",
        action="store_true",
        help="Publish even when the catalog shrank by more than --max_shrink (an empty one never is)",
    )
    for stage, example in (
        ("embed", "--precision int8 --direct_num_workers 2"),
        ("index", "--runner DataflowRunner --num_workers 8"),
        ("evaluate", "--worker_machine_type n1-highmem-16"),
    ):
        parser.add_argument(
            f"--{stage}_flags",
            type=shlex.split,
            default=(),
            metavar="'FLAGS'",
            help=f"Beam and stage flags for the {stage} stage only, in one quoted string after the job's own "
            f"(which they override), e.g. '{example}'",
        )
    parser.add_argument(
        "--quality_guard",
        choices=GUARD_MODES,
        default="warn",
        help="Compare tonight's retrieval with last night's evaluation and with the backbone used zero-shot "
        "(evaluated every night, embedding only the products changed since last night's zero-shot run; "
        "--evaluate_flags '--zero_shot false' skips it) by paired t-test on the judged queries; below on "
        f"{' or '.join(GUARDED_METRICS)} by more than {MARGIN:g} at p < {MAX_PVALUE:g}: warn prints it and "
        "publishes, refuse does not publish, off skips the check (default: %(default)s)",
    )
    parser.add_argument(
        "--report",
        choices=("true", "false"),
        default="true",
        help="Write the morning report (report.html: verdict, catalog, retrieval against last night and "
        "zero-shot, trends, annotations, index, cost, worst queries) into the run folder at the end, also "
        "when the run stops (default: %(default)s); `madr report` writes it for any run",
    )
    parser.add_argument(
        "--enrich",
        action="store_true",
        help="Also write the catalog with its aspect gaps filled (enriched/, as `madr enrich`; predictions "
        f"at or above --min_confidence, {DEFAULT_PREDICTION_THRESHOLD})",
    )
    parser.add_argument(
        "--export_vertex",
        action="store_true",
        help="Also write Vertex AI Vector Search files (vertex/, as `madr export-vertex`; --restricts, "
        "--vertex_aspects and --vertex_num_files apply)",
    )
    parser.add_argument(
        "--export_serving",
        action="store_true",
        help="Also write the serving bundle of tonight's index (serving/, as `madr export-serving`), which "
        "`madr serve --bundle` loads and /reload swaps in",
    )


def job_from_args(args: argparse.Namespace, beam_args: Sequence[str]) -> NightlyJob:
    return NightlyJob(
        catalog=args.catalog,
        model=args.model,
        out=args.out,
        run_id=dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d") if args.run_id is None else args.run_id,
        queries=args.queries,
        judgments=args.judgments,
        index=config_from_values(IndexSettings, args),
        verify=args.verify,
        beam_args=tuple(beam_args),
        embed_flags=tuple(args.embed_flags),
        index_flags=tuple(args.index_flags),
        evaluate_flags=tuple(args.evaluate_flags),
        max_shrink=args.max_shrink,
        allow_shrink=args.allow_shrink,
        enrich=args.enrich,
        export_vertex=args.export_vertex,
        export_serving=args.export_serving,
        restart_run=args.restart_run,
        quality_guard=args.quality_guard,
        report=args.report == "true",
    )


__all__ = ["add_nightly_arguments", "job_from_args"]
