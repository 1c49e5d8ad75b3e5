"""OUT/LATEST: the pointer serving reads to find the current run, and the rules for moving it.

The pointer is one small JSON object written in one step (a rename locally, a single-object write on
an object store), so a reader sees the old run or the new one, never half of either. Its `path` is
relative to the root (the run folder's name), so a reader anywhere resolves it with `latest_run_folder`
(pointers written before this said a path relative to the writer's working directory; their `run_id`
is what is used).

A run replaces LATEST only if it still holds what the run read when it started (`LatestChanged`
otherwise): the nightly's root lock keeps two runs apart, and this check keeps a run from overwriting one
published behind its back. On gs:// the check and the write are one compare-and-swap on the object's
generation (`pipelines.storage.object_store`).
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from apache_beam.io.filesystems import FileSystems

from pipelines.storage.object_store import PreconditionFailed, read_with_generation, write_if_generation
from pipelines.storage.staged_output import is_local
from schemas.manifest import ArtifactError
from schemas.names import UnsafeName, checked_name

LATEST = "LATEST"


class LatestChanged(ArtifactError):
    """LATEST moved while this run was working: the run is finished but not published."""


def read_latest(out: str) -> dict[str, Any] | None:
    """The LATEST pointer of a nightly root, or None before the first successful run."""
    path = FileSystems.join(out, LATEST)
    if not FileSystems.exists(path):
        return None
    with FileSystems.open(path) as handle:
        latest = json.loads(handle.read())
    try:
        checked_name(latest.get("run_id") if isinstance(latest, dict) else None, "its run_id")
    except UnsafeName as error:
        # Every folder a run reads or writes is joined from this id: one that is not a name is refused.
        raise ArtifactError(f"{path} is not a LATEST pointer madr wrote: {error}") from None
    return latest


def latest_run_folder(out: str) -> str | None:
    """The folder of the run LATEST points to, wherever the reader is; None before the first run."""
    latest = read_latest(out)
    return None if latest is None else FileSystems.join(out, str(latest["run_id"]))


def publish_latest(out: str, run_id: str, summary: dict[str, Any], expected: dict[str, Any] | None) -> None:
    """Point LATEST at a finished run in one atomic step, if it still holds `expected` (what the run
    read when it started; None: no LATEST yet).

    On gs:// the check and the write are one compare-and-swap (`pipelines.storage.object_store`): the pointer
    is written only if its generation is the one whose content was compared, so of two runs that both
    found `expected`, one publishes and the other is told LATEST changed."""
    target = FileSystems.join(out, LATEST)
    generation = None
    if out.startswith("gs://"):
        data, generation = read_with_generation(target)
        found = None if data is None else json.loads(data)
    else:
        found = read_latest(out)
    if found != expected:
        raise _changed(out, run_id, found, expected)
    pointer = {
        "run_id": run_id,
        "path": run_id,  # relative to the root: readers resolve it with `latest_run_folder`
        "published_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        **summary,
    }
    data = (json.dumps(pointer, indent=2, sort_keys=True) + "\n").encode()
    if generation is not None:
        try:
            write_if_generation(target, data, generation)
        except PreconditionFailed:
            now, _ = read_with_generation(target)
            raise _changed(out, run_id, None if now is None else json.loads(now), expected) from None
    elif is_local(out):
        staging = f"{target}.{run_id}.tmp"  # per run: never one another's half-written file
        with FileSystems.create(staging) as handle:
            handle.write(data)
        FileSystems.rename([staging], [target])  # os.rename: atomic on one filesystem
    else:  # another object store: one object write, readers see old or new (no compare-and-swap)
        with FileSystems.create(target) as handle:
            handle.write(data)


def _changed(
    out: str, run_id: str, found: dict[str, Any] | None, expected: dict[str, Any] | None
) -> LatestChanged:
    now = f"run {found['run_id']}, published {found.get('published_at')}" if found else "nothing"
    then = f"run {expected['run_id']}" if expected else "nothing"
    return LatestChanged(
        f"{FileSystems.join(out, LATEST)} changed while run {run_id} was working (it pointed to {then}, "
        f"now to {now}); run {run_id} is finished but not published, so as not to replace a run "
        f"published since. Check which run should be current, then rerun with --run_id {run_id} to "
        "publish it (its finished stages are skipped)"
    )
