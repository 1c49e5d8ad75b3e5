"""`madr evaluate`: retrieval quality of a model and its index on judged queries."""

from __future__ import annotations

import argparse

from apache_beam.options.pipeline_options import PipelineOptions

from jobs.command_table import command
from pipelines.depth import DepthOptions
from pipelines.evaluate.stage import run_evaluate
from pipelines.options import (
    EvaluateOptions,
    ModelOptions,
    OutputOptions,
    OverwriteOptions,
    ThresholdOptions,
    VerifyOptions,
    add_stage_arguments,
)


def _evaluate_arguments(parser: argparse.ArgumentParser) -> None:
    add_stage_arguments(
        parser,
        ModelOptions,
        OutputOptions,
        EvaluateOptions,
        DepthOptions,
        ThresholdOptions,
        VerifyOptions,
        OverwriteOptions,
    )
    parser.add_argument(
        "--products",
        help="Catalog Parquet file or glob: also report the model's aspect Accuracy@1/@3 on held-out "
        "products, query Accuracy@1, and the coverage and accuracy of predictions at --min_confidence",
    )


@command("evaluate", _evaluate_arguments)
def _evaluate(args: argparse.Namespace, beam_args: list[str], stage_argv: list[str]) -> None:
    """Embed queries, search the index, join judgments, write metrics.json and the run file."""
    print(run_evaluate(PipelineOptions(stage_argv))["table"])
