"""The parts a corpus is searched in, one per worker task: an index's shards, an embed output's files.

A `CorpusPart` is picklable data (where the part is, its first global row, its size); a worker opens it
(`open_dense`, `open_lexical`, `ids`) and holds only that part: a ScaNN shard with its vectors, one
embeddings file as an exact searcher, or one shard's BM25. Global corpus order is the whole artifact's:
part 0's rows, then part 1's, ... (`index_builder.partitioned`; `pipelines.io.parquet_reading.read_embeddings`
concatenates the files in the same order), so a merged ranking is the whole index's.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
from apache_beam.io.filesystems import FileSystems

from index_builder import ExactSearcher, ScannIndex
from index_builder.artifact import FORMAT_NAME as SINGLE_FORMAT
from index_builder.artifact import REBUILD_HINT, IndexArtifactError, file_entry, read_verified_ids
from index_builder.bm25 import Bm25Index
from index_builder.lexical import LEXICAL_DIR, load_shard_lexical
from index_builder.partitioned import PartitionedManifest
from pipelines.storage.local_copies import localize
from pipelines.storage.stage_manifests import list_files
from schemas.manifest import MANIFEST_FILE, FileEntry

SHARD, FILE = "shard", "file"


@dataclass(frozen=True)
class CorpusPart:
    """One part of a corpus: a shard folder of an index artifact or one embeddings Parquet file."""

    kind: str  # SHARD or FILE
    path: str
    number: int
    offset: int
    count: int
    # A shard's manifest as the index's top-level manifest records it: the worker checks the shard it opens.
    manifest: FileEntry | None = None

    def _local_shard(self, local_dir: str) -> Path:
        folder = Path(localize(self.path, local_dir))
        if self.manifest is not None and file_entry(folder / MANIFEST_FILE) != self.manifest:
            raise IndexArtifactError(
                f"{self.path}/{MANIFEST_FILE} does not match the sha256/size the index's top-level manifest "
                f"records: the shard was altered or replaced; {REBUILD_HINT}"
            )
        return folder

    def open_dense(self) -> ScannIndex | ExactSearcher:
        """The part's vectors as a searcher (each loader verifies what it reads)."""
        if self.kind == SHARD:
            with tempfile.TemporaryDirectory(prefix="madr-shard-") as local_dir:
                return ScannIndex.load(self._local_shard(local_dir))
        with FileSystems.open(self.path) as handle:
            table = pq.read_table(handle, columns=["product_id", "embedding"])
        ids = table.column("product_id").to_pylist()
        flat = table.column("embedding").combine_chunks().flatten().to_numpy(zero_copy_only=False)
        return ExactSearcher(np.ascontiguousarray(flat.reshape(len(ids), -1), dtype=np.float32), ids)

    def open_lexical(self) -> Bm25Index:
        """The shard's BM25 (and its ids), without its vectors."""
        if self.kind != SHARD:
            raise ValueError(f"{self.path}: only an index shard carries BM25")
        with tempfile.TemporaryDirectory(prefix="madr-shard-") as local_dir:
            lexical = load_shard_lexical(self._local_shard(local_dir))
        if lexical is None:
            raise IndexArtifactError(f"{self.path} carries no BM25 ({LEXICAL_DIR}/); {REBUILD_HINT}")
        return lexical

    def ids(self) -> list[str]:
        """The part's product ids in row order: what a run's rows are named by."""
        if self.kind == SHARD:
            with tempfile.TemporaryDirectory(prefix="madr-shard-") as local_dir:
                return read_verified_ids(self._local_shard(local_dir))[1]
        with FileSystems.open(self.path) as handle:
            return pq.read_table(handle, columns=["product_id"]).column(0).to_pylist()


def index_parts(index: str) -> list[CorpusPart]:
    """The shards of the partitioned index at `index` (local or gs://), from its top-level manifest; a
    single ScaNN artifact (`ScannIndex.save`, no top-level manifest over it) is its own one part."""
    path = FileSystems.join(index, MANIFEST_FILE)
    if not FileSystems.exists(path):
        raise IndexArtifactError(f"{path} is missing: {index} is not a finished index; {REBUILD_HINT}")
    with FileSystems.open(path) as handle:
        text = handle.read().decode("utf-8")
    try:
        found = json.loads(text)
    except json.JSONDecodeError:
        found = None  # `from_json` names the defect below
    if isinstance(found, dict) and found.get("format") == SINGLE_FORMAT:
        return [CorpusPart(SHARD, index, 0, 0, int(found["count"]))]
    manifest = PartitionedManifest.from_json(text, path)
    offsets = np.cumsum([0] + [shard.count for shard in manifest.shards[:-1]]).tolist()
    return [
        CorpusPart(SHARD, FileSystems.join(index, shard.path), i, offset, shard.count, shard.manifest)
        for i, (shard, offset) in enumerate(zip(manifest.shards, offsets, strict=True))
    ]


def index_carries_bm25(index: str) -> bool:
    """Whether the index's shards carry BM25 (`madr build-index --products`, the nightly's default)."""
    first = FileSystems.join(index_parts(index)[0].path, MANIFEST_FILE)
    with FileSystems.open(first) as handle:
        files = json.loads(handle.read())["files"]
    return any(name.startswith(f"{LEXICAL_DIR}/") for name in files)


def embedding_parts(embeddings: str) -> list[CorpusPart]:
    """The files of an embed output (whose manifest the driver verified), in the order they concatenate."""
    paths = list_files(embeddings, "embeddings*.parquet")
    if not paths:
        raise FileNotFoundError(f"no embeddings*.parquet files in {embeddings}")
    counts = []
    for path in paths:
        with FileSystems.open(path) as handle:
            counts.append(pq.ParquetFile(handle).metadata.num_rows)
    offsets = np.cumsum([0, *counts[:-1]]).tolist()
    found = enumerate(zip(paths, counts, offsets, strict=True))
    return [CorpusPart(FILE, path, i, offset, count) for i, (path, count, offset) in found if count]


__all__ = ["FILE", "SHARD", "CorpusPart", "embedding_parts", "index_carries_bm25", "index_parts"]
