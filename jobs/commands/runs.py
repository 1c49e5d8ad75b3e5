"""`madr experiment`, `nightly` and `demo`: the jobs that run several stages in a row."""

from __future__ import annotations

from apache_beam.options.pipeline_options import PipelineOptions

from jobs.command_table import command
from jobs.demo import DemoConfig, run_demo
from jobs.experiment import run_experiment
from jobs.experiment_config import ExperimentRun
from pipelines.nightly.job import NightlyJob, passed_on_flags
from pipelines.nightly.run import run_nightly


@command("experiment", ExperimentRun, then=ExperimentRun.under_profile, show_defaults=True)
def _experiment(config: ExperimentRun, beam_options: PipelineOptions) -> None:
    """Train, embed, index, evaluate each variant on the synthetic benchmark; write a table."""
    run_experiment(config.experiment, config.output)


def _nightly_flags_note() -> str:
    """Where the stage flags go, and every one `madr nightly` accepts besides its own."""
    listed = "; ".join(f"{stage}: {' '.join(flags)}" for stage, flags in passed_on_flags().items())
    return (
        "A flag of a stage given here applies to every stage that reads it; --embed_flags, --index_flags and "
        "--evaluate_flags give one stage its own, read by that stage's parser (`madr embed --help`, ...), "
        "where another stage's flag is an error. Any other flag is passed to Beam as a pipeline option "
        "(e.g. --runner DataflowRunner); a flag neither a stage nor Beam knows is an error. The stages' "
        f"flags (each stage parses its own, pipelines/nightly/job.py): {listed}."
    )


@command("nightly", NightlyJob, epilog=_nightly_flags_note())
def _nightly(config: NightlyJob, beam_options: PipelineOptions) -> None:
    """Embed tonight's catalog (reusing unchanged products of the LATEST run), build the index,
    evaluate it, and move OUT/LATEST only when every stage has succeeded."""
    report = run_nightly(config)
    print(f"run {report.run_id} published (previous {report.previous_run_id}); stages {report.stages}")
    if report.quality:
        print(report.quality)
    print("\n".join(report.cost_lines()))


@command("demo", DemoConfig, show_defaults=True)
def _demo(config: DemoConfig, beam_options: PipelineOptions) -> None:
    """generate -> pre-train and fine-tune MtBERT -> embed and annotate -> enrich -> build-index ->
    evaluate (retrieval and annotations), into one run folder."""
    run_demo(config)
