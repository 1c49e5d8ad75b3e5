"""Every Beam stage translates for Dataflow: built as the CLI builds it, run by DataflowRunner with --dry_run.

With ``--dry_run=True``, ``DataflowRunner.run_pipeline`` does everything a submission does up to the API
call, then returns a finished result instead of creating the job (Beam 2.77,
apache_beam/runners/dataflow/dataflow_runner.py): it applies Dataflow's transform overrides, checks that
every GroupByKey has a deterministic key coder, pickles every DoFn (cloudpickle, as on a real run),
converts the pipeline to its portable proto in a Docker environment, and builds and validates the job
(`apiclient.Job`). A transform Dataflow cannot take fails there, and so fails the test; so does one
this test does not expect a Dataflow worker to run (`DATAFLOW_LEAVES`).

Nothing needs credentials or the network: ``--no_auth`` keeps the Dataflow API client from looking for
credentials, ``--sdk_location=container`` says the worker image already holds Beam (nothing to download
or stage), and the gs:// temp and staging locations are only checked for their scheme under --dry_run.
Inputs are small local files: the drivers read them before building (model and embeddings verified
against their manifests, --searcher auto's calibration, an empty output folder), and dry-run
translation never opens them again. No read here globs a gs:// path at construction time, so no
``validate=False`` is needed; on a real run the same paths are gs:// and the driver lists them with the
job's credentials.

The flags are docs/SCALING.md's GPU worker pool: a custom worker image, one NVIDIA T4 per worker with
the driver installed, n1-standard-4 workers, at most 20 of them. Each test prints what it translated
(``pytest -s`` shows it).
"""

from __future__ import annotations

import shutil
import threading
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import apache_beam as beam
import pytest
from apache_beam.options.pipeline_options import GoogleCloudOptions, PipelineOptions
from apache_beam.portability import common_urns
from apache_beam.portability.api import beam_runner_api_pb2
from apache_beam.runners.dataflow.dataflow_runner import DataflowRunner
from apache_beam.runners.runner import PipelineState

from jobs.cli import parse_command
from pipelines.embed.stage import build_embed_pipeline, embed_catalog
from pipelines.evaluate.stage import build_evaluate_pipeline
from pipelines.index.partitioned import build_partitioned_index_pipeline
from pipelines.nightly.run import NightlyJob
from pipelines.runner import make_pipeline
from pipelines.settings.options import IndexSettings
from tests.conftest import index_embeddings
from tests.test_embed_pipeline import catalog, write_catalog, write_test_queries

IMAGE = "us-central1-docker.pkg.dev/madr-dry-run/madr/worker:test"
ACCELERATOR = "worker_accelerator=type:nvidia-tesla-t4;count:1;install-nvidia-driver"
DATAFLOW_FLAGS = (
    "--runner=DataflowRunner",
    "--project=madr-dry-run",
    "--region=us-central1",
    "--job_name=madr-dry-run",
    "--temp_location=gs://madr-dry-run/tmp",
    "--staging_location=gs://madr-dry-run/staging",
    "--no_auth",
    "--dry_run=True",
    "--sdk_location=container",
    f"--sdk_container_image={IMAGE}",
    f"--dataflow_service_options={ACCELERATOR}",
    "--machine_type=n1-standard-4",
    "--max_num_workers=20",
)
# What a translated madr pipeline may hold at its leaves: the Beam primitives Dataflow's Runner v2
# executes itself (Impulse, GroupByKey, Flatten, WindowInto) and ParDo, which runs our code in the worker
# image; combiners arrive as their lifted parts. Anything else (a cross-language or runner-specific
# transform) would need more than the image this test names.
DATAFLOW_LEAVES = frozenset(
    urn.urn
    for urn in (
        common_urns.primitives.IMPULSE,
        common_urns.primitives.PAR_DO,
        common_urns.primitives.GROUP_BY_KEY,
        common_urns.primitives.FLATTEN,
        common_urns.primitives.ASSIGN_WINDOWS,
        common_urns.composites.COMBINE_PER_KEY,
        common_urns.combine_components.COMBINE_PER_KEY_PRECOMBINE,
        common_urns.combine_components.COMBINE_PER_KEY_MERGE_ACCUMULATORS,
        common_urns.combine_components.COMBINE_PER_KEY_EXTRACT_OUTPUTS,
    )
)
# Dataflow refuses a job request over 20 MB (cloud.google.com/dataflow/docs/request-quotas), and the
# pipeline proto, pickled DoFns included, is most of it. madr's are ~0.1-0.2 MB; a DoFn that captured a
# loaded model or a matrix would be megabytes, and shows here long before the service refuses it.
MAX_PIPELINE_PROTO_BYTES = 2 * 1024 * 1024


