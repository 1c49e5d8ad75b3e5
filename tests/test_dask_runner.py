"""`--runner dask` transform by transform against the local runner, on a 2-process dask.distributed cluster.

Each case is a pipeline Beam's own DaskRunner (2.77) got wrong without an error (issue 50's table):
multiple outputs, finish_bundle output, the last partial batch, sinks, two branches, ReadFromParquet,
metrics, failures. Each runs on both runners and must give the same elements.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from pathlib import Path

import apache_beam as beam
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from apache_beam.metrics import Metrics
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.transforms.window import GlobalWindow
from apache_beam.utils.windowed_value import WindowedValue

from pipelines.runner import make_pipeline

distributed = pytest.importorskip("distributed", reason="the Dask runner needs the dask extra")


@pytest.fixture(scope="module")
def cluster() -> str:
    """One local cluster of 2 worker processes for the module's pipelines (each would start its own)."""
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
    ) as local:
        yield local.scheduler_address


def _run(
    build: Callable[[beam.Pipeline, Path], None], folder: Path, *flags: str
) -> tuple[list[str], beam.runners.runner.PipelineResult]:
    """Run `build` (which writes JSON lines under its folder) and return the sorted lines and the result."""
    folder.mkdir(parents=True)
    pipeline = make_pipeline(PipelineOptions(list(flags)))
    build(pipeline, folder)
    result = pipeline.run()
    result.wait_until_finish()
    lines = sorted(line for path in folder.rglob("out*") for line in path.read_text().splitlines())
    return lines, result


def _both(build: Callable[[beam.Pipeline, Path], None], tmp_path: Path, address: str) -> list[str]:
    local, _ = _run(build, tmp_path / "local")
    on_dask, _ = _run(build, tmp_path / "dask", "--runner", "dask", "--dask_address", address)
    assert on_dask == local
    return local


def _write(pcoll: beam.PCollection, folder: Path, name: str) -> None:
    _ = (
        pcoll
        | f"Json{name}" >> beam.Map(json.dumps)
        | f"Write{name}" >> beam.io.WriteToText(str(folder / f"out-{name}"))
    )


class _EvensAndOdds(beam.DoFn):
    def process(self, number: int):
        yield number if number % 2 == 0 else beam.pvalue.TaggedOutput("odd", number)


def test_each_output_of_a_multi_output_pardo_reaches_only_its_consumers(cluster, tmp_path) -> None:
    def build(pipeline: beam.Pipeline, folder: Path) -> None:
        outputs = (
            pipeline | beam.Create(range(6)) | beam.ParDo(_EvensAndOdds()).with_outputs("odd", main="even")
        )
        _write(outputs.even | "TagEven" >> beam.Map(lambda n: ["even", n]), folder, "even")
        _write(outputs.odd | "TagOdd" >> beam.Map(lambda n: ["odd", n]), folder, "odd")

    lines = _both(build, tmp_path, cluster)
    assert sorted(json.loads(line)[1] for line in lines if "even" in line) == [0, 2, 4]
    assert len(lines) == 6


class _CountInFinish(beam.DoFn):
    def start_bundle(self) -> None:
        self.seen = 0

    def process(self, element: int):
        self.seen += 1
        Metrics.counter("test", "processed").inc()
        return []

    def finish_bundle(self):
        yield WindowedValue(self.seen, GlobalWindow().max_timestamp(), [GlobalWindow()])


