"""`--runner dask`: every Beam stage of madr on a dask.distributed cluster, with nothing lost.

    madr nightly ... --runner dask --dask_address tcp://scheduler:8786     # an existing cluster
    madr nightly ... --runner dask --dask_workers 4                        # a local cluster of 4 processes

Beam's own DaskRunner (`apache_beam.runners.dask`) loses records without an error (the table in
docs/SCALING.md), so madr refuses it by name (`pipelines.runner`) and runs this one instead: Beam's
overrides of Create, Read, GroupByKey, Flatten and Reshuffle, then madr's translation of each primitive
to a dask Bag (`pipelines.cluster.bags`), every branch computed, counters gathered from every bundle
(`CollectedMetrics`), and the remaining work cancelled when a task fails. Needs the `dask` extra
(`pip install madr[dask]`); the default runner stays the local one.
"""

from __future__ import annotations

import contextlib
import logging
from collections import defaultdict
from collections.abc import Iterator, Sequence
from typing import Any

from apache_beam.metrics.execution import MetricKey, MetricResult, MetricUpdates
from apache_beam.metrics.metric import MetricResults
from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions
from apache_beam.runners.runner import PipelineResult, PipelineRunner, PipelineState

from pipelines.cluster.options import DaskClusterOptions

LOGGER = logging.getLogger(__name__)
RUNNER_NAME = "dask"
INSTALL_HINT = "the Dask runner needs dask.distributed: pip install 'madr[dask]'"


class CollectedMetrics(MetricResults):
    """The counters, distributions and gauges every bundle reported, merged; all committed (a bundle's
    updates are returned only when it succeeded)."""

    def __init__(self, updates: list[MetricUpdates]) -> None:
        self._counters: dict[MetricKey, int] = defaultdict(int)
        self._distributions: dict[MetricKey, Any] = {}
        self._gauges: dict[MetricKey, Any] = {}
        for update in updates:
            for key, value in update.counters.items():
                self._counters[key] += value
            for merged, found in ((self._distributions, update.distributions), (self._gauges, update.gauges)):
                for key, value in found.items():
                    merged[key] = merged[key].combine(value) if key in merged else value

    def query(self, filter: Any = None) -> dict[str, list[MetricResult]]:
        def results(values: dict[MetricKey, Any]) -> list[MetricResult]:
            return [
                MetricResult(key, value, value) for key, value in values.items() if self.matches(filter, key)
            ]

        return {
            self.COUNTERS: results(self._counters),
            self.DISTRIBUTIONS: results(self._distributions),
            self.GAUGES: results(self._gauges),
            self.STRINGSETS: [],
            self.BOUNDED_TRIES: [],
        }


class DaskPipelineResult(PipelineResult):
    """A job on the cluster: `wait_until_finish` raises the first task's error after cancelling the rest."""

    def __init__(
        self, client: Any, cluster: Any, futures: list[Any], metric_outputs: int, tokens: list[str]
    ) -> None:
        super().__init__(PipelineState.RUNNING)
        self._client, self._cluster, self._futures = client, cluster, futures
        self._metric_outputs, self._tokens = metric_outputs, tokens
        self._metrics = CollectedMetrics([])

    def wait_until_finish(self, duration: int | None = None) -> str:
        from distributed import as_completed

        from pipelines.cluster.bags import concatenated

        if self._state != PipelineState.RUNNING:
            return self._state
        results: dict[int, Any] = {}
        position = {future.key: i for i, future in enumerate(self._futures)}
        try:
            timeout = None if duration is None else duration / 1000
            for future, result in as_completed(self._futures, timeout=timeout, with_results=True):
                results[position[future.key]] = result
        except TimeoutError:
            return self._state  # still running: Beam's contract for a wait with a duration
        except BaseException:
            self._state = PipelineState.FAILED
            try:
                self._client.cancel(self._futures)
            finally:
                self._close()
            raise
        first_metrics = len(self._futures) - self._metric_outputs
        batches = [results[i] for i in range(first_metrics, len(self._futures))]
        self._metrics = CollectedMetrics(concatenated(batches))
        self._state = PipelineState.DONE
        self._close()
        return self._state

    def cancel(self) -> str:
        self._client.cancel(self._futures)
        self._state = PipelineState.CANCELLED
        self._close()
        return self._state

    def metrics(self) -> CollectedMetrics:
        return self._metrics

    def _close(self) -> None:
        from pipelines.cluster.bags import drop_dofns

        # The job's DoFns (and the models they loaded) leave the workers: a long-lived cluster keeps none.
        with contextlib.suppress(Exception):
            self._client.run(drop_dofns, self._tokens)
        self._client.close()
        if self._cluster is not None:  # started for this job
            self._cluster.close()


