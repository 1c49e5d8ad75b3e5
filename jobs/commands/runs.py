"""`madr experiment`, `nightly` and `demo`: the jobs that run several stages in a row."""

from __future__ import annotations

import argparse

from jobs.command_table import command
from jobs.demo import add_demo_arguments, run_demo
from jobs.experiment import add_experiment_arguments, config_from_args, run_experiment
from jobs.nightly import run_nightly
from jobs.nightly_args import add_nightly_arguments, job_from_args
from pipelines.options import (
    VerifyOptions,
    add_stage_arguments,
)
from pipelines.train.presets import explicit_flags


@command("experiment", add_experiment_arguments, show_defaults=True)
def _experiment(args: argparse.Namespace, beam_args: list[str], stage_argv: list[str]) -> None:
    """Train, embed, index, evaluate each variant on the synthetic benchmark; write a table."""
    run_experiment(config_from_args(args, explicit_flags(add_experiment_arguments, stage_argv)), args.out)


def _nightly_arguments(parser: argparse.ArgumentParser) -> None:
    add_nightly_arguments(parser)
    add_stage_arguments(parser, VerifyOptions)


# Every stage of the nightly reads its settings from the job's Beam arguments (jobs/nightly_job.py).
NIGHTLY_FLAGS_NOTE = (
    "A flag of a stage (embed, build-index, evaluate: --precision, --batch_size, --zero_shot, ...) given "
    "here applies to every stage that reads it; --embed_flags, --index_flags and --evaluate_flags give one "
    "stage its own. Any other flag is passed to Beam as a pipeline option (e.g. --runner DataflowRunner); "
    "a flag neither a stage nor Beam knows is an error."
)


@command("nightly", _nightly_arguments, epilog=NIGHTLY_FLAGS_NOTE)
def _nightly(args: argparse.Namespace, beam_args: list[str], stage_argv: list[str]) -> None:
    """Embed tonight's catalog (reusing unchanged products of the LATEST run), build the index,
    evaluate it, and move OUT/LATEST only when every stage has succeeded."""
    # --no_verify reaches each stage the way the Beam flags do.
    report = run_nightly(job_from_args(args, [*beam_args, *(["--no_verify"] if args.no_verify else [])]))
    print(f"run {report.run_id} published (previous {report.previous_run_id}); stages {report.stages}")
    if report.quality:
        print(report.quality)
    print("\n".join(report.cost_lines()))


@command("demo", add_demo_arguments, show_defaults=True)
def _demo(args: argparse.Namespace, beam_args: list[str], stage_argv: list[str]) -> None:
    """generate -> pre-train and fine-tune MtBERT -> embed and annotate -> enrich -> build-index ->
    evaluate (retrieval and annotations), into one run folder."""
    run_demo(args)
