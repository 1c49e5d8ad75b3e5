"""Manifests: every artifact directory (model, shards, index, run) says what it is.

A manifest is written last, after every file it lists, so a directory without one
is an unfinished artifact. It records the artifact kind, free-form provenance and
the sha256 and size of every file, which `verify_manifest` checks on load.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from pathlib import Path
from typing import Any

MANIFEST_FILE = "manifest.json"


class ArtifactError(RuntimeError):
    """An artifact directory that is incomplete, altered, or of the wrong kind."""


def sha256_file(path: Path, chunk_size: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(chunk_size):
            digest.update(chunk)
    return digest.hexdigest()


def write_manifest(directory: str | Path, kind: str, info: dict[str, Any]) -> Path:
    """Hash every file under `directory` (except the manifest) and write the manifest last."""
    root = Path(directory)
    files = {
        str(path.relative_to(root)): {"sha256": sha256_file(path), "bytes": path.stat().st_size}
        for path in sorted(root.rglob("*"))
        if path.is_file() and path.name != MANIFEST_FILE
    }
    manifest = {
        "kind": kind,
        "created_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        **info,
        "files": files,
    }
    target = root / MANIFEST_FILE
    temporary = root / (MANIFEST_FILE + ".tmp")
    temporary.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    temporary.replace(target)  # readers never see a half-written manifest
    return target


def read_manifest(directory: str | Path, kind: str) -> dict[str, Any]:
    path = Path(directory) / MANIFEST_FILE
    if not path.is_file():
        raise ArtifactError(f"{directory} has no {MANIFEST_FILE}: it is not a finished {kind} artifact")
    manifest = json.loads(path.read_text())
    if manifest.get("kind") != kind:
        raise ArtifactError(f"{directory} holds a {manifest.get('kind')!r} artifact, expected {kind!r}")
    return manifest


def verify_manifest(directory: str | Path, kind: str) -> dict[str, Any]:
    """Check every listed file's presence and sha256; return the manifest."""
    root = Path(directory)
    manifest = read_manifest(root, kind)
    for name, expected in manifest["files"].items():
        path = root / name
        if not path.is_file():
            raise ArtifactError(f"{kind} artifact {root}: {name} is missing; rebuild the artifact")
        if sha256_file(path) != expected["sha256"]:
            raise ArtifactError(
                f"{kind} artifact {root}: {name} was altered after it was written "
                "(sha256 differs from the manifest); rebuild the artifact"
            )
    return manifest
