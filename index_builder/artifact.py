"""The on-disk index artifact: layout, manifest and integrity checks.

An index directory is self-describing, so a loader never has to be told what it is
loading, and it is verified before ScaNN touches it, so a truncated copy or a
half-written build fails with a message naming the file instead of returning wrong
neighbours::

    <dir>/manifest.json     written LAST: a directory without it is an unfinished build
    <dir>/ids.parquet       one column ``product_id``; row i is ScaNN datapoint i
    <dir>/scann/...         ScaNN's own files, serialised with relative paths (movable)

The manifest lists every other file with its sha256 and size. ScaNN loads whatever
it finds in ``scann/``, so files there that the manifest does not list are rejected too.
ScaNN also unpickles ``scann/scann_docids.pkl`` if one is there, running whatever code it
names; madr keeps ids in ``ids.parquet`` and never writes it, so it is refused even when a
(rewritten) manifest lists it. ScaNN opens the paths its ``scann_assets.pbtxt`` names, so each
must be a listed file inside ``scann/``; a symbolic link anywhere in the artifact is refused; and
the loader hands ScaNN a private copy of the bytes it hashed (`copy_verified_files`), or parses an
exact index's vectors from the bytes it hashed in memory (`read_verified_files`), so what is verified
is what is loaded.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from index_builder.config import ScannIndexConfig
from schemas.manifest import (
    MANIFEST_FILE,
    ArtifactError,
    FileEntry,
    digest_mismatch,
    file_entries,
    hash_files,
    manifest_document,
    manifest_json,
    parse_manifest,
)
from schemas.records import PRODUCT_SCHEMA

FORMAT_NAME = "madr-scann-index"
FORMAT_VERSION = 1
IDS_FILE = "ids.parquet"
SCANN_DIR = "scann"
# The file ScaNN's loader starts from; an artifact without it cannot be an index.
SCANN_ASSETS_FILE = f"{SCANN_DIR}/scann_assets.pbtxt"
# The pickle ScaNN's loader would unpickle: never written by madr, never accepted.
SCANN_PICKLE_FILE = f"{SCANN_DIR}/scann_docids.pkl"
REBUILD_HINT = "rebuild the index with `madr build-index`"

# The id column is the catalog's own product_id field, so the two cannot drift apart.
IDS_SCHEMA = pa.schema([PRODUCT_SCHEMA.field("product_id")])


class IndexArtifactError(ArtifactError):
    """An index directory is missing, incomplete, altered or of an unknown format.

    A subclass of the project-wide `schemas.ArtifactError`, so a driver can treat every
    bad artifact (model, shards, index, run) alike.
    """


@dataclass(frozen=True)
class IndexManifest:
    """What an index directory holds and how it was made."""

    model_id: str
    model_version: str
    dimension: int
    count: int
    config: ScannIndexConfig
    created_at: str
    scann_version: str
    files: dict[str, FileEntry]
    extra: dict[str, Any] = field(default_factory=dict)
    # What the build measured (`index_builder.recall.RecallReport.to_dict`); None: not measured
    # (an index saved without it, or one written before builds measured recall).
    recall: dict[str, Any] | None = None
    format: str = FORMAT_NAME
    format_version: int = FORMAT_VERSION

    def to_json(self) -> str:
        """The manifest as written (`schemas.manifest.manifest_document`, with "format" beside "kind")."""
        info = {
            "format": self.format,
            "format_version": self.format_version,
            "model_id": self.model_id,
            "model_version": self.model_version,
            "dimension": self.dimension,
            "count": self.count,
            "config": self.config.to_dict(),
            "scann_version": self.scann_version,
            "extra": self.extra,
        }
        if self.recall is not None:
            info["recall"] = self.recall
        return manifest_json(manifest_document(self.format, info, self.files, self.created_at))

    @classmethod
    def from_json(cls, text: str, source: Path) -> IndexManifest:
        """Parse and check a manifest; any defect is an IndexArtifactError naming ``source``."""
        try:
            data = parse_manifest(text, str(source), REBUILD_HINT)
            if data.get("format") != FORMAT_NAME or data.get("format_version") != FORMAT_VERSION:
                raise ValueError(
                    f"format is {data.get('format')!r} v{data.get('format_version')!r}, "
                    f"expected {FORMAT_NAME!r} v{FORMAT_VERSION}"
                )
            manifest = cls(
                model_id=str(data["model_id"]),
                model_version=str(data["model_version"]),
                dimension=int(data["dimension"]),
                count=int(data["count"]),
                config=ScannIndexConfig.from_dict(data["config"]),
                created_at=str(data["created_at"]),
                scann_version=str(data["scann_version"]),
                files=file_entries(data),
                extra=dict(data.get("extra") or {}),
                recall=None if data.get("recall") is None else dict(data["recall"]),
            )
        except ArtifactError as err:
            raise IndexArtifactError(str(err)) from err
        except (ValueError, KeyError, TypeError, AttributeError) as err:
            raise IndexArtifactError(
                f"{source} is not a valid index manifest ({err}); {REBUILD_HINT}"
            ) from err
        if (manifest.dimension, manifest.count) != (manifest.config.dimension, manifest.config.num_vectors):
            raise IndexArtifactError(f"{source}: dimension/count disagree with its config; {REBUILD_HINT}")
        return manifest


def file_entry(path: Path) -> FileEntry:
    return FileEntry.of(path)


def list_files(directory: Path) -> dict[str, FileEntry]:
    """sha256 and bytes of every file under ``directory`` except the manifest, keyed by posix relpath."""
    return hash_files(directory)


def prepare_directory(directory: Path) -> None:
    """Create an empty artifact directory; refuse a non-empty one so no stale file can slip in."""
    if directory.exists() and (not directory.is_dir() or any(directory.iterdir())):
        raise FileExistsError(f"{directory} exists and is not an empty directory; choose a new path")
    (directory / SCANN_DIR).mkdir(parents=True, exist_ok=True)


def write_ids(directory: Path, ids: list[str]) -> None:
    table = pa.table({"product_id": pa.array(ids, type=pa.string())}, schema=IDS_SCHEMA)
    pq.write_table(table, directory / IDS_FILE)


def read_ids(directory: Path, expected_count: int, contents: bytearray | None = None) -> list[str]:
    """The ids of `directory`'s ids.parquet, or of its verified `contents` when the loader read them."""
    path = directory / IDS_FILE
    try:
        table = pq.read_table(path if contents is None else pa.BufferReader(contents))
    except (OSError, pa.ArrowException) as err:
        raise IndexArtifactError(f"{path} cannot be read as Parquet ({err}); {REBUILD_HINT}") from err
    if table.schema.names != ["product_id"] or table.num_rows != expected_count:
        raise IndexArtifactError(
            f"{path} must hold one 'product_id' column of {expected_count} rows, got columns "
            f"{table.schema.names} and {table.num_rows} rows; {REBUILD_HINT}"
        )
    ids = table.column("product_id").to_pylist()
    if len(set(ids)) != len(ids) or not all(ids):
        raise IndexArtifactError(f"{path} has empty or repeated product ids; {REBUILD_HINT}")
    return ids


