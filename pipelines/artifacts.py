"""Stage outputs as artifacts: manifests written last, and reading shards back.

Works through Beam's FileSystems, so an output folder may be local or gs://.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.runners.runner import PipelineResult

from schemas import ArtifactError
from schemas.manifest import MANIFEST_FILE, sha256_stream, verify_files


def counter_value(result: PipelineResult, name: str) -> int:
    """The committed value of a Beam counter (0 when it never fired)."""
    counters = result.metrics().query(MetricsFilter().with_name(name))["counters"]
    return int(sum(counter.committed or 0 for counter in counters))


def _sha256(path: str) -> str:
    # Stored bytes as they are: FileSystems would otherwise gunzip a name ending in .gz.
    with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as handle:
        return sha256_stream(handle)


def _match(folder: str, pattern: str) -> list:
    return sorted(
        FileSystems.match([FileSystems.join(folder, pattern)])[0].metadata_list, key=lambda m: m.path
    )


def list_files(folder: str, pattern: str = "*") -> list[str]:
    return [metadata.path for metadata in _match(folder, pattern)]


def write_stage_manifest(folder: str, kind: str, info: dict[str, Any]) -> str:
    """Hash the stage's output files and write manifest.json last; readers trust folders that have one."""
    files = {}
    for metadata in _match(folder, "*"):
        name = metadata.path[len(folder.rstrip("/")) + 1 :]
        if name != MANIFEST_FILE:
            files[name] = {"sha256": _sha256(metadata.path), "bytes": metadata.size_in_bytes}
    manifest = {
        "kind": kind,
        "created_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        **info,
        "files": files,
    }
    target = FileSystems.join(folder, MANIFEST_FILE)
    with FileSystems.create(target) as handle:
        handle.write((json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode())
    return target


def read_stage_manifest(folder: str, kind: str, complete: bool = True) -> dict[str, Any]:
    """A stage folder's manifest; with ``complete``, every file it lists must still be there.

    A lost shard must be reported as lost: read without it, an embed output looks like a smaller
    catalog, and an index built from it fails (or, worse, succeeds) with no word about the file.
    """
    path = FileSystems.join(folder, MANIFEST_FILE)
    if not FileSystems.exists(path):
        # Also said of a mistyped path: the fix names both causes.
        raise ArtifactError(
            f"{folder} has no {MANIFEST_FILE}: it is not the output of a finished {kind} stage; check "
            "the path, or run the stage again"
        )
    with FileSystems.open(path) as handle:
        manifest = json.loads(handle.read())
    if manifest.get("kind") != kind:
        raise ArtifactError(f"{folder} holds {manifest.get('kind')!r}, expected {kind!r}")
    missing = missing_files(folder, manifest) if complete else []
    if missing:
        shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
        raise ArtifactError(
            f"{folder} is incomplete: {shown} listed in its {MANIFEST_FILE} "
            f"{'is' if len(missing) == 1 else 'are'} missing; restore it, or delete {folder} and rerun the "
            "stage that wrote it"
        )
    return manifest


def verify_stage_folder(folder: str, kind: str, fix: str) -> dict[str, Any]:
    """A stage folder's manifest, after checking every file in the folder against it.

    Through `schemas.manifest.verify_files`, like every other artifact: each listed file must have
    the sha256 the manifest records, and no file may have been added (readers glob the folder, so an
    added shard would be read unchecked). `fix` ends the error messages.
    """
    manifest = read_stage_manifest(folder, kind)
    root = folder.rstrip("/")
    present = [metadata.path[len(root) + 1 :] for metadata in _match(folder, "*")]
    listed = manifest.get("files", {})
    verify_files(listed, present, lambda name: FileSystems.join(folder, name), _sha256, fix)
    return manifest


def missing_files(folder: str, manifest: dict[str, Any]) -> list[str]:
    """The files ``manifest`` lists that ``folder`` no longer holds, by name."""
    # One listing of the folder rather than one request per file: shards may number thousands on gs://.
    present = {metadata.path[len(folder.rstrip("/")) + 1 :] for metadata in _match(folder, "*")}
    return sorted(
        name
        for name in manifest.get("files", {})
        if name not in present and not FileSystems.exists(FileSystems.join(folder, name))
    )


def previous_embeddings_folder(path: str) -> str:
    """`--previous` may name an embed output or a run folder holding one in `embeddings/`."""
    for folder in (path, FileSystems.join(path, "embeddings")):
        manifest = FileSystems.join(folder, MANIFEST_FILE)
        if FileSystems.exists(manifest):
            read_stage_manifest(folder, "madr-embeddings")
            return folder
    raise ArtifactError(
        f"--previous {path}: neither it nor {path}/embeddings is a finished embed output (no {MANIFEST_FILE})"
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


def read_embeddings(folder: str) -> tuple[list[str], np.ndarray, dict[str, Any]]:
    """The ids, the (n, d) float32 matrix and the manifest of an embed stage output."""
    manifest = read_stage_manifest(folder, "madr-embeddings")
    table = read_parquet_table(folder, "embeddings", ["product_id", "embedding"])
    ids = table.column("product_id").to_pylist()
    flat = table.column("embedding").combine_chunks().flatten().to_numpy(zero_copy_only=False)
    matrix = np.ascontiguousarray(flat.reshape(len(ids), int(manifest["dimension"])), dtype=np.float32)
    return ids, matrix, manifest


def is_local(path: str) -> bool:
    """True for a plain local path; anything with a scheme (gs://, file://, ...) goes through FileSystems."""
    return FileSystems.get_scheme(path) is None


def localize(path: str, local_dir: str) -> str:
    """A local folder holding the files of `path`: `path` itself when local, else a copy in `local_dir`.

    For libraries that only open local files (ScaNN's `load_searcher`, pathlib code). Every file under
    `path`, subfolders included, is copied byte for byte (no decompression of .gz names) through Beam's
    FileSystems, so any filesystem Beam knows works. The caller owns `local_dir` and deletes it.
    """
    if is_local(path):
        return path
    prefix = path.rstrip("/") + "/"
    # Objects named ".../" are folder placeholders some GCS tools create, not files.
    found = [m for m in FileSystems.match([prefix + "**"])[0].metadata_list if not m.path.endswith("/")]
    if not found:
        raise FileNotFoundError(f"{path} holds no files")
    for metadata in found:
        target = os.path.join(local_dir, *metadata.path[len(prefix) :].split("/"))
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with (
            FileSystems.open(metadata.path, compression_type=CompressionTypes.UNCOMPRESSED) as source,
            open(target, "wb") as sink,
        ):
            shutil.copyfileobj(source, sink, 1 << 20)
    return local_dir


def publish(local_dir: str, target: str) -> list[str]:
    """Copy every file under the local `local_dir` (subfolders included) into the folder `target`.

    The counterpart of `localize`, for code that can only write local files. Each object becomes visible
    whole when its upload closes; callers write their manifest after publishing. Returns the paths written.
    """
    written = []
    for root, _dirs, names in os.walk(local_dir):
        for name in sorted(names):
            source = os.path.join(root, name)
            relative = os.path.relpath(source, local_dir).replace(os.sep, "/")
            destination = FileSystems.join(target, *relative.split("/"))
            with (
                open(source, "rb") as reader,
                FileSystems.create(destination, compression_type=CompressionTypes.UNCOMPRESSED) as writer,
            ):
                shutil.copyfileobj(reader, writer, 1 << 20)
            written.append(destination)
    return written


@contextlib.contextmanager
def local_output(target: str) -> Iterator[str]:
    """A local folder to write into that ends up in `target`: `target` itself when local, else a
    temporary folder published to `target` when the block succeeds (and deleted either way)."""
    if is_local(target):
        yield target
        return
    with tempfile.TemporaryDirectory(prefix="madr-output-") as staging:
        yield staging
        publish(staging, target)