def test_finish_bundle_output_batches_metrics_and_two_sinks_all_arrive(cluster, tmp_path) -> None:
    def build(pipeline: beam.Pipeline, folder: Path) -> None:
        numbers = pipeline | beam.Create(range(7))
        counted = numbers | beam.ParDo(_CountInFinish()) | beam.CombineGlobally(sum)
        _write(counted | "Seen" >> beam.Map(lambda n: ["seen", n]), folder, "seen")
        batches = numbers | beam.BatchElements(min_batch_size=3, max_batch_size=3)
        # Batches follow bundle boundaries, which differ between runners: their elements may not.
        _write(
            batches | "Unbatch" >> beam.FlatMap(lambda batch: [["batched", n] for n in batch]),
            folder,
            "batched",
        )

    lines = _both(build, tmp_path, cluster)
    assert json.loads(next(line for line in lines if "seen" in line)) == ["seen", 7]
    batched = [json.loads(line)[1] for line in lines if "batched" in line]
    assert sorted(batched) == list(range(7))  # the last, partial batch included
    _, result = _run(build, tmp_path / "metrics", "--runner", "dask", "--dask_address", cluster)
    counters = result.metrics().query(MetricsFilter().with_name("processed"))["counters"]
    assert sum(counter.committed for counter in counters) == 7


def test_group_combine_flatten_and_side_inputs_match_the_local_runner(cluster, tmp_path) -> None:
    def build(pipeline: beam.Pipeline, folder: Path) -> None:
        words = pipeline | "Words" >> beam.Create(["a", "b", "a", "c", "a", "b"])
        more = pipeline | "More" >> beam.Create(["d", "a"])
        both = (words, more) | beam.Flatten()
        pairs = both | beam.Map(lambda word: (word, 1))
        _write(pairs | beam.CombinePerKey(sum) | "Counts" >> beam.Map(list), folder, "counts")
        grouped = pairs | beam.GroupByKey() | "Sizes" >> beam.MapTuple(lambda k, vs: [k, len(list(vs))])
        _write(grouped, folder, "grouped")
        total = both | "Total" >> beam.combiners.Count.Globally()
        names = pipeline | "Names" >> beam.Create([("a", "apple"), ("b", "banana")])
        _write(
            both
            | "Side"
            >> beam.Map(
                lambda word, total, names: [word, total, names.get(word, "?")],
                beam.pvalue.AsSingleton(total),
                beam.pvalue.AsDict(names),
            ),
            folder,
            "side",
        )
        empty = pipeline | "Empty" >> beam.Create([]) | "EmptySum" >> beam.CombineGlobally(sum)
        _write(empty | "EmptyTag" >> beam.Map(lambda n: ["empty", n]), folder, "empty")

    lines = _both(build, tmp_path, cluster)
    assert '["a", 4]' in lines and '["empty", 0]' in lines and '["a", 8, "apple"]' in lines


def test_parquet_read_and_write_keep_every_row(cluster, tmp_path) -> None:
    source = tmp_path / "rows.parquet"
    pq.write_table(
        pa.table({"id": list(range(500)), "name": [f"p{i}" for i in range(500)]}), source, row_group_size=64
    )

    def build(pipeline: beam.Pipeline, folder: Path) -> None:
        rows = pipeline | beam.io.ReadFromParquet(str(source))
        _ = rows | beam.io.WriteToParquet(
            str(folder / "parquet"), pa.schema([("id", pa.int64()), ("name", pa.string())])
        )
        _write(rows | beam.Map(lambda row: row["id"]), folder, "ids")

    lines = _both(build, tmp_path, cluster)
    assert len(lines) == 500
    written = [pq.read_table(path) for path in (tmp_path / "dask").glob("parquet*")]  # one file a bundle
    assert sorted(i for table in written for i in table.column("id").to_pylist()) == list(range(500))


def _fail_on_three(number: int) -> int:
    if number == 3:
        raise ValueError("record 3 is bad")
    return number


def test_a_failing_task_fails_the_job_with_its_error(cluster, tmp_path) -> None:
    pipeline = make_pipeline(PipelineOptions(["--runner", "dask", "--dask_address", cluster]))
    _ = pipeline | beam.Create(range(6)) | beam.Map(_fail_on_three)
    with pytest.raises(ValueError, match="record 3 is bad"):
        pipeline.run().wait_until_finish()


def _mark_once(_: object, folder: str) -> str:
    """A side effect, as a sink's InitializeWrite has one: one marker file per execution."""
    marker = Path(folder) / uuid.uuid4().hex
    marker.write_text("ran")
    return marker.name