def connect(options: DaskClusterOptions) -> tuple[Any, Any]:
    """A client of the scheduler at --dask_address, or of a local cluster started here (returned too,
    to be stopped after the job)."""
    try:
        from distributed import Client
    except ImportError as error:
        raise ImportError(INSTALL_HINT) from error
    if options.dask_address:
        return Client(options.dask_address), None
    cluster = _local_cluster(options.dask_workers)
    return Client(cluster), cluster


def _local_cluster(workers: int) -> Any:
    """A local cluster of `workers` processes, one thread each."""
    if workers < 1:
        raise ValueError(f"--dask_workers must be at least 1, got {workers}")
    try:
        from distributed import LocalCluster
    except ImportError as error:
        raise ImportError(INSTALL_HINT) from error
    # One thread per process: madr's DoFns are CPU-bound (torch, ScaNN) and hold the GIL between calls.
    return LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None)


@contextlib.contextmanager
def one_cluster_for_every_pipeline(beam_args: Sequence[str]) -> Iterator[tuple[str, ...]]:
    """The Beam flags for a job of several pipelines (the nightly's stages). With `--runner dask` and no
    `--dask_address`, one local cluster of `--dask_workers` processes runs them all: started here, its
    scheduler's address added to the flags, stopped when the job ends. A cluster per pipeline started
    its worker processes, each importing Beam, torch and transformers again, once per stage. Any other
    flags come back as given."""
    options = PipelineOptions(list(beam_args))
    cluster_options = options.view_as(DaskClusterOptions)
    if options.view_as(StandardOptions).runner != RUNNER_NAME or cluster_options.dask_address:
        yield tuple(beam_args)
        return
    cluster = _local_cluster(cluster_options.dask_workers)
    LOGGER.info(
        "--runner dask: one local cluster of %d processes for every stage", cluster_options.dask_workers
    )
    try:
        yield (*beam_args, "--dask_address", cluster.scheduler_address)
    finally:
        cluster.close()


class DaskRunner(PipelineRunner):
    """Runs a Beam pipeline on dask.distributed (see the module docstring)."""

    def run_pipeline(self, pipeline: Any, options: PipelineOptions) -> DaskPipelineResult:
        try:
            from apache_beam.runners.dask.overrides import dask_overrides

            from pipelines.cluster.bags import BagGraph
        except ImportError as error:
            raise ImportError(INSTALL_HINT) from error
        pipeline.replace_all(dask_overrides())
        client, cluster = connect(options.view_as(DaskClusterOptions))
        try:
            graph = BagGraph(sum(client.nthreads().values()))
            pipeline.visit(graph)
            targets = graph.targets()
            LOGGER.info("running on %s: %d PCollections, %d outputs", client, len(graph.bags), len(targets))
            # Unoptimised: fusing rewrites task keys per output, and a task two outputs share (a sink's
            # finalize) would then run twice.
            futures = client.compute(targets, optimize_graph=False)
        except BaseException:
            client.close()
            if cluster is not None:
                cluster.close()
            raise
        return DaskPipelineResult(client, cluster, futures, len(graph.metrics), graph.tokens)


__all__ = [
    "RUNNER_NAME",
    "CollectedMetrics",
    "DaskPipelineResult",
    "DaskRunner",
    "one_cluster_for_every_pipeline",
]
