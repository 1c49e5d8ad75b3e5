"""`madr evaluate`: retrieval quality of a model and its index on judged queries."""

from __future__ import annotations

from apache_beam.options.pipeline_options import PipelineOptions

from jobs.command_table import command
from pipelines.evaluate.config import EvaluateConfig
from pipelines.evaluate.stage import evaluate_retrieval


@command("evaluate", EvaluateConfig)
def _evaluate(config: EvaluateConfig, beam_options: PipelineOptions) -> None:
    """Embed queries, search the index, join judgments, write metrics.json and the run file."""
    print(evaluate_retrieval(config, beam_options)["table"])
