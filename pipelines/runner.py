"""Which Beam runner a pipeline runs on.

Locally we run Beam's batch engine, the FnApiRunner, directly. Beam 2.77's plain
DirectRunner first tries to download the Prism runner binary, which fails
offline and costs time; the FnApiRunner is what it falls back to anyway for batch
pipelines, and it honours --direct_running_mode (in_memory, multi_threading,
multi_processing) and --direct_num_workers. Any other --runner (DataflowRunner,
FlinkRunner, ...) is passed to Beam untouched, but for `dask` (madr's runner on dask.distributed,
`pipelines.cluster.dask_runner`) and Beam's own DaskRunner, which is refused: it loses records.
"""

from __future__ import annotations

import importlib.util

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions
from apache_beam.runners.portability.fn_api_runner import FnApiRunner
from apache_beam.runners.runner import PipelineRunner

from pipelines.cluster.options import DaskClusterOptions  # noqa: F401  (registers --dask_* with Beam)
from pipelines.cluster.probe import VERIFIED_RUNNERS, RunnerRefused, refuse_if_lossy

LOCAL_RUNNER_NAMES = frozenset({None, "", "local", "DirectRunner", "FnApiRunner"})


def runner_key(name: str | None) -> str:
    """A runner name as Beam looks it up: case aside, a class path's last part, a "Runner" suffix
    dropped ("DaskRunner", "daskrunner" and "apache_beam.runners.dask.dask_runner.DaskRunner" are one)."""
    return (name or "").rsplit(".", 1)[-1].lower().removesuffix("runner")


def _is_madr_dask(name: str | None) -> bool:
    return (name or "").lower() == "dask"  # `--runner dask`: madr's; any other spelling is Beam's own


def refuse_unusable_runner(options: PipelineOptions) -> None:
    """Refuse, before anything runs, a runner known to lose records, or `dask` without dask installed (the
    CLI checks it first of all)."""
    name = options.view_as(StandardOptions).runner
    if _is_madr_dask(name) and importlib.util.find_spec("distributed") is None:
        raise RunnerRefused(
            "--runner dask needs dask.distributed, which is not installed: pip install 'madr[dask]'"
        )
    if runner_key(name) == "dask" and not _is_madr_dask(name):
        raise RunnerRefused(
            f"--runner {name} is Beam's own DaskRunner, which loses records without an error (a ParDo's "
            "outputs all reach every consumer, finish_bundle's output and so the last batch and every "
            "sink's rows are dropped, only one branch runs): use --runner dask, madr's runner on "
            "dask.distributed (docs/SCALING.md)"
        )


def resolve_runner(options: PipelineOptions) -> PipelineRunner | str:
    name = options.view_as(StandardOptions).runner
    refuse_unusable_runner(options)
    if name in LOCAL_RUNNER_NAMES:
        return FnApiRunner()
    if _is_madr_dask(name):
        from pipelines.cluster.dask_runner import DaskRunner

        return DaskRunner()
    return name


def runs_locally(options: PipelineOptions) -> bool:
    """Whether these options run a pipeline on the local runner, in this process's machine."""
    return options.view_as(StandardOptions).runner in LOCAL_RUNNER_NAMES


def make_pipeline(options: PipelineOptions) -> beam.Pipeline:
    """The pipeline of a stage; on a runner madr has not verified, only once its probe passed
    (`pipelines.cluster.probe`)."""
    runner = resolve_runner(options)
    if (
        not runs_locally(options)
        and runner_key(options.view_as(StandardOptions).runner) not in VERIFIED_RUNNERS
    ):
        refuse_if_lossy(runner, options)
    return beam.Pipeline(runner=runner, options=options)
