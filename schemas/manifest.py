"""Manifests: every artifact directory (model, shards, index, dataset, run) says what it is.

A manifest is written last, after every file it lists, so a directory without one
is an unfinished artifact. It records the artifact kind, free-form provenance, a
`FileEntry` (sha256 and bytes) for every file, and one digest over those entries.

This module is the one manifest API. Every writer builds its document with
`manifest_document` and serialises it with `manifest_json`: `write_manifest` for local
directories (a model, a dataset, a benchmark), `pipelines.storage.stage_manifests.write_stage_manifest`
through Beam's FileSystems (stage folders, local or gs://), and the index artifacts of
`index_builder`, whose manifests add their own typed fields. It is also the one place that
hashes artifact files and checks them against a manifest: `verify_manifest` for local
directories, and `verify_files` for any storage a caller can list and open. Every mismatch
reads the same way (`digest_mismatch`), the index artifact's own checks included.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

MANIFEST_FILE = "manifest.json"
# The manifest field holding `files_digest`: one sha256 over every file entry, which binds an
# artifact's files to each other (a file swapped in from another artifact, with its entry, fails).
FILES_DIGEST = "files_digest"
# Files hashed at once by `verify_files`: reads from gs:// are latency-bound, and hashlib releases
# the GIL on large buffers, so a few threads overlap them without holding many files in memory.
HASH_THREADS = 8


class ArtifactError(RuntimeError):
    """An artifact directory that is incomplete, altered, or of the wrong kind."""


def sha256_stream(handle: BinaryIO, chunk_size: int = 1 << 20) -> str:
    """The sha256 of everything left in an open binary file (local, gs://, any file-like object)."""
    digest = hashlib.sha256()
    while chunk := handle.read(chunk_size):
        digest.update(chunk)
    return digest.hexdigest()


def sha256_file(path: Path, chunk_size: int = 1 << 20) -> str:
    with Path(path).open("rb") as handle:
        return sha256_stream(handle, chunk_size)


def digest_mismatch(path: str, actual: str, expected: str, fix: str) -> str:
    """What is said of a file whose bytes are not the ones its manifest recorded: both hashes, the fix."""
    return (
        f"{path}: sha256 {actual} does not match the manifest's {expected}; "
        f"the artifact was changed after it was written: {fix}"
    )


@dataclass(frozen=True)
class FileEntry:
    """One file of an artifact as its manifest lists it."""

    sha256: str
    bytes: int

    @classmethod
    def of(cls, path: Path) -> FileEntry:
        return cls(sha256_file(path), Path(path).stat().st_size)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FileEntry:
        # "size": the key index manifests used before every writer shared this entry.
        return cls(str(data["sha256"]), int(data["bytes"] if "bytes" in data else data["size"]))

    def to_dict(self) -> dict[str, Any]:
        return {"sha256": self.sha256, "bytes": self.bytes}


def hash_files(root: Path) -> dict[str, FileEntry]:
    """A `FileEntry` for every file under `root` (subfolders included) but its manifest, by posix path."""
    return {
        path.relative_to(root).as_posix(): FileEntry.of(path)
        for path in sorted(Path(root).rglob("*"))
        if path.is_file() and path.relative_to(root).as_posix() not in (MANIFEST_FILE, MANIFEST_FILE + ".tmp")
    }


def manifest_document(
    kind: str,
    info: Mapping[str, Any],
    files: Mapping[str, FileEntry],
    created_at: str | None = None,
) -> dict[str, Any]:
    """The manifest of a `kind` artifact: `info` (provenance, counts, identity), its files and their
    digest. `created_at` defaults to now (UTC); a writer whose output must be byte-identical from run
    to run (the synthetic benchmark) passes a fixed one."""
    entries = {name: entry.to_dict() for name, entry in sorted(files.items())}
    return {
        "kind": kind,
        "created_at": created_at or dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        **info,
        "files": entries,
        FILES_DIGEST: files_digest(entries),
    }


def manifest_json(document: Mapping[str, Any]) -> str:
    """A manifest as every writer stores it: sorted keys, indented, one trailing newline."""
    return json.dumps(document, indent=2, sort_keys=True, default=str) + "\n"


def file_entries(manifest: Mapping[str, Any]) -> dict[str, FileEntry]:
    """A manifest's file entries, whichever writer wrote them."""
    return {name: FileEntry.from_dict(entry) for name, entry in (manifest.get("files") or {}).items()}


def files_digest(files: Mapping[str, Mapping[str, Any]]) -> str:
    """One sha256 over a manifest's file entries (each name and sha256, in name order).

    Each entry pins one file's bytes; this pins the set. A manifest records it when written, and
    `check_files_digest` recomputes it on every read: an entry copied in from another artifact (with
    the file it describes) then no longer matches. It is also a model's fingerprint
    (`pipelines.storage.verify.model_fingerprint`), which embeddings and indexes record.
    """
    lines = (f"{name} {entry['sha256']}" for name, entry in sorted(files.items()))
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


def check_files_digest(manifest: Mapping[str, Any], source: str, fix: str) -> None:
    """Refuse a manifest whose file entries are not the set it was written with (`files_digest`).

    A manifest written before madr recorded the digest is let through: its files are still checked
    one by one, only not bound to each other.
    """
    recorded = manifest.get(FILES_DIGEST)
    if recorded is None:
        return
    actual = files_digest(manifest.get("files") or {})
    if actual != recorded:
        raise ArtifactError(
            f"{source}: the files it lists are not the ones it was written with (their digest is "
            f"{actual}, the manifest's {FILES_DIGEST} {recorded}): a file and its entry were swapped "
            f"in from another artifact: {fix}"
        )


def parse_manifest(text: str, source: str, fix: str) -> dict[str, Any]:
    """A manifest's JSON object, its file entries checked against its digest (`check_files_digest`).
    ValueError for text that is not a JSON object, ArtifactError for entries that do not belong together."""
    data = json.loads(text)
    if not isinstance(data, dict):
        raise ValueError("the manifest is not a JSON object")
    check_files_digest(data, source, fix)
    return data


def write_manifest(
    directory: str | Path, kind: str, info: Mapping[str, Any], created_at: str | None = None
) -> Path:
    """Hash every file under `directory` (except the manifest) and write the manifest last."""
    root = Path(directory)
    document = manifest_document(kind, info, hash_files(root), created_at)
    target = root / MANIFEST_FILE
    temporary = root / (MANIFEST_FILE + ".tmp")
    temporary.write_text(manifest_json(document))
    temporary.replace(target)  # readers never see a half-written manifest
    return target


def read_manifest(directory: str | Path, kind: str, fix: str | None = None) -> dict[str, Any]:
    """The manifest of `directory`, which must be a finished `kind` artifact; `fix` ends the errors."""
    root = Path(directory)
    advice = f": {fix}" if fix else ""
    if not root.is_dir():
        raise ArtifactError(f"{directory} is not a directory, so not a {kind} artifact{advice}")
    path = root / MANIFEST_FILE
    if not path.is_file():
        raise ArtifactError(
            f"{directory} has no {MANIFEST_FILE}: it is not a finished {kind} artifact{advice}"
        )
    manifest = json.loads(path.read_text())
    if manifest.get("kind") != kind:
        raise ArtifactError(
            f"{directory} holds a {manifest.get('kind')!r} artifact, expected {kind!r}{advice}"
        )
    return manifest


def verify_files(
    listed: Mapping[str, Mapping[str, Any]],
    present: Iterable[str],
    path_of: Callable[[str], str],
    sha256_of: Callable[[str], str],
    fix: str,
    allow_unlisted: bool = False,
    hashed_by_reader: Callable[[str], bool] | None = None,
) -> None:
    """Every file a manifest lists is present with the sha256 it records; raise `ArtifactError` if not.

    `listed` is the manifest's "files", `present` the names the folder holds now, `path_of` a
    name's full path and `sha256_of` a path's hash. Without `allow_unlisted`, a file the manifest
    does not list is refused too: readers take files by name or by glob, so a planted or stale
    file would be used without ever being checked. A name for which `hashed_by_reader` is true is
    checked present here and hashed by its reader, once, as it reads it (hashing it here too read it twice).
    """
    on_disk = set(present)
    missing = sorted(set(listed) - on_disk)
    if missing:
        raise ArtifactError(f"{path_of(missing[0])} is listed in the {MANIFEST_FILE} but missing: {fix}")
    unlisted = sorted(on_disk - set(listed) - {MANIFEST_FILE})
    if unlisted and not allow_unlisted:
        raise ArtifactError(
            f"{path_of(unlisted[0])} is not listed in the {MANIFEST_FILE}"
            + (f" (nor are {len(unlisted) - 1} more)" if len(unlisted) > 1 else "")
            + f"; it was added after the artifact was written: remove it, or {fix}"
        )
    names = sorted(name for name in listed if hashed_by_reader is None or not hashed_by_reader(name))
    if not names:
        return
    with ThreadPoolExecutor(max_workers=max(1, min(HASH_THREADS, len(names)))) as pool:
        # In name order, so the first mismatch reported is the same on every run.
        for name, actual in zip(names, pool.map(lambda n: sha256_of(path_of(n)), names), strict=True):
            expected = str(listed[name]["sha256"])
            if actual != expected:
                raise ArtifactError(digest_mismatch(path_of(name), actual, expected, fix))


def check_links_stay_inside(root: Path, fix: str) -> None:
    """Refuse a symbolic link inside an artifact that leads outside it: its bytes are not the artifact's
    to vouch for, and could change under it. The artifact folder itself may be a link (a `current`
    pointing to a version); what is inside is judged by resolved paths."""
    inside = root.resolve()
    for path in sorted(root.rglob("*")):
        if path.is_symlink() and not path.resolve().is_relative_to(inside):
            raise ArtifactError(
                f"{path} is a symbolic link to {path.resolve()}, outside {root}; an artifact holds its own "
                f"files: copy them in without links, or {fix}"
            )


def verify_manifest(
    directory: str | Path,
    kind: str,
    fix: str = "rebuild the artifact",
    allow_unlisted: bool = True,
    hashed_by_reader: Callable[[str], bool] | None = None,
) -> dict[str, Any]:
    """Check every listed file's presence and sha256 (and, unless `allow_unlisted`, that nothing was
    added); return the manifest. `hashed_by_reader`: as `verify_files`'."""
    root = Path(directory)
    manifest = read_manifest(root, kind, fix)
    check_files_digest(manifest, str(root / MANIFEST_FILE), fix)
    check_links_stay_inside(root, fix)
    present = (path.relative_to(root).as_posix() for path in root.rglob("*") if path.is_file())
    verify_files(
        manifest["files"],
        present,
        lambda name: str(root / name),
        lambda path: sha256_file(Path(path)),
        fix,
        allow_unlisted,
        hashed_by_reader,
    )
    return manifest
