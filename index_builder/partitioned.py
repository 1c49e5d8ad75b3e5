"""A partitioned index: S ordinary ScaNN index artifacts searched together as one corpus.

A catalog too large for one worker's memory is split by a stable hash of the
product id into S shards, each trained and saved by its own worker as a normal,
verified `ScannIndex` artifact; a top-level manifest, written last, ties them
together::

    <dir>/manifest.json                  written LAST: format "madr-partitioned-index"
    <dir>/shard-00000-of-00003/...       a complete ScannIndex artifact (its own manifest)
    <dir>/shard-00001-of-00003/...

The top-level manifest pins the sha256 of every shard's manifest, and each shard
manifest pins every file of its shard, so one chain of checksums covers the whole
artifact; shard paths are relative, so the directory can be moved or copied.

Global corpus order (what `SearchResult.indices` refer to) is shard 0's rows, then
shard 1's, ...: global index = shard offset + local row. A search asks every shard
for the full k (capped at the shard's size) because the global top-k may all sit in
one shard, then merges by score, ties by global index, exactly as `ExactSearcher`
over the concatenated corpus would order them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from index_builder.artifact import FORMAT_NAME as SINGLE_FORMAT
from index_builder.artifact import REBUILD_HINT, IndexArtifactError, file_entry
from index_builder.lexical import LexicalIndex, ShardedBm25, hybrid_search
from index_builder.scann_assets import ExactMaker, torch_exact
from index_builder.scann_index import ScannIndex
from index_builder.searcher import (
    CorpusRows,
    Searcher,
    SearchResult,
    as_query_matrix,
    effective_k,
    make_result,
    sort_rows,
)
from schemas.manifest import (
    MANIFEST_FILE,
    ArtifactError,
    FileEntry,
    manifest_document,
    manifest_json,
    parse_manifest,
)

PARTITIONED_FORMAT = "madr-partitioned-index"
PARTITIONED_FORMAT_VERSION = 1
# Written into the manifest so that whoever adds products later can route them to the right shard.
ASSIGNMENT = "sha256(utf8(product_id))[:8] as big-endian uint64 mod num_shards"
# Bound on the merge buffer: q_block × (S × k) candidates of 12 bytes (int64 index + float32 score).
_MERGE_BLOCK_BYTES = 256 * 1024 * 1024


def shard_dir_name(shard: int, num_shards: int) -> str:
    """``shard-00002-of-00004``: sortable, and says how many siblings it should have."""
    return f"shard-{shard:05d}-of-{num_shards:05d}"


@dataclass(frozen=True)
class ShardEntry:
    """One shard as the top-level manifest records it."""

    path: str
    count: int
    manifest: FileEntry

    def __post_init__(self) -> None:
        if not isinstance(self.count, int) or self.count < 1:
            raise ValueError(f"shard {self.path}: count must be a positive int, got {self.count!r}")


@dataclass(frozen=True, kw_only=True)
class PartitionedManifest:
    """What a partitioned index directory holds; validated on construction."""

    model_id: str
    model_version: str
    dimension: int
    shards: tuple[ShardEntry, ...]
    created_at: str = field(default_factory=lambda: datetime.now(timezone.utc).isoformat(timespec="seconds"))
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.model_id or not self.model_version:
            raise ValueError("model_id and model_version are required: an index is valid for one encoder")
        if not isinstance(self.dimension, int) or self.dimension < 1:
            raise ValueError(f"dimension must be a positive int, got {self.dimension!r}")
        if not self.shards:
            raise ValueError("a partitioned index needs at least one shard")
        expected = [shard_dir_name(i, len(self.shards)) for i in range(len(self.shards))]
        if [s.path for s in self.shards] != expected:
            raise ValueError(f"shard paths must be {expected}, got {[s.path for s in self.shards]}")

    @property
    def num_shards(self) -> int:
        return len(self.shards)

    @property
    def count(self) -> int:
        return sum(shard.count for shard in self.shards)

    def to_json(self) -> str:
        """The manifest as written (`schemas.manifest.manifest_document`): its files are the shard
        manifests, in the project-wide form, so `schemas.verify_manifest` works too."""
        info = {
            "format": PARTITIONED_FORMAT,
            "format_version": PARTITIONED_FORMAT_VERSION,
            "model_id": self.model_id,
            "model_version": self.model_version,
            "dimension": self.dimension,
            # "count" is the key a single index uses too: readers of corpus size need not care which.
            "count": self.count,
            "num_shards": self.num_shards,
            "assignment": ASSIGNMENT,
            "shards": [{"path": s.path, "count": s.count} for s in self.shards],
            "extra": self.extra,
        }
        files = {f"{s.path}/{MANIFEST_FILE}": s.manifest for s in self.shards}
        return manifest_json(manifest_document(PARTITIONED_FORMAT, info, files, self.created_at))

    @classmethod
    def from_json(cls, text: str, source: Path | str) -> PartitionedManifest:
        """Parse and check; every defect is an IndexArtifactError naming ``source``."""
        try:
            data = parse_manifest(text, str(source), REBUILD_HINT)
            if (data.get("format"), data.get("format_version")) != (
                PARTITIONED_FORMAT,
                PARTITIONED_FORMAT_VERSION,
            ):
                raise ValueError(
                    f"format is {data.get('format')!r} v{data.get('format_version')!r}, "
                    f"expected {PARTITIONED_FORMAT!r} v{PARTITIONED_FORMAT_VERSION}"
                )
            files = data["files"]
            shards = tuple(
                ShardEntry(
                    path=str(s["path"]),
                    count=int(s["count"]),
                    manifest=FileEntry.from_dict(files[f"{s['path']}/{MANIFEST_FILE}"]),
                )
                for s in data["shards"]
            )
            manifest = cls(
                model_id=str(data["model_id"]),
                model_version=str(data["model_version"]),
                dimension=int(data["dimension"]),
                shards=shards,
                created_at=str(data["created_at"]),
                extra=dict(data.get("extra") or {}),
            )
            if len(files) != manifest.num_shards:
                raise ValueError("'files' must list exactly the shard manifests")
            if (int(data["count"]), int(data["num_shards"])) != (manifest.count, manifest.num_shards):
                raise ValueError("'count'/'num_shards' disagree with the shard list")
        except ArtifactError as err:
            raise IndexArtifactError(str(err)) from err
        except (ValueError, KeyError, TypeError, AttributeError) as err:
            raise IndexArtifactError(
                f"{source} is not a valid partitioned index manifest ({err}); {REBUILD_HINT}"
            ) from err
        return manifest


def read_verified_partitioned_manifest(directory: Path) -> PartitionedManifest:
    """Read the top-level manifest and check each shard manifest against its recorded sha256."""
    path = directory / MANIFEST_FILE
    if not path.is_file():
        raise IndexArtifactError(
            f"{path} is missing: the directory is not a finished index (the manifest is written last); "
            f"{REBUILD_HINT}"
        )
    manifest = PartitionedManifest.from_json(path.read_text(encoding="utf-8"), path)
    for shard in manifest.shards:
        shard_manifest = directory / shard.path / MANIFEST_FILE
        if not shard_manifest.is_file():
            raise IndexArtifactError(
                f"{shard_manifest} is missing from the partitioned index; {REBUILD_HINT}"
            )
        if file_entry(shard_manifest) != shard.manifest:
            raise IndexArtifactError(
                f"{shard_manifest} does not match the sha256/size recorded in {path}: the shard was altered "
                f"or replaced; {REBUILD_HINT}"
            )
    return manifest


class PartitionedIndex(CorpusRows):
    """S ScaNN shards searched as one corpus; satisfies the `Searcher` protocol."""

    def __init__(self, shards: list[ScannIndex], manifest: PartitionedManifest | None = None) -> None:
        if not shards:
            raise ValueError("a partitioned index needs at least one shard")
        if len({shard.dimension for shard in shards}) != 1:
            raise ValueError(f"shards disagree on dimension: {[s.dimension for s in shards]}")
        self._shards = list(shards)
        self._offsets = np.cumsum([0] + [s.size for s in shards[:-1]]).tolist()
        self._ids = np.asarray([pid for shard in shards for pid in shard.ids], dtype=object)
        self._manifest = manifest
        lexical = [shard.lexical for shard in shards]
        if any(found is None for found in lexical) and any(found is not None for found in lexical):
            raise IndexArtifactError(
                f"only some shards carry BM25 ({sum(f is not None for f in lexical)} of {len(shards)}); "
                f"{REBUILD_HINT}"
            )
        self._lexical: LexicalIndex | None = None
        if len(shards) == 1:
            self._lexical = lexical[0]
        elif lexical[0] is not None:
            try:
                self._lexical = ShardedBm25([found for found in lexical if found is not None], self._offsets)
            except ValueError as err:
                raise IndexArtifactError(f"{err}: shards of different builds; {REBUILD_HINT}") from err

    @classmethod
    def load(cls, directory: str | Path, exact: ExactMaker = torch_exact) -> PartitionedIndex:
        """Verify the top-level manifest, then load (and verify) every shard (`exact` as `ScannIndex.load`).

        Raises:
            IndexArtifactError: a manifest is missing, invalid or altered, a shard file was
                altered, or a shard disagrees with the top-level manifest.
        """
        directory = Path(directory)
        if not directory.is_dir():
            raise IndexArtifactError(f"index directory {directory} does not exist; {REBUILD_HINT}")
        manifest = read_verified_partitioned_manifest(directory)
        shards = []
        for entry in manifest.shards:
            shard = ScannIndex.load(directory / entry.path, exact)
            inner = shard.manifest
            found = (inner.model_id, inner.model_version, inner.dimension, inner.count)
            wanted = (manifest.model_id, manifest.model_version, manifest.dimension, entry.count)
            if found != wanted:
                raise IndexArtifactError(
                    f"{directory / entry.path} holds (model, version, dimension, count) {found}, "
                    f"the top-level manifest says {wanted}; {REBUILD_HINT}"
                )
            shards.append(shard)
        return cls(shards, manifest)

    @property
    def manifest(self) -> PartitionedManifest | None:
        return self._manifest

    @property
    def shards(self) -> tuple[ScannIndex, ...]:
        return tuple(self._shards)

    @property
    def offsets(self) -> tuple[int, ...]:
        """Global index of each shard's first row."""
        return tuple(self._offsets)

    @property
    def dimension(self) -> int:
        return self._shards[0].dimension

    @property
    def size(self) -> int:
        return len(self._ids)

    @property
    def lexical(self) -> LexicalIndex | None:
        """BM25 over the whole catalog (`madr build-index --products`, the nightly's default): one shard's
        own, or every shard's searched as one (`ShardedBm25`: scored with the catalog's statistics, so
        the rankings merge by score); None when the index was built without it."""
        return self._lexical

    def search_hybrid(self, queries: np.ndarray, texts: Sequence[str], k: int) -> SearchResult:
        """The dense ranking fused with BM25's by reciprocal rank (`index_builder.lexical.hybrid_search`):
        both rank the global rows (shard offset + local row)."""
        return hybrid_search(self, self.lexical, queries, texts, k)

    def __repr__(self) -> str:
        sizes = ", ".join(str(s.size) for s in self._shards)
        return f"PartitionedIndex({self.size} × {self.dimension} in {len(self._shards)} shards: {sizes})"

    def search(self, queries: np.ndarray, k: int) -> SearchResult:
        """Global top-min(k, n) per query: every shard's top-k, merged by score, ties by global index."""
        matrix = as_query_matrix(queries, self.dimension)
        k_eff = effective_k(k, self.size)
        indices = np.empty((matrix.shape[0], k_eff), dtype=np.int64)
        scores = np.empty((matrix.shape[0], k_eff), dtype=np.float32)
        block = max(1, _MERGE_BLOCK_BYTES // (12 * k_eff * len(self._shards)))
        for start in range(0, matrix.shape[0], block):
            stop = start + block
            indices[start:stop], scores[start:stop] = self._merge(matrix[start:stop], k_eff)
        return make_result(indices, scores, self._ids)

    def _merge(self, matrix: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        found_indices, found_scores = [], []
        for offset, shard in zip(self._offsets, self._shards, strict=True):
            found = shard.search(matrix, min(k, shard.size))
            found_indices.append(found.indices + offset)
            found_scores.append(found.scores)
        merged_indices, merged_scores = sort_rows(
            np.concatenate(found_indices, axis=1), np.concatenate(found_scores, axis=1)
        )
        return merged_indices[:, :k], merged_scores[:, :k]


def index_format(directory: Path) -> str | None:
    """The `format` an index artifact's manifest names (single, partitioned, inverted), read alone."""
    path = directory / MANIFEST_FILE
    if not path.is_file():
        raise IndexArtifactError(
            f"{path} is missing: {directory} is not a finished index (the manifest is written last); "
            f"{REBUILD_HINT}"
        )
    try:
        return json.loads(path.read_text(encoding="utf-8")).get("format")
    except (json.JSONDecodeError, AttributeError) as err:
        raise IndexArtifactError(f"{path} is not a JSON object ({err}); {REBUILD_HINT}") from err


def open_index(directory: str | Path, exact: ExactMaker = torch_exact) -> Searcher:
    """Load whichever index artifact ``directory`` holds (single, partitioned, inverted) from its manifest;
    a dense one scores exactly with what `exact` makes (`ScannIndex.load`)."""
    directory = Path(directory)
    path = directory / MANIFEST_FILE
    kind = index_format(directory)
    if kind == SINGLE_FORMAT:
        return ScannIndex.load(directory, exact)
    if kind == PARTITIONED_FORMAT:
        return PartitionedIndex.load(directory, exact)
    # The inverted index's exact searcher is torch's: imported only for an artifact of its kind.
    from index_builder.inverted import INVERTED_FORMAT, InvertedIndex

    if kind == INVERTED_FORMAT:
        return InvertedIndex.load(directory)
    raise IndexArtifactError(
        f"{path} has format {kind!r}; expected {SINGLE_FORMAT!r}, {PARTITIONED_FORMAT!r} or "
        f"{INVERTED_FORMAT!r}; {REBUILD_HINT}"
    )