@dataclass(frozen=True)
class Translation:
    """What DataflowRunner made of a pipeline: its leaf transforms by kind, and the proto's size."""

    leaves: Counter[str]
    proto_bytes: int

    def summary(self) -> str:
        kinds = ", ".join(f"{count} {urn.split(':')[2]}" for urn, count in self.leaves.most_common())
        total = sum(self.leaves.values())
        return f"{total} leaf transforms ({kinds}); pipeline proto {self.proto_bytes:,} bytes"


def translate(pipeline: beam.Pipeline) -> Translation:
    """Run `pipeline` on DataflowRunner under --dry_run, and check the job it would have submitted."""
    assert isinstance(pipeline.runner, DataflowRunner), "the stage did not pass --runner to Beam"
    result = pipeline.run()  # translates, validates and builds the job; raises if anything cannot be
    assert result.state == PipelineState.DONE
    job_options = result.job.options.view_as(GoogleCloudOptions)
    assert ACCELERATOR in job_options.dataflow_service_options
    proto = pipeline.runner.proto_pipeline
    leaves = [t for t in proto.components.transforms.values() if not t.subtransforms]
    foreign = sorted(f"{t.unique_name} ({t.spec.urn})" for t in leaves if t.spec.urn not in DATAFLOW_LEAVES)
    assert not foreign, f"transforms a Dataflow worker running {IMAGE} cannot execute: {foreign}"
    environments = proto.components.environments
    for environment in environments.values():
        assert environment.urn == common_urns.environments.DOCKER.urn
        assert beam_runner_api_pb2.DockerPayload.FromString(environment.payload).container_image == IMAGE
    homeless = [
        t.unique_name
        for t in leaves
        if t.spec.urn == common_urns.primitives.PAR_DO.urn and t.environment_id not in environments
    ]
    assert not homeless, f"DoFns without a worker environment: {homeless}"
    size = len(proto.SerializeToString())
    assert size < MAX_PIPELINE_PROTO_BYTES, f"pipeline proto of {size:,} bytes: a DoFn captured something big"
    return Translation(Counter(t.spec.urn for t in leaves), size)


def _options(*flags: str) -> PipelineOptions:
    return PipelineOptions([*flags, *DATAFLOW_FLAGS])


def _as_typed(command: str, *flags: str) -> tuple[Any, PipelineOptions]:
    """`madr COMMAND` with `flags` and the Dataflow flags, parsed as the CLI parses them."""
    return parse_command(command, [*flags, *DATAFLOW_FLAGS])


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory, tiny_model_dir: Path) -> dict[str, str]:
    """A catalog, last night's embeddings and index built from it (locally), queries and judgments."""
    root = tmp_path_factory.mktemp("dataflow-inputs")
    paths = {"model": str(tiny_model_dir), "products": write_catalog(root / "products.parquet", catalog(30))}
    paths["embeddings"] = str(root / "embeddings")
    embed_catalog(*parse_command("embed", ["--products", paths["products"], "--model", paths["model"],
                               "--output", paths["embeddings"]]))  # fmt: skip
    paths["index"] = str(root / "index")
    index_embeddings(paths["embeddings"], paths["index"], depth=50)
    paths["queries"], paths["judgments"] = write_test_queries(root, count=6, stride=4)
    return paths


@pytest.mark.parametrize("variant", ["runner-decides-shards", "fixed-shards", "incremental"])
def test_embed_translates_for_dataflow(inputs, tmp_path, variant) -> None:
    extra = {
        "runner-decides-shards": [],
        "fixed-shards": ["--num_shards", "8"],  # Beam's writer then groups rows by shard
        "incremental": ["--previous", inputs["embeddings"]],  # the reuse plan: side inputs, a second writer
    }[variant]
    flags = ["--products", inputs["products"], "--model", inputs["model"], "--output", str(tmp_path / "out")]
    pipeline, _ = build_embed_pipeline(*_as_typed("embed", *flags, *extra))
    print(f"\nembed ({variant}): {translate(pipeline).summary()}")