def write_manifest(directory: Path, manifest: IndexManifest) -> None:
    """Write the manifest atomically (temp file + rename): its presence means the build finished."""
    temporary = directory / f".{MANIFEST_FILE}.tmp"
    temporary.write_text(manifest.to_json(), encoding="utf-8")
    os.replace(temporary, directory / MANIFEST_FILE)


# One asset of ScaNN's asset file: `asset_path: "<path>"`, relative to scann/ (serialised so).
ASSET_PATH_LINE = re.compile(r'^\s*asset_path:\s*"([^"\\]*)"\s*$')


def check_asset_paths(directory: Path, listed: set[str]) -> None:
    """Every path ScaNN's asset file names is a listed file inside scann/: ScaNN opens what it says,
    so a path like "../../elsewhere/dataset.npy" would load vectors from outside the artifact."""
    path = directory / SCANN_ASSETS_FILE
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if "asset_path" not in line:
            continue
        match = ASSET_PATH_LINE.match(line)
        asset = PurePosixPath(match.group(1)) if match else None
        inside = asset is not None and not asset.is_absolute() and ".." not in asset.parts
        if not inside or f"{SCANN_DIR}/{asset.as_posix()}" not in listed:
            raise IndexArtifactError(
                f"{path}:{number} names an asset outside the index's listed files ({line.strip()}); "
                f"ScaNN would load it. {REBUILD_HINT}"
            )


def check_no_links(directory: Path) -> None:
    """Refuse an artifact that is, or holds, a symbolic link: its bytes could change or lie outside it."""
    linked = [directory] if directory.is_symlink() else []
    linked += sorted(path for path in directory.rglob("*") if path.is_symlink())
    if linked:
        raise IndexArtifactError(
            f"{linked[0]} is a symbolic link; an index artifact holds its own files. Copy the index "
            f"without links, or {REBUILD_HINT}"
        )


