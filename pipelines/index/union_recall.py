"""The recall of a partitioned index's shards searched as one, measured one shard at a time.

The figure is `index_builder.recall.measure_recall`'s over the whole index (held-out corpus vectors,
recall@k counted by score against exact search), but the driver never holds the whole index or every
embedding: at 10M × 128 that was 5 GB of vectors beside every shard's tree, and it was what killed the
10M build on a 24 GB machine after every shard had been written.

1. The embed output is read once, a record batch at a time, and each vector is written to its shard's
   file on disk at its row in that shard (its row: its key's place among the shard's verified ids, keys
   as `index_builder.product_keys`); the held-out queries' vectors are kept.
2. Each shard in turn: loaded (verified), searched to k + 1 at its stored settings, and scored exactly
   over its vectors; both lists merge into the running global top-(k + 1) as `PartitionedIndex.search`
   merges shards (by score, ties by global row), each found row carrying its exact score.

Peak memory is one shard's index and vectors plus the queries' lists, whatever the catalog's size.
"""

from __future__ import annotations

import logging
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
from apache_beam.io.filesystems import FileSystems

from index_builder import ScannIndex
from index_builder.artifact import read_verified_ids
from index_builder.partitioned import read_verified_partitioned_manifest
from index_builder.product_keys import id_keys
from index_builder.recall import (
    DEFAULT_RECALL_QUERIES,
    TIE_TOLERANCE,
    RecallReport,
    held_out_mask,
    recall_rows,
    recall_summary,
)
from pipelines.storage.stage_manifests import list_files

LOGGER = logging.getLogger(__name__)

# Working memory for one block of queries' exact scores over a shard.
_BLOCK_BYTES = 256 * 2**20


