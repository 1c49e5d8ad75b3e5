"""The float32 vectors an index artifact keeps, read on their own, in the index's row order.

ScaNN keeps every vector in float32 (`scann/dataset.npy`) when it re-ranks in float32 or scores exactly,
which is what madr builds by default; an int8 re-ranking or hashing-only index keeps none. A search server
needs them to score exactly the few products a selective filter leaves: reading them from the index, not
from a second copy beside it, keeps a serving bundle at the index's size (a 10M x 384 copy is 15 GB).
Each file is checked against its shard's manifest as it is read, like every other file of the artifact.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from index_builder.artifact import FORMAT_NAME as SINGLE_FORMAT
from index_builder.artifact import (
    REBUILD_HINT,
    SCANN_DIR,
    IndexArtifactError,
    IndexManifest,
    read_verified_file,
    read_verified_manifest,
)
from index_builder.partitioned import PARTITIONED_FORMAT, index_format, read_verified_partitioned_manifest
from index_builder.scann_assets import npy_array
from schemas.manifest import MANIFEST_FILE

DATASET_FILE = f"{SCANN_DIR}/dataset.npy"


def _shards(directory: Path) -> list[tuple[Path, IndexManifest]]:
    """(folder, verified manifest) of each ScaNN artifact of the dense index at `directory`, in row order."""
    kind = index_format(directory)
    if kind == SINGLE_FORMAT:
        return [(directory, read_verified_manifest(directory))]
    if kind == PARTITIONED_FORMAT:
        shards = read_verified_partitioned_manifest(directory).shards
        return [(directory / shard.path, read_verified_manifest(directory / shard.path)) for shard in shards]
    manifest_path = directory / MANIFEST_FILE
    raise IndexArtifactError(f"{manifest_path} has format {kind!r}: only a dense index keeps vectors")


def keeps_vectors(directory: str | Path) -> bool:
    """Whether every shard of the dense index at `directory` lists its float32 vectors (nothing is read
    but the manifests)."""
    return all(DATASET_FILE in manifest.files for _, manifest in _shards(Path(directory)))


def read_stored_vectors(directory: str | Path) -> np.ndarray:
    """Every shard's float32 vectors, shard 0's rows first (the index's global row order), each file hashed
    as it is read. IndexArtifactError when a shard keeps none or its file does not hold its rows."""
    parts = []
    for folder, manifest in _shards(Path(directory)):
        if DATASET_FILE not in manifest.files:
            raise IndexArtifactError(f"{folder} keeps no float32 vectors ({DATASET_FILE}); {REBUILD_HINT}")
        try:
            vectors = npy_array(read_verified_file(folder, manifest, DATASET_FILE))
        except ValueError as err:
            raise IndexArtifactError(f"{folder / DATASET_FILE} is unreadable: {err}; {REBUILD_HINT}") from err
        if vectors.shape != (manifest.count, manifest.dimension) or vectors.dtype != np.float32:
            raise IndexArtifactError(
                f"{folder / DATASET_FILE} holds {vectors.dtype} {vectors.shape}, the manifest says float32 "
                f"({manifest.count}, {manifest.dimension}); {REBUILD_HINT}"
            )
        parts.append(vectors)
    return parts[0] if len(parts) == 1 else np.concatenate(parts)