def read_verified_manifest(directory: Path) -> IndexManifest:
    """Read the manifest and check the artifact against it: every listed file present at its size, no
    pickle, link, unlisted or escaping file; raise IndexArtifactError on any mismatch.

    The files' sha256 are checked by the loader as it reads them (`copy_verified_files`,
    `read_verified_files`), so a gigabyte of vectors is read and hashed once, not twice.
    """
    if not directory.is_dir():
        raise IndexArtifactError(f"index directory {directory} does not exist; {REBUILD_HINT}")
    check_no_links(directory)
    manifest_path = directory / MANIFEST_FILE
    if not manifest_path.is_file():
        raise IndexArtifactError(
            f"{manifest_path} is missing: the directory is not a finished index "
            f"(the manifest is written last); {REBUILD_HINT}"
        )
    pickled = directory / SCANN_PICKLE_FILE
    if pickled.exists():  # even when listed: a matching sha256 proves the bytes unchanged, not harmless
        raise IndexArtifactError(
            f"{pickled} is a pickle, which ScaNN would unpickle (running any code in it) on load; "
            f"madr never writes one. Remove it or {REBUILD_HINT}"
        )
    manifest = IndexManifest.from_json(manifest_path.read_text(encoding="utf-8"), manifest_path)
    for required in (IDS_FILE, SCANN_ASSETS_FILE):
        if required not in manifest.files:
            raise IndexArtifactError(f"{manifest_path} does not list {required}; {REBUILD_HINT}")
    for relative, expected in manifest.files.items():
        parts = PurePosixPath(relative).parts
        if PurePosixPath(relative).is_absolute() or ".." in parts or relative == MANIFEST_FILE:
            raise IndexArtifactError(f"{manifest_path} lists an invalid path {relative!r}; {REBUILD_HINT}")
        path = directory / relative
        if not path.is_file():
            raise IndexArtifactError(f"{path} is missing from the index artifact; {REBUILD_HINT}")
        size = path.stat().st_size
        if size != expected.bytes:
            raise IndexArtifactError(
                f"{path} is {size} bytes, which does not match the manifest's {expected.bytes}: the "
                f"artifact was changed after it was written; {REBUILD_HINT}"
            )
    check_asset_paths(directory, set(manifest.files))
    unlisted = sorted(
        path.relative_to(directory).as_posix()
        for path in (directory / SCANN_DIR).rglob("*")
        if path.is_file() and path.relative_to(directory).as_posix() not in manifest.files
    )
    if unlisted:
        raise IndexArtifactError(
            f"{directory / SCANN_DIR} holds files the manifest does not list ({', '.join(unlisted)}); "
            f"ScaNN would load them. Remove them or {REBUILD_HINT}"
        )
    return manifest


def _verified_contents(
    directory: Path, manifest: IndexManifest, prefix: str = ""
) -> Iterator[tuple[str, bytearray]]:
    """(relative path, bytes) of each listed file under `prefix`, one at a time, each read once into a
    writable buffer and checked against the manifest's size and sha256 as read."""
    for relative, expected in manifest.files.items():
        if not relative.startswith(prefix):
            continue
        path = directory / relative
        data = bytearray(expected.bytes)
        with path.open("rb") as reader:
            read = reader.readinto(data)
            extra = reader.read(1)
        if read != expected.bytes or extra:
            raise IndexArtifactError(f"{path} changed size while it was read; {REBUILD_HINT}")
        actual = hashlib.sha256(data).hexdigest()
        if actual != expected.sha256:  # worded like every other artifact's (schemas.manifest)
            raise IndexArtifactError(digest_mismatch(str(path), actual, expected.sha256, REBUILD_HINT))
        yield relative, data


def copy_verified_files(directory: Path, manifest: IndexManifest, prefix: str, target: Path) -> None:
    """Copy the listed files under `prefix` into `target`, hashing the bytes as they are copied.

    What a loader then opens in `target` is exactly what was checked: a file swapped or planted in
    `directory` between verification and loading never reaches it (`target` should be private, e.g.
    a `tempfile.TemporaryDirectory`, mode 0700).
    """
    for relative, data in _verified_contents(directory, manifest, prefix):
        destination = target / relative
        destination.parent.mkdir(parents=True, exist_ok=True)
        destination.write_bytes(data)


def read_verified_files(directory: Path, manifest: IndexManifest) -> dict[str, bytearray]:
    """Every listed file's bytes, read once into memory and hashed as read: {relative path: bytes}.

    The in-memory counterpart of `copy_verified_files`, for a loader that parses the bytes itself (the
    exact searcher's vectors): nothing changed in `directory` after the check reaches it, and the
    vectors are not written to a private copy and read back. The buffers are writable, so arrays made
    over them are too.
    """
    return dict(_verified_contents(directory, manifest))


def read_verified_file(directory: Path, manifest: IndexManifest, relative: str) -> bytearray:
    """One listed file's bytes, read once and hashed as read (`read_verified_files` for one file)."""
    if relative not in manifest.files:
        raise IndexArtifactError(f"{directory / relative} is not listed in its manifest; {REBUILD_HINT}")
    return next(data for name, data in _verified_contents(directory, manifest, relative) if name == relative)


def read_verified_ids(directory: Path) -> tuple[IndexManifest, list[str]]:
    """An index artifact's manifest and product ids, both verified, without reading its vectors."""
    manifest = read_verified_manifest(directory)
    with tempfile.TemporaryDirectory(prefix="madr-ids-") as private:
        copy_verified_files(directory, manifest, IDS_FILE, Path(private))
        return manifest, read_ids(Path(private), manifest.count)