def test_a_side_input_read_by_several_transforms_is_computed_once(cluster, tmp_path) -> None:
    """A sink's InitializeWrite (its temporary folder) is a side input of its WriteBundles, PreFinalize and
    FinalizeWrite: run once per reader, each had its own folder, and 4,000 rows written ended as 0."""
    markers = tmp_path / "markers"
    markers.mkdir()
    pipeline = make_pipeline(PipelineOptions(["--runner", "dask", "--dask_address", cluster]))
    once = pipeline | "Once" >> beam.Create([None]) | "Mark" >> beam.Map(_mark_once, str(markers))
    for name in ("A", "B", "C"):
        _ = (
            pipeline
            | f"Numbers{name}" >> beam.Create(range(50))
            | f"Read{name}" >> beam.Map(lambda n, marker: (n, marker), beam.pvalue.AsSingleton(once))
            | f"Write{name}" >> beam.io.WriteToText(str(tmp_path / f"out-{name}"))
        )
    pipeline.run().wait_until_finish()
    assert len(list(markers.iterdir())) == 1
    for name in ("A", "B", "C"):
        assert sum(len(path.read_text().splitlines()) for path in tmp_path.glob(f"out-{name}*")) == 50


class _SetUpOnce(beam.DoFn):
    """Counts its setups and marks its teardown, in files: a worker keeps it between bundles."""

    def __init__(self, folder: str) -> None:
        self.folder = folder

    def setup(self) -> None:
        (Path(self.folder) / f"setup-{uuid.uuid4().hex}").write_text("")

    def process(self, number: int):
        yield number

    def teardown(self) -> None:
        (Path(self.folder) / f"teardown-{uuid.uuid4().hex}").write_text("")


def test_a_dofn_is_set_up_once_per_worker_thread_and_torn_down_when_the_job_ends(cluster, tmp_path) -> None:
    """A long-lived cluster (--dask_address) must not keep a finished job's DoFns, and their models."""
    marks = tmp_path / "marks"
    marks.mkdir()
    pipeline = make_pipeline(PipelineOptions(["--runner", "dask", "--dask_address", cluster]))
    _ = pipeline | beam.Create(range(40)) | beam.ParDo(_SetUpOnce(str(marks)))
    pipeline.run().wait_until_finish()
    setups = [p for p in marks.iterdir() if p.name.startswith("setup-")]
    teardowns = [p for p in marks.iterdir() if p.name.startswith("teardown-")]
    assert 1 <= len(setups) <= 2  # at most one per worker thread, whatever the number of bundles
    assert len(teardowns) == len(setups)


def test_a_job_of_several_pipelines_runs_them_on_one_local_cluster(tmp_path: Path) -> None:
    """The nightly's stages share one local cluster (`one_cluster_for_every_pipeline`): two pipelines run
    on it by its address, and it is stopped when the job ends; an address or another runner is kept."""
    from pipelines.cluster.dask_runner import one_cluster_for_every_pipeline

    flags = ("--runner", "dask", "--dask_workers", "1")
    with one_cluster_for_every_pipeline(flags) as shared:
        assert shared[: len(flags)] == flags and shared[-2] == "--dask_address"
        address = shared[-1]
        with distributed.Client(address) as client:
            assert len(client.scheduler_info()["workers"]) == 1
        for run in ("first", "second"):
            with make_pipeline(PipelineOptions(list(shared))) as pipeline:
                _ = (
                    pipeline
                    | beam.Create([1, 2, 3])
                    | beam.Map(lambda x: json.dumps(x))
                    | beam.io.WriteToText(str(tmp_path / run))
                )
            assert sorted(Path(tmp_path).glob(f"{run}*"))
    with pytest.raises(OSError):
        distributed.Client(address, timeout=2)
    kept = ("--runner", "dask", "--dask_address", "tcp://127.0.0.1:1")
    with one_cluster_for_every_pipeline(kept) as given:
        assert given == kept
    with one_cluster_for_every_pipeline(("--direct_num_workers", "2")) as local:
        assert local == ("--direct_num_workers", "2")
