"""A stage folder's manifest: written last over every file the stage wrote, read back with every listed
file present, or verified file by file (the checks are `schemas.manifest`'s, the one manifest API).

Works through Beam's FileSystems, so a folder may be local or gs://.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.runners.runner import PipelineResult

from pipelines.storage.staged_output import is_local
from schemas import ArtifactError
from schemas.manifest import (
    MANIFEST_FILE,
    FileEntry,
    check_files_digest,
    check_links_stay_inside,
    manifest_document,
    manifest_json,
    sha256_stream,
    verify_files,
)


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


class StageOutputMismatch(ArtifactError):
    """A stage's files hold fewer (or more) rows than its counters say it wrote: the runner lost records."""


def check_rows_written(folder: str, kind: str, rows: Mapping[str, int]) -> None:
    """Refuse to publish a stage whose Parquet files (each glob of `rows`) do not hold the rows its counts
    say: a runner that drops a bundle's output (Beam's own DaskRunner wrote empty sink files) would
    otherwise publish a stage that reported 2,000 products embedded and holds none."""
    for pattern, expected in rows.items():
        held = 0
        for path in list_files(folder, pattern):
            with FileSystems.open(path) as handle:
                held += pq.ParquetFile(handle).metadata.num_rows
        if held != expected:
            raise StageOutputMismatch(
                f"{kind}: its counts say {expected:,} rows were written, but {folder}/{pattern} holds "
                f"{held:,}: the runner lost (or repeated) records, so the output is not published; "
                "run it again on the local runner or on --runner dask"
            )


def write_stage_manifest(
    folder: str, kind: str, info: dict[str, Any], rows: Mapping[str, int] | None = None
) -> str:
    """Hash the stage's output files and write manifest.json last; readers trust folders that have one.

    Every file in `folder` is listed: stages write into the fresh staging folder of `fresh_output`,
    so these are exactly the files this run wrote. `rows` (a glob -> the rows the stage's counts say
    its files hold) is checked first (`check_rows_written`).
    """
    check_rows_written(folder, kind, rows or {})
    files = {}
    for metadata in _match(folder, "*"):
        name = metadata.path[len(folder.rstrip("/")) + 1 :]
        if name != MANIFEST_FILE:
            files[name] = FileEntry(_sha256(metadata.path), metadata.size_in_bytes)
    document = manifest_document(kind, info, files)
    target = FileSystems.join(folder, MANIFEST_FILE)
    with FileSystems.create(target) as handle:
        handle.write(manifest_json(document).encode())
    return target


def read_stage_manifest(
    folder: str, kind: str, complete: bool = True, any_kind: bool = False
) -> dict[str, Any]:
    """A stage folder's manifest; with ``complete``, every file it lists must still be there, and unless
    ``any_kind`` the manifest must be of ``kind``.

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
    if manifest.get("kind") != kind and not any_kind:
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
    check_files_digest(manifest, FileSystems.join(folder, MANIFEST_FILE), fix)
    if is_local(folder):
        check_links_stay_inside(Path(folder), fix)
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


def counter_value(result: PipelineResult, name: str) -> int:
    """The committed value of a Beam counter, or its attempted value on a runner that reports only those
    (0 when it never fired): the row check (`check_rows_written`) must not read a runner's silence as 0."""
    counters = result.metrics().query(MetricsFilter().with_name(name))["counters"]
    return int(sum(c.committed if c.committed is not None else (c.attempted or 0) for c in counters))
