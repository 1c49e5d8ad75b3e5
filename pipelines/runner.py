"""Which Beam runner a pipeline runs on.

Locally we run Beam's batch engine, the FnApiRunner, directly. Beam 2.77's plain
DirectRunner first tries to download the Prism runner binary, which fails
offline and costs time; the FnApiRunner is what it falls back to anyway for batch
pipelines, and it honours --direct_running_mode (in_memory, multi_threading,
multi_processing) and --direct_num_workers. Any other --runner (DataflowRunner,
FlinkRunner, ...) is passed to Beam untouched.
"""

from __future__ import annotations

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions
from apache_beam.runners.portability.fn_api_runner import FnApiRunner
from apache_beam.runners.runner import PipelineRunner

LOCAL_RUNNER_NAMES = frozenset({None, "", "local", "DirectRunner", "FnApiRunner"})


def resolve_runner(options: PipelineOptions) -> PipelineRunner | str:
    name = options.view_as(StandardOptions).runner
    if name in LOCAL_RUNNER_NAMES:
        return FnApiRunner()
    return name


def runs_locally(options: PipelineOptions) -> bool:
    """Whether these options run a pipeline on the local runner, in this process's machine."""
    return options.view_as(StandardOptions).runner in LOCAL_RUNNER_NAMES


def make_pipeline(options: PipelineOptions) -> beam.Pipeline:
    return beam.Pipeline(runner=resolve_runner(options), options=options)


def require_options(options: PipelineOptions, *names: str) -> None:
    """Beam parses every options class at once, so required flags are checked here, per stage."""
    missing = [f"--{name}" for name in names if not getattr(options, name, None)]
    if missing:
        raise ValueError(f"missing required flag(s): {', '.join(missing)} (see --help)")
