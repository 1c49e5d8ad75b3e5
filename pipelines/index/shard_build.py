"""One shard of a partitioned index: its settings (`ShardBuild`), its build and save (`BuildShardFn`), and the
one-shard build without a Beam job (`build_one_shard`). Every index build, `madr build-index` of one shard
included, goes through here: one build path, one artifact kind ("madr-partitioned-index").

`pipelines.index.partitioned` runs `BuildShardFn` in Beam after grouping rows by shard. With one shard on
the local runner that grouping only costs memory: the runner held the rows grouped, and the DoFn stacked and
sorted them again (the nightly's index stage peaked at 7.0 GB for 500,000 × 384 vectors). `build_one_shard`
reads the embed output into one matrix in this process and hands it to the same DoFn, which builds the
same shard from it.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import apache_beam as beam
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics import Metrics

from index_builder import ScannIndex
from index_builder.artifact import IndexManifest
from index_builder.bm25 import Bm25Settings, LexicalStatistics
from index_builder.builder import config_for_corpus
from index_builder.partitioned import shard_dir_name
from index_builder.recall import check_target, recall_summary
from index_builder.schedule import DEFAULT_SERVING_DEPTHS
from index_builder.tuned import sizing_depth
from index_builder.update import update_or_train
from pipelines.index.lexical_build import ShardTerms, catalog_terms, shard_bm25
from pipelines.io.catalog_io import METRICS_NAMESPACE
from pipelines.storage.stage_manifests import list_files
from schemas.manifest import MANIFEST_FILE

LOGGER = logging.getLogger(__name__)
# A tree + AH build of 1M x 128 took 38.9 s on the 2-core machine (bench/scaling_bench.py).
TRAIN_SECONDS_PER_MILLION_128D = 40.0


def _is_local(path: str) -> bool:
    return FileSystems.get_scheme(path) in (None, "file")


@dataclass(frozen=True)
class ShardBuild:
    """What every shard of one partitioned build shares; validated on construction."""

    output_dir: str
    num_shards: int
    depth: int
    model_id: str
    model_version: str
    target_recall: float | None = None
    # ScannIndexConfig fields in place of what each shard's size gives (`config_for_corpus`).
    scann_settings: tuple[tuple[str, Any], ...] = ()
    # Each shard's ``recall`` entry from the previous build of this index (`shard_recall`), or ().
    earlier: tuple[dict[str, Any] | None, ...] = ()
    # The depths each shard's search is tuned for besides depth (`index_builder.schedule`).
    serving_depths: tuple[int, ...] = DEFAULT_SERVING_DEPTHS
    # Each shard's folder in the previous build of this index (local only), whose tree a shard updates
    # instead of training one where it may (`index_builder.update`), or ().
    previous_shards: tuple[str | None, ...] = ()
    # The catalog whose text every shard's BM25 index is built over, scored with the whole catalog's
    # statistics (`pipelines.index.lexical_build`), and its analyzer; None: no BM25.
    products: str | None = None
    lexical: Bm25Settings = field(default_factory=Bm25Settings)
    # One shard only: query vectors (`build_inputs.tuning_query_vectors`) its search schedule must reach
    # the target on besides held-out corpus vectors.
    tuning_queries: np.ndarray | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "target_recall", check_target(self.target_recall))
        if self.num_shards != 1 and self.tuning_queries is not None:
            raise ValueError("tuning queries are built into a one-shard index only")
        for name, value in (("num_shards", self.num_shards), ("depth", self.depth)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        if not self.model_id or not self.model_version:
            raise ValueError("model_id and model_version are required: an index is valid for one encoder")


VECTORS, TERMS = "vectors", "terms"


class BuildShardFn(beam.DoFn):
    """(shard, {"vectors": (ids, matrix) chunks, "terms": its `ShardTerms`}) -> a saved ScannIndex
    artifact in ``output/shard-...`` (with BM25 when the build has products, scored with the catalog's
    `statistics`, a side input), and a summary dict."""

    def __init__(self, build: ShardBuild) -> None:
        self.build = build
        self.built = Metrics.counter(METRICS_NAMESPACE, "index_shards_built")
        self.indexed = Metrics.counter(METRICS_NAMESPACE, "index_rows_indexed")

    def process(
        self,
        element: tuple[int, dict[str, Iterable[Any]]],
        statistics: LexicalStatistics | None = None,
    ) -> Iterator[dict[str, Any]]:
        shard, grouped = element
        chunks: list[tuple[list[str], np.ndarray]] = list(grouped[VECTORS])
        counted: list[ShardTerms] = list(grouped.get(TERMS, ()))  # none, or the shard's one
        if not chunks:  # catalog products only: none of them has a vector, so no shard of them either
            LOGGER.warning("shard %d: the catalog has products here, but the embeddings none", shard)
            return
        if len({matrix.shape[1] for _, matrix in chunks}) != 1:
            raise ValueError(f"shard {shard}: embeddings of different dimensions")
        all_ids = np.asarray([pid for ids, _ in chunks for pid in ids], dtype=object)
        # Sorted by product id: the same embeddings give the same shard whatever order Beam delivered.
        order = np.argsort(all_ids, kind="stable")
        matrices = [matrix for _, matrix in chunks]
        del chunks
        # One chunk (the one-shard build) is sorted straight into a copy, not concatenated into a second.
        stacked = matrices.pop() if len(matrices) == 1 else np.concatenate(matrices)
        del matrices
        # Rows already in order (`build_one_shard` reads them so) are not copied again.
        matrix = stacked if np.array_equal(order, np.arange(len(order))) else stacked[order]
        del stacked
        ids = all_ids[order].tolist()
        build = self.build
        started = time.perf_counter()
        sizing = sizing_depth(build.depth, build.serving_depths, build.target_recall)
        config = config_for_corpus(len(ids), matrix.shape[1], sizing, dict(build.scann_settings))
        # One ScaNN call, so no running count: its expected time instead (docs/PERFORMANCE.md's 1M build).
        expected = TRAIN_SECONDS_PER_MILLION_128D * len(ids) / 1e6 * matrix.shape[1] / 128
        LOGGER.info("shard %d: building a ScaNN index (about %.0f s expected): %s", shard, expected, config)
        # Each shard tuned to the target on its own vectors, and exact where that is faster (the rule
        # `madr build-index` follows, `index_builder.tuned`): a merged top-k is as good as its shards'
        # top-k, and the union is measured after the build.
        earlier = build.earlier[shard] if shard < len(build.earlier) else None
        previous = build.previous_shards[shard] if shard < len(build.previous_shards) else None
        # Last night's tree updated where it may be, else a new one; the matrix in the index's row order.
        index, recall, matrix = update_or_train(
            previous,
            config,
            matrix,
            ids,
            build.depth,
            build.target_recall,
            serving_depths=build.serving_depths,
            earlier=earlier,
            explicit=dict(build.scann_settings),
            evaluation_queries=build.tuning_queries,
        )
        ids = list(index.ids)
        if build.products:
            if statistics is None:
                raise ValueError("a build with products needs the catalog's BM25 statistics")
            terms = counted[0] if counted else None
            index = index.with_lexical(shard_bm25(ids, terms, statistics, build.lexical, build.products))
        seconds = time.perf_counter() - started
        name = shard_dir_name(shard, build.num_shards)
        target = FileSystems.join(build.output_dir, name)
        extra = {"shard": shard, "num_shards": build.num_shards, "depth": build.depth}
        manifest = _save_shard(index, target, build.model_id, build.model_version, extra, recall.to_dict())
        self.built.inc()
        self.indexed.inc(len(ids))
        LOGGER.info("shard %s: %d × %d indexed in %.1f s", name, len(ids), matrix.shape[1], seconds)
        LOGGER.info("shard %s: %s; search settings: %s", name, recall_summary(recall), index.config)
        yield {"shard": shard, "path": name, "count": manifest.count, "seconds": seconds}


def _save_shard(
    index: ScannIndex, target: str, model_id: str, model_version: str, extra: dict, recall: dict
) -> IndexManifest:
    """Save a shard where it belongs, replacing what a failed earlier attempt may have left.

    Beam retries a failed bundle; its half-written shard directory would make
    `ScannIndex.save` (which refuses non-empty directories) fail forever, and only this
    DoFn call ever writes shard i, so the leftovers are removed first. A remote target
    (gs://) is staged in a local temporary directory and copied file by file, manifest last.
    """
    if _is_local(target):
        shutil.rmtree(target, ignore_errors=True)
        return index.save(target, model_id=model_id, model_version=model_version, extra=extra, recall=recall)
    leftovers = FileSystems.match([FileSystems.join(target, "**")])[0].metadata_list
    if leftovers:  # object stores have no directories: delete the objects under the prefix
        FileSystems.delete([metadata.path for metadata in leftovers])
    with tempfile.TemporaryDirectory(prefix="madr-shard-") as local:
        manifest = index.save(Path(local) / "shard", model_id, model_version, extra=extra, recall=recall)
        root = Path(local) / "shard"
        files = sorted(p for p in root.rglob("*") if p.is_file() and p.name != MANIFEST_FILE)
        for path in [*files, root / MANIFEST_FILE]:
            destination = FileSystems.join(target, *path.relative_to(root).parts)
            with path.open("rb") as source, FileSystems.create(destination) as sink:
                shutil.copyfileobj(source, sink)
    return manifest


def build_one_shard(build: ShardBuild, embeddings: str, dimension: int) -> dict[str, Any]:
    """Shard 0 of 1 from the embed output `embeddings`, built in this process; `BuildShardFn`'s summary.

    The rows must all be the build's model's, as `BuildPartitionedIndex` requires of each row. The
    vectors are read batch by batch straight into their sorted place in one matrix: reading the whole
    table, flattening it and sorting a copy had taken the process to 3.3 GB at 500,000 x 384 (0.77 GB of
    vectors) before the index was trained.
    """
    paths = list_files(embeddings, "embeddings*.parquet")
    ids: list[str] = []
    for path in paths:
        with FileSystems.open(path) as handle:
            table = pq.read_table(handle, columns=["product_id", "model_id", "model_version"])
        _refuse_other_models(table, (build.model_id, build.model_version))
        ids.extend(table.column("product_id").to_pylist())
    # Sorted by product id, as `BuildShardFn` sorts what Beam delivers: the same embeddings, the same shard.
    order = np.argsort(np.asarray(ids, dtype=object), kind="stable")
    place = np.empty_like(order)
    place[order] = np.arange(len(order))
    matrix = np.empty((len(ids), dimension), dtype=np.float32)
    row = 0
    for path in paths:
        with FileSystems.open(path) as handle:
            for batch in pq.ParquetFile(handle).iter_batches(batch_size=8_192, columns=["embedding"]):
                block = batch.column(0).flatten().to_numpy(zero_copy_only=False).reshape(-1, dimension)
                matrix[place[row : row + len(block)]] = block
                row += len(block)
    sorted_ids = [ids[i] for i in order]
    del ids, order, place
    # An iterator: once the DoFn has read it, the DoFn holds the only reference to the matrix.
    chunks = iter([(sorted_ids, matrix)])
    del sorted_ids, matrix
    terms, statistics = [], None
    if build.products:
        previous = build.previous_shards[0] if build.previous_shards else None
        counted, statistics = catalog_terms(build.products, build.lexical, previous)
        terms = [counted]
    (summary,) = BuildShardFn(build).process((0, {VECTORS: chunks, TERMS: terms}), statistics)
    return summary


def _refuse_other_models(table: pa.Table, model: tuple[str, str]) -> None:
    same = pc.and_(pc.equal(table["model_id"], model[0]), pc.equal(table["model_version"], model[1]))
    same = same.fill_null(False)
    if table.num_rows and not pc.all(same).as_py():  # an empty file (nothing new tonight) has no rows
        stranger = table.filter(pc.invert(same)).slice(0, 1).to_pylist()[0]
        found = (stranger["model_id"], stranger["model_version"])
        raise other_model_error(stranger["product_id"], found, model)


def other_model_error(product_id: str, found: tuple[str, str], model: tuple[str, str]) -> ValueError:
    """The refusal of a row embedded by another model than the index's, in Beam or in-process."""
    # One index, one encoder: vectors of two models are not comparable by dot product.
    return ValueError(f"product {product_id!r} was embedded by {found}, the index is for {model}")
