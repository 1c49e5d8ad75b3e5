"""Reading a stage's Parquet shards back on the driver: a folder's tables, a catalog streamed row batch
by row batch, an embed output as ids and a matrix (its manifest checked first)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from apache_beam.io.filesystems import FileSystems

from pipelines.storage.stage_manifests import list_files, read_stage_manifest
from schemas import ArtifactError
from schemas.manifest import (
    MANIFEST_FILE,
)


def previous_embeddings_folder(path: str) -> str:
    """`--previous` may name an embed output or a run folder holding one in `embeddings/`.

    A run folder has a manifest of its own (a nightly run's, say), so a manifest of another kind
    sends the search on to `embeddings/`; a damaged embed output is reported as such.
    """
    for folder in (path, FileSystems.join(path, "embeddings")):
        manifest = FileSystems.join(folder, MANIFEST_FILE)
        if not FileSystems.exists(manifest):
            continue
        with FileSystems.open(manifest) as handle:
            kind = json.loads(handle.read()).get("kind")
        if kind == "madr-embeddings":
            read_stage_manifest(folder, kind)  # every listed file still there
            return folder
    raise ArtifactError(
        f"--previous {path}: neither it nor {path}/embeddings is a finished embed output (no {MANIFEST_FILE} "
        "of kind 'madr-embeddings')"
    )


def read_parquet_table(folder: str, prefix: str, columns: list[str] | None = None) -> pa.Table:
    """All `prefix*.parquet` files of a folder, concatenated in file-name order."""
    paths = list_files(folder, f"{prefix}*.parquet")
    if not paths:
        raise ArtifactError(f"no {prefix}*.parquet files in {folder}")
    tables = []
    for path in paths:
        with FileSystems.open(path) as handle:
            tables.append(pq.read_table(handle, columns=columns))
    return pa.concat_tables(tables)


def parquet_pattern(path: str) -> str:
    """`path` as a file pattern: a folder (local or gs://) stands for the `*.parquet` files in it."""
    if any(char in path for char in "*?["):
        return path
    inside = FileSystems.join(path.rstrip("/"), "*.parquet")
    return inside if FileSystems.match([inside])[0].metadata_list else path


def parquet_rows(pattern: str, columns: list[str] | None = None) -> Iterator[dict[str, Any]]:
    """The rows of every Parquet file matching `pattern` (a file, a folder or a glob), in file-name order,
    streamed batch by batch (a driver can read a catalog this way without holding it); FileNotFoundError
    when none matches."""
    paths = sorted(m.path for m in FileSystems.match([parquet_pattern(pattern)])[0].metadata_list)
    if not paths:
        raise FileNotFoundError(f"no Parquet file matches {pattern}")
    for path in paths:
        with FileSystems.open(path) as handle:
            for batch in pq.ParquetFile(handle).iter_batches(batch_size=8192, columns=columns):
                yield from batch.to_pylist()


def read_embeddings(folder: str) -> tuple[list[str], np.ndarray, dict[str, Any]]:
    """The ids, the (n, d) float32 matrix and the manifest of an embed stage output."""
    manifest = read_stage_manifest(folder, "madr-embeddings")
    table = read_parquet_table(folder, "embeddings", ["product_id", "embedding"])
    ids = table.column("product_id").to_pylist()
    flat = table.column("embedding").combine_chunks().flatten().to_numpy(zero_copy_only=False)
    matrix = np.ascontiguousarray(flat.reshape(len(ids), int(manifest["dimension"])), dtype=np.float32)
    return ids, matrix, manifest