def _rank_keys(scores: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """One uint64 per (score, global row) whose ascending order is score descending, ties by ascending
    row (`index_builder.searcher.sort_rows`' order): the high half the score's bits made orderable and
    flipped, the low half the row. A top-k then is one `np.partition`, where a lexsort was 10x slower."""
    bits = np.ascontiguousarray(scores, dtype=np.float32).view(np.uint32)
    orderable = np.where(bits & np.uint32(0x80000000), ~bits, bits | np.uint32(0x80000000))
    return ((~orderable).astype(np.uint64) << np.uint64(32)) | rows.astype(np.uint64)


def _key_scores(keys: np.ndarray) -> np.ndarray:
    """The scores `_rank_keys` put in its keys."""
    orderable = ~(keys >> np.uint64(32)).astype(np.uint32)
    bits = np.where(orderable & np.uint32(0x80000000), orderable & np.uint32(0x7FFFFFFF), ~orderable)
    return bits.astype(np.uint32).view(np.float32)


def _key_rows(keys: np.ndarray) -> np.ndarray:
    return (keys & np.uint64(0xFFFFFFFF)).astype(np.int64)


@dataclass(frozen=True)
class _TopK:
    """Each query's best (score, row) keys so far, unordered, and a value carried with each."""

    keys: np.ndarray
    carried: np.ndarray

    @classmethod
    def empty(cls, queries: int) -> _TopK:
        return cls(np.empty((queries, 0), np.uint64), np.empty((queries, 0), np.float32))

    def merged(self, keys: np.ndarray, carried: np.ndarray, k: int) -> _TopK:
        """The union with one shard's lists, cut to the best k (unordered)."""
        keys = np.concatenate([self.keys, keys], axis=1)
        carried = np.concatenate([self.carried, carried], axis=1)
        if keys.shape[1] > k:
            best = np.argpartition(keys, k - 1, axis=1)[:, :k]
            keys, carried = np.take_along_axis(keys, best, 1), np.take_along_axis(carried, best, 1)
        return _TopK(keys, carried)

    def ordered(self) -> tuple[np.ndarray, np.ndarray]:
        """(global rows, carried values), each query's best first."""
        order = np.argsort(self.keys, axis=1)
        return _key_rows(np.take_along_axis(self.keys, order, 1)), np.take_along_axis(self.carried, order, 1)


@dataclass(frozen=True)
class _Shard:
    folder: Path
    offset: int
    count: int
    keys: np.ndarray  # the shard's ids' keys, in row order
    key_order: np.ndarray  # argsort of keys: a key's row by binary search


def measure_union_recall(
    folder: str, embeddings: str, depth: int, num_queries: int = DEFAULT_RECALL_QUERIES
) -> RecallReport:
    """recall@min(depth, n - 1) of the partitioned index at `folder` (local) searched as one, against
    exact search over the vectors of `embeddings` (the embed output it was built from)."""
    directory = Path(folder)
    manifest = read_verified_partitioned_manifest(directory)
    shards, offset = [], 0
    n = manifest.count
    k = max(1, min(depth, n - 1))
    own = recall_rows(n, num_queries)
    for entry in manifest.shards:
        keys = id_keys(read_verified_ids(directory / entry.path)[1])
        shards.append(
            _Shard(directory / entry.path, offset, len(keys), keys, np.argsort(keys, kind="stable"))
        )
        offset += len(keys)
    with tempfile.TemporaryDirectory(prefix=".madr-recall-", dir=directory.parent) as scratch:
        dimension = manifest.dimension
        files = _split_by_shard(embeddings, shards, dimension, Path(scratch))
        queries = _held_out_vectors(own, shards, files, dimension)
        found, truth = _TopK.empty(len(own)), _TopK.empty(len(own))
        for shard, path in zip(shards, files, strict=True):
            vectors = np.fromfile(path, dtype=np.float32).reshape(shard.count, dimension)
            width = min(k + 1, shard.count)
            approximate = ScannIndex.load(shard.folder).search(queries, width)
            rows = approximate.indices + shard.offset
            exact_of_found, exact_best = _exact_side(
                queries, vectors, approximate.indices, shard.offset, width
            )
            found = found.merged(_rank_keys(approximate.scores, rows), exact_of_found, k + 1)
            truth = truth.merged(exact_best, _key_scores(exact_best), k + 1)
            LOGGER.info("union recall: %s searched (%d vectors)", shard.folder.name, shard.count)
    # A held-out vector is not its own neighbour: drop its row from both lists (`measure_recall`).
    truth_rows, truth_scores = truth.ordered()
    found_rows, found_exact = found.ordered()
    kth = truth_scores[held_out_mask(truth_rows, own)].reshape(len(own), -1)[:, k - 1]
    near = found_exact[held_out_mask(found_rows, own)].reshape(len(own), -1)[:, :k]
    recall = float(np.count_nonzero(near >= kth[:, None] - TIE_TOLERANCE)) / (len(own) * k)
    report = RecallReport(k, len(own), recall, None, [{"stored_settings": True, "recall": recall}])
    LOGGER.info("partitioned index: %s", recall_summary(report))
    return report


def _split_by_shard(embeddings: str, shards: list[_Shard], dimension: int, scratch: Path) -> list[Path]:
    """Each shard's vectors in a file of its own, in the shard's row order."""
    files = [scratch / f"shard-{number}.f32" for number in range(len(shards))]
    maps = [
        np.memmap(path, np.float32, "w+", shape=(shard.count, dimension))
        for path, shard in zip(files, shards, strict=True)
    ]
    filled = [0] * len(shards)
    for path in list_files(embeddings, "embeddings*.parquet"):
        with FileSystems.open(path) as handle:
            for batch in pq.ParquetFile(handle).iter_batches(columns=["product_id", "embedding"]):
                flat = batch.column(1).flatten().to_numpy(zero_copy_only=False)
                vectors = np.asarray(flat, dtype=np.float32).reshape(batch.num_rows, dimension)
                keys = id_keys(batch.column(0).to_pylist())
                owner = keys % np.uint64(len(shards))  # `index_builder.product_keys.shard_of`
                for number, shard in enumerate(shards):
                    mine = np.flatnonzero(owner == number)
                    place = np.searchsorted(shard.keys, keys[mine], sorter=shard.key_order)
                    rows = shard.key_order[np.minimum(place, shard.count - 1)]
                    inside = shard.keys[rows] == keys[mine]
                    maps[number][rows[inside]] = vectors[mine[inside]]
                    filled[number] += int(np.count_nonzero(inside))
    for number, (shard, held) in enumerate(zip(shards, filled, strict=True)):
        if held != shard.count:
            raise ValueError(f"{embeddings} holds {held} of the {shard.count} vectors of {shard.folder}")
        maps[number].flush()
    return files


def _held_out_vectors(own: np.ndarray, shards: list[_Shard], files: list[Path], dimension: int) -> np.ndarray:
    """The vectors of the held-out global rows `own`, from the shards' files."""
    queries = np.empty((len(own), dimension), np.float32)
    for shard, path in zip(shards, files, strict=True):
        inside = np.flatnonzero((own >= shard.offset) & (own < shard.offset + shard.count))
        if len(inside):
            rows = np.memmap(path, np.float32, "r", shape=(shard.count, dimension))
            queries[inside] = rows[own[inside] - shard.offset]
    return queries


def _exact_side(
    queries: np.ndarray, vectors: np.ndarray, found: np.ndarray, offset: int, width: int
) -> tuple[np.ndarray, np.ndarray]:
    """Over one shard, a block of queries at a time: the exact scores of the rows the index found, and
    the exact top-`width` (as `_rank_keys`)."""
    exact_of_found = np.empty(found.shape, np.float32)
    best = np.empty((len(queries), width), np.uint64)
    rows = np.arange(offset, offset + len(vectors), dtype=np.int64)
    block = max(1, _BLOCK_BYTES // (12 * len(vectors)))
    for start in range(0, len(queries), block):
        stop = start + block
        scores = queries[start:stop] @ vectors.T
        exact_of_found[start:stop] = np.take_along_axis(scores, found[start:stop], 1)
        keys = _rank_keys(scores, rows)
        if width < keys.shape[1]:
            keys = np.partition(keys, width - 1, axis=1)[:, :width]
        best[start:stop] = keys
    return exact_of_found, best
