"""The partitioned index build, in Beam: catalogs beyond one worker's memory.

    embedding rows --KeyByShard--> (shard, (ids, vectors) chunk) --+--CoGroupByKey--> BuildShard
    products --CatalogLexical--> (shard, its term counts) ----------+                   ^ catalog statistics
        --> output/shard-0000i-of-0000S/   (a complete, verified ScannIndex artifact per shard, with BM25)
    driver, after the pipeline: output/manifest.json (written last, see `index_builder.partitioned`)

With --products every shard carries BM25 over its own products, scored with the whole catalog's
statistics (`pipelines.index.lexical_build`), so the shards' BM25 rankings merge by score.

Rows go to shard ``shard_of(product_id, S)`` (sha256, stable across workers), so a shard
only ever needs its own ~n/S vectors in memory, and each shard is sized by the same rule
as a single index (`config_for_corpus(n_shard, d, depth, settings)`). Within a newly trained
shard, rows are sorted by product id, so a rebuild from the same embeddings gives the same
global order whatever order Beam delivered them in; a shard that updated last night's tree
(`index_builder.update`) keeps that tree's row order, with tonight's new products at the end.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import apache_beam as beam
import numpy as np
import pyarrow as pa
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics import Metrics
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.transforms.window import GlobalWindow
from apache_beam.utils.windowed_value import WindowedValue

from index_builder.product_keys import shard_of
from index_builder.recall import check_target
from pipelines.index.build_inputs import tuning_query_vectors
from pipelines.index.config import IndexBuildConfig
from pipelines.index.lexical_build import CatalogLexical
from pipelines.index.manifest import (
    previous_shard,
    shard_recall,
    shard_search_settings,
    union_recall,
    write_partitioned_manifest,
)
from pipelines.index.shard_build import (
    TERMS,
    VECTORS,
    BuildShardFn,
    ShardBuild,
    build_one_shard,
    other_model_error,
)
from pipelines.io.catalog_io import METRICS_NAMESPACE
from pipelines.runner import make_pipeline, runs_locally
from pipelines.settings.stage_config import settings_record
from pipelines.storage.staged_output import fresh_output
from pipelines.storage.verify import embeddings_digest, verified_stage_manifest

LOGGER = logging.getLogger(__name__)


# Rows buffered per shard before they are emitted as one (ids, matrix) chunk: the shuffle then
# moves a few large arrays instead of one pickled tuple per product. Read + key + GroupByKey of
# 200k × 128 on the local runner: 12.3 s per product, 7.0 s chunked, 3.6 s chunked from Arrow batches.
CHUNK_ROWS = 4_096


class _KeyByShard(beam.DoFn):
    """Embedding rows -> (shard, (ids, float32 matrix)) chunks, refusing rows of another model."""

    def __init__(self, num_shards: int, model_id: str, model_version: str) -> None:
        self.num_shards = num_shards
        self.model = (model_id, model_version)
        self.rows = Metrics.counter(METRICS_NAMESPACE, "index_rows_read")
        self.buffers: dict[int, list[tuple[str, np.ndarray]]] = {}

    def start_bundle(self) -> None:
        self.buffers = {}

    def process(self, row: Mapping[str, Any]) -> Iterator[tuple[int, tuple[list[str], np.ndarray]]]:
        self.rows.inc()
        found = (row.get("model_id", self.model[0]), row.get("model_version", self.model[1]))
        if found != self.model:
            raise other_model_error(row["product_id"], found, self.model)
        product_id = row["product_id"]
        shard = shard_of(product_id, self.num_shards)
        buffer = self.buffers.setdefault(shard, [])
        buffer.append((product_id, np.asarray(row["embedding"], np.float32)))
        if len(buffer) >= CHUNK_ROWS:
            yield self._chunk(shard)

    def finish_bundle(self) -> Iterator[WindowedValue]:
        for shard in list(self.buffers):
            yield WindowedValue(self._chunk(shard), GlobalWindow().max_timestamp(), [GlobalWindow()])

    def _chunk(self, shard: int) -> tuple[int, tuple[list[str], np.ndarray]]:
        rows = self.buffers.pop(shard)
        shapes = {vector.shape for _, vector in rows}
        if len(shapes) != 1 or len(next(iter(shapes))) != 1:
            raise ValueError(f"shard {shard}: embeddings of different or non-vector shapes {sorted(shapes)}")
        return shard, ([pid for pid, _ in rows], np.stack([vector for _, vector in rows]))


def table_rows(table: pa.Table) -> Iterator[dict[str, Any]]:
    """Embedding rows of an Arrow batch, vectors as float32 numpy rows.

    What `ReadFromParquet` yields, minus its conversion of every float to a Python object
    (about half of the build's Beam overhead at 128 dimensions, see CHUNK_ROWS).
    """
    if table.num_rows == 0:
        return
    ids = table.column("product_id").to_pylist()
    matrix = table.column("embedding").combine_chunks().flatten().to_numpy(zero_copy_only=False)
    matrix = matrix.reshape(len(ids), -1).astype(np.float32, copy=False)
    models = table.column("model_id").to_pylist()
    versions = table.column("model_version").to_pylist()
    for row, product_id in enumerate(ids):
        yield {
            "product_id": product_id,
            "embedding": matrix[row],
            "model_id": models[row],
            "model_version": versions[row],
        }


class BuildPartitionedIndex(beam.PTransform):
    """Embedding rows -> one ScaNN shard artifact per hash partition, under ``output_dir``.

    The output PCollection holds one summary dict per built shard ({shard, path, count,
    seconds}); the top-level manifest is the driver's job (`write_partitioned_manifest`)
    once every shard exists, so a reader never sees a manifest over missing shards.
    """

    def __init__(
        self,
        output_dir: str,
        num_shards: int,
        depth: int,
        model_id: str,
        model_version: str,
        target_recall: float | None = None,
        scann_settings: tuple[tuple[str, Any], ...] = (),
        earlier: tuple[dict[str, Any] | None, ...] = (),
    ) -> None:
        super().__init__()
        self.build = ShardBuild(
            output_dir, num_shards, depth, model_id, model_version, target_recall, scann_settings, earlier
        )

    @classmethod
    def of(cls, build: ShardBuild) -> BuildPartitionedIndex:
        transform = cls(build.output_dir, build.num_shards, build.depth, build.model_id, build.model_version)
        transform.build = build
        return transform

    def expand(self, rows: beam.PCollection) -> beam.PCollection:
        build = self.build
        vectors = rows | "KeyByShard" >> beam.ParDo(
            _KeyByShard(build.num_shards, build.model_id, build.model_version)
        )
        if not build.products:
            grouped = (
                vectors
                | "GroupByShard" >> beam.GroupByKey()
                | "AsGroups" >> beam.MapTuple(lambda shard, chunks: (shard, {VECTORS: chunks, TERMS: []}))
            )
            return grouped | "BuildShard" >> beam.ParDo(BuildShardFn(build))
        catalog = CatalogLexical(build.products, build.num_shards, build.lexical, build.previous_shards)
        lexical = rows.pipeline | "CatalogLexical" >> catalog
        grouped = {VECTORS: vectors, TERMS: lexical["terms"]} | "GroupByShard" >> beam.CoGroupByKey()
        statistics = beam.pvalue.AsSingleton(lexical["statistics"])
        return grouped | "BuildShard" >> beam.ParDo(BuildShardFn(build), statistics=statistics)


@dataclass(frozen=True)
class IndexBuildReport:
    """What `build_partitioned` built: sizes, time, each shard's search settings and the recall measured."""

    count: int
    dimension: int
    num_shards: int
    shard_counts: tuple[int, ...]
    seconds: float
    directory: str
    # Each shard's ScaNN search settings as built and tuned (`ScannIndexConfig.__str__`).
    shard_settings: tuple[str, ...] = ()
    # recall@depth of the shards searched as one (`union_recall`), also in the manifest; None: not measured.
    recall: dict[str, Any] | None = None

    @property
    def config(self) -> str:
        """The search settings: one shard's, or each shard's in turn."""
        if len(self.shard_settings) == 1:
            return self.shard_settings[0]
        return "; ".join(f"shard {i}: {text}" for i, text in enumerate(self.shard_settings))

    def summary(self) -> str:
        """The line `madr build-index` prints."""
        shards = f" in {self.num_shards} shards" if self.num_shards > 1 else ""
        return f"indexed {self.count} x {self.dimension}{shards} in {self.seconds:.1f}s -> {self.directory}"


def _require_empty(folder: str) -> None:
    """Refuse a folder that already holds files: a stale shard or manifest must never slip in."""
    # "**": a failed earlier build may have left shard folders and no top-level file.
    if FileSystems.match([FileSystems.join(folder, "**")])[0].metadata_list:
        raise FileExistsError(f"{folder} exists and is not empty; choose a new output folder")


@dataclass(frozen=True)
class PartitionedBuildPlan:
    """What `build_partitioned_index_pipeline` read on the driver, which `build_partitioned` needs after."""

    folder: str
    embeddings: str
    num_shards: int
    depth: int
    model_id: str
    model_version: str
    dimension: int
    target_recall: float | None
    # The model the embeddings record (`pipelines.storage.verify.model_fingerprint`); None for older ones.
    model_fingerprint: str | None = None
    # The embed output it indexes (`pipelines.storage.verify.embeddings_digest`).
    embeddings_digest: str | None = None


def build_partitioned_index_pipeline(
    config: IndexBuildConfig, beam_options: PipelineOptions | None = None, folder: str | None = None
) -> tuple[beam.Pipeline, PartitionedBuildPlan]:
    """The partitioned index build, built but not run, writing its shards into ``folder`` (default: the
    config's output).

    The driver's checks happen here (`plan_partitioned_build`); a test translates the pipeline for another
    runner (tests/test_dataflow_translation.py).
    """
    plan, build = plan_partitioned_build(config, folder or config.output)
    pipeline = make_pipeline(beam_options or PipelineOptions([]))
    _ = (
        pipeline
        | "ReadEmbeddings"
        >> beam.io.ReadFromParquetBatched(
            FileSystems.join(config.embeddings, "embeddings*.parquet"),
            columns=["product_id", "embedding", "model_id", "model_version"],
        )
        | "ToRows" >> beam.FlatMap(table_rows)
        | "BuildPartitionedIndex" >> BuildPartitionedIndex.of(build)
    )
    return pipeline, plan


def plan_partitioned_build(config: IndexBuildConfig, folder: str) -> tuple[PartitionedBuildPlan, ShardBuild]:
    """The driver's checks (an empty output, the embeddings against their manifest), what the driver needs
    after the build, and what every shard's build shares (with what the previous index measured)."""
    settings = config.index
    _require_empty(folder)
    # Checked once, here; the workers that read the shards trust this check.
    embed_manifest = verified_stage_manifest(config.embeddings, "madr-embeddings", config.verify)
    plan = PartitionedBuildPlan(
        folder=folder,
        embeddings=config.embeddings,
        num_shards=settings.num_index_shards,
        depth=settings.depth,
        model_id=embed_manifest["model_id"],
        model_version=str(embed_manifest["model_version"]),
        model_fingerprint=embed_manifest.get("model_fingerprint"),
        embeddings_digest=embeddings_digest(embed_manifest),
        dimension=int(embed_manifest["dimension"]),
        target_recall=check_target(settings.target_recall),
    )
    build = ShardBuild(
        folder,
        plan.num_shards,
        plan.depth,
        plan.model_id,
        plan.model_version,
        plan.target_recall,
        tuple(settings.scann_settings().items()),
        tuple(shard_recall(config.previous_index, i, plan.num_shards) for i in range(plan.num_shards)),
        settings.depths,
        tuple(previous_shard(config.previous_index, i, plan.num_shards) for i in range(plan.num_shards)),
        products=config.products,
        lexical=config.lexical.bm25(),
        # Encoded here, once: every worker's shard build would otherwise load the model.
        tuning_queries=tuning_query_vectors(config, config.embeddings),
    )
    return plan, build


def build_partitioned(
    config: IndexBuildConfig, beam_options: PipelineOptions | None = None
) -> IndexBuildReport:
    """Build an index of the config's shards (`num_index_shards`) from an embed stage's output into the
    config's output: `madr build-index` and the nightly's index stage.

    One shard on the local runner is built in this process (`build_one_shard`), without a Beam job; with
    `products` every shard carries BM25, and only a one-shard index is tuned on queries (`tuning_queries`).
    A non-empty
    output is refused unless `overwrite`: the shards are built in a staging folder, which moves into the
    output, manifest included, once every shard exists (`staged_output.fresh_output`).
    """
    started = time.perf_counter()
    check_target(config.index.target_recall)  # a bad target is refused before anything is read or written
    beam_options = beam_options or PipelineOptions([])
    with fresh_output(config.output, config.overwrite) as folder:
        if config.index.num_index_shards == 1 and runs_locally(beam_options):
            # No Beam job: grouping one shard's rows only held the vectors more times over.
            plan, build = plan_partitioned_build(config, folder)
            build_one_shard(build, plan.embeddings, plan.dimension)
        else:
            pipeline, plan = build_partitioned_index_pipeline(config, beam_options, folder)
            pipeline.run().wait_until_finish()
        extra = {
            "embeddings": plan.embeddings,
            "depth": plan.depth,
            "model_fingerprint": plan.model_fingerprint,
            "embeddings_digest": plan.embeddings_digest,
            "settings": settings_record(config.index, config.lexical),
        }
        manifest = write_partitioned_manifest(
            plan.folder, plan.num_shards, plan.model_id, plan.model_version, plan.dimension, extra
        )
        recall = union_recall(plan.folder, plan.embeddings, plan.depth, plan.num_shards)
        settings = shard_search_settings(plan.folder, plan.num_shards)
        if recall is not None:  # the manifest again, with the figure: it is still the last file written
            write_partitioned_manifest(
                plan.folder,
                plan.num_shards,
                plan.model_id,
                plan.model_version,
                plan.dimension,
                {**extra, "recall": recall},
            )
    return IndexBuildReport(
        count=manifest.count,
        dimension=manifest.dimension,
        num_shards=plan.num_shards,
        shard_counts=tuple(s.count for s in manifest.shards),
        seconds=time.perf_counter() - started,
        directory=config.output,
        shard_settings=settings,
        recall=recall,
    )
