"""A runner madr has not verified runs a small probe pipeline before any stage, and is refused when the
probe's counts come out wrong.

The probe holds what Beam's own DaskRunner lost without an error: a ParDo's tagged outputs (each must
reach only its own consumer), output emitted in `finish_bundle`, the final partial batch of
`BatchElements`, a file sink, and counters. Seven numbers go in; each branch's count is known.

Verified, and not probed: the local runner and `--runner dask` (this project's tests, transform by
transform), and Beam's portable runners (`PortableRunner`, and Dataflow, Flink and Spark, which run
Python DoFns through the same portability API madr's tests drive; a probe on them would be a cloud job).
"""

from __future__ import annotations

import logging
import tempfile
import uuid
from collections.abc import Iterator

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics import Metrics
from apache_beam.options.pipeline_options import GoogleCloudOptions, PipelineOptions, StandardOptions
from apache_beam.runners.runner import PipelineRunner
from apache_beam.transforms.window import GlobalWindow
from apache_beam.utils.windowed_value import WindowedValue

from pipelines.storage.stage_manifests import counter_value

LOGGER = logging.getLogger(__name__)
# As `pipelines.runner.runner_key` spells them (lower case, no "Runner" suffix).
VERIFIED_RUNNERS = frozenset({"dask", "dataflow", "portable", "flink", "spark", "prism"})
PROBE_VALUES = 7
# What each branch must count: 4 evens through a batch of 3 and a last one of 1, 3 odds counted in
# finish_bundle, all 7 written by the sink and counted by a counter.
EXPECTED = {
    "evens unbatched": 4,
    "odds counted in finish_bundle": 3,
    "rows written by the sink": 7,
    "counter": 7,
}


class RunnerRefused(ValueError):
    """A runner madr will not run a stage on: it is known, or was just shown, to lose records."""


class _EvensAndOdds(beam.DoFn):
    def process(self, number: int) -> Iterator[object]:
        Metrics.counter("madr_probe", "probe_values").inc()
        yield number if number % 2 == 0 else beam.pvalue.TaggedOutput("odd", number)


class _CountInFinish(beam.DoFn):
    def start_bundle(self) -> None:
        self.count = 0

    def process(self, number: int) -> Iterator[int]:
        self.count += 1
        return iter(())

    def finish_bundle(self) -> Iterator[WindowedValue]:
        yield WindowedValue(self.count, GlobalWindow().max_timestamp(), [GlobalWindow()])


def _probe_folder(options: PipelineOptions) -> str:
    """Where the probe's sink writes: the job's --temp_location (which every worker reaches), else a
    local temporary folder (a runner on this machine)."""
    temp = options.view_as(GoogleCloudOptions).temp_location
    return FileSystems.join(temp or tempfile.gettempdir(), f"madr-runner-probe-{uuid.uuid4().hex}")


def probe_counts(runner: PipelineRunner | str, options: PipelineOptions) -> dict[str, int | None]:
    """Run the probe on `runner` and count each branch (None: the runner reports no counters)."""
    folder = _probe_folder(options)
    pipeline = beam.Pipeline(runner=runner, options=options)
    split = (
        pipeline
        | beam.Create(range(PROBE_VALUES))
        | beam.ParDo(_EvensAndOdds()).with_outputs("odd", main="even")
    )
    evens = (
        split.even
        | beam.BatchElements(min_batch_size=3, max_batch_size=3)
        | "Unbatch" >> beam.FlatMap(lambda batch: batch)
    )
    odds = split.odd | beam.ParDo(_CountInFinish())
    _ = (
        evens
        | "EvenCount" >> beam.combiners.Count.Globally()
        | "WriteEvens" >> beam.io.WriteToText(FileSystems.join(folder, "evens"))
    )
    _ = (
        odds
        | "OddCount" >> beam.CombineGlobally(sum)
        | "WriteOdds" >> beam.io.WriteToText(FileSystems.join(folder, "odds"))
    )
    _ = (
        (split.even, split.odd)
        | beam.Flatten()
        | "WriteAll" >> beam.io.WriteToText(FileSystems.join(folder, "all"))
    )
    result = pipeline.run()
    result.wait_until_finish()
    try:
        counter: int | None = counter_value(result, "probe_values")  # as every stage reads its counters
    except NotImplementedError:
        counter = None
    try:
        return {
            "evens unbatched": _sum_of_lines(folder, "evens"),
            "odds counted in finish_bundle": _sum_of_lines(folder, "odds"),
            "rows written by the sink": _count_lines(folder, "all"),
            "counter": counter,
        }
    finally:
        FileSystems.delete([folder])


def _lines(folder: str, prefix: str) -> list[str]:
    matched = FileSystems.match([FileSystems.join(folder, f"{prefix}*")])[0].metadata_list
    lines: list[str] = []
    for metadata in matched:
        with FileSystems.open(metadata.path) as handle:
            lines.extend(line for line in handle.read().decode().splitlines() if line.strip())
    return lines


def _sum_of_lines(folder: str, prefix: str) -> int:
    return sum(int(line) for line in _lines(folder, prefix))


def _count_lines(folder: str, prefix: str) -> int:
    return len(_lines(folder, prefix))


def refuse_if_lossy(runner: PipelineRunner | str, options: PipelineOptions) -> None:
    """Probe an unverified runner; `RunnerRefused` naming each wrong count when it loses records."""
    name = options.view_as(StandardOptions).runner
    counts = probe_counts(runner, options)
    wrong = [
        f"{what} {counts[what]} (expected {expected})"
        for what, expected in EXPECTED.items()
        if counts[what] != expected
    ]
    if wrong:
        raise RunnerRefused(
            f"--runner {name} lost or repeated records in madr's probe pipeline ({'; '.join(wrong)}): a "
            "stage run on it could publish incomplete output, so none is run. Use the local runner, --runner "
            "dask or a Beam portable runner (docs/SCALING.md)"
        )
    LOGGER.info("--runner %s passed madr's probe: %s", name, counts)


__all__ = ["EXPECTED", "VERIFIED_RUNNERS", "RunnerRefused", "probe_counts", "refuse_if_lossy"]