def test_partitioned_build_index_translates_for_dataflow(inputs, tmp_path) -> None:
    flags = [
        "--embeddings",
        inputs["embeddings"],
        "--output",
        str(tmp_path / "index"),
        "--num_index_shards",
        "4",
    ]
    pipeline, plan = build_partitioned_index_pipeline(*_as_typed("build-index", *flags, "--depth", "50"))
    assert plan.num_shards == 4
    print(f"\nbuild-index --num_index_shards 4: {translate(pipeline).summary()}")


@pytest.mark.parametrize("searcher", ["ann", "exact"])
def test_evaluate_translates_for_dataflow(inputs, tmp_path, searcher) -> None:
    flags = ["--queries", inputs["queries"], "--judgments", inputs["judgments"], "--model", inputs["model"],
             "--index", inputs["index"], "--embeddings", inputs["embeddings"], "--depth", "50"]  # fmt: skip
    pipeline, plan = build_evaluate_pipeline(
        *_as_typed("evaluate", *flags, "--output", str(tmp_path / "eval"), "--searcher", searcher)
    )
    print(f"\nevaluate --searcher {searcher} ({', '.join(plan.specs)}): {translate(pipeline).summary()}")


def test_the_nightly_stages_translate_for_dataflow(inputs, tmp_path) -> None:
    """Each of the nightly job's three pipelines, with the flags `run_nightly` gives it and the Beam flags
    a user gives `madr nightly` (one set for every stage). Each stage's input is put where the stage
    before it would have written it, since a dry run writes nothing."""
    job = NightlyJob(
        catalog=inputs["products"],
        model=inputs["model"],
        out=str(tmp_path / "nightly"),
        run_id="tue",
        queries=inputs["queries"],
        judgments=inputs["judgments"],
        index=IndexSettings(num_index_shards=3, depth=50),
        beam_args=DATAFLOW_FLAGS,
    )
    # Last night's run is reused, as run_nightly does when LATEST points at a finished one.
    embed, _ = build_embed_pipeline(
        job.with_previous(inputs["embeddings"]).embed, PipelineOptions(list(job.beam_args))
    )
    summaries = {"embed": translate(embed).summary()}
    shutil.copytree(inputs["embeddings"], job.stage("embeddings"))
    index, _ = build_partitioned_index_pipeline(job.stages.index, PipelineOptions(list(job.beam_args)))
    summaries["index"] = translate(index).summary()
    shutil.copytree(inputs["index"], job.stage("index"))
    evaluate, plan = build_evaluate_pipeline(job.stages.evaluate, PipelineOptions(list(job.beam_args)))
    assert plan.calibration is not None  # --searcher auto measured both searchers on the driver
    summaries["evaluate"] = translate(evaluate).summary()
    print("\nnightly:" + "".join(f"\n  {stage}: {summary}" for stage, summary in summaries.items()))


class _UnknownToDataflow(beam.PTransform):
    """A primitive of a URN no runner knows, standing for a transform Dataflow cannot translate."""

    def expand(self, pcoll: beam.PCollection) -> beam.PCollection:
        return beam.pvalue.PCollection.from_(pcoll)

    def to_runner_api_parameter(self, context: object) -> tuple[str, None]:
        return "beam:transform:madr-test:unknown:v1", None


@pytest.mark.parametrize("broken", ["unknown transform", "unpicklable DoFn"])
def test_translation_fails_on_what_dataflow_cannot_take(broken) -> None:
    """The check bites: what a real submission would reject fails `translate`, not a run hours later."""
    pipeline = make_pipeline(_options())
    numbers = pipeline | beam.Create([1, 2])
    if broken == "unknown transform":
        _ = numbers | _UnknownToDataflow()
        expected: type[Exception] = KeyError  # the runner round-trips the proto: no transform has the URN
    else:
        lock = threading.Lock()  # state a DoFn cannot carry to a worker
        _ = numbers | beam.Map(lambda number: (number, lock))
        expected = TypeError
    with pytest.raises(expected):
        translate(pipeline)
