"""`madr evaluate`: retrieval quality of a model and its index on judged queries."""

from __future__ import annotations

import argparse

from apache_beam.options.pipeline_options import PipelineOptions

from jobs.command_table import Flags, command
from pipelines.depth import DepthOptions
from pipelines.evaluate.stage import EvaluateConfig, evaluate_retrieval
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


@command("evaluate", Flags(_evaluate_arguments, lambda line: EvaluateConfig.from_options(line.args)))
def _evaluate(config: EvaluateConfig, beam_options: PipelineOptions) -> None:
    """Embed queries, search the index, join judgments, write metrics.json and the run file."""
    print(evaluate_retrieval(config, beam_options)["table"])
