"""Compare-and-swap on gs:// objects: what makes an object-store root as safe as a local one.

A local root replaces LATEST by a rename and locks writers with `flock`; an object store has neither.
GCS has the equivalent per object: a write or delete sent with `ifGenerationMatch=G` takes effect only
if the object's live generation is still G (0: no live object), else 412 Precondition Failed and
nothing changes (https://cloud.google.com/storage/docs/request-preconditions). `pipelines.nightly.latest`
swaps LATEST with it, `pipelines.storage.writer_lock` takes and keeps its lock object with it. Beam's
FileSystems has no such call, so these use google-cloud-storage directly (a client per call: the
credentials are the environment's, the emulator's in tests).
"""

from __future__ import annotations

from typing import Any

NO_OBJECT = 0  # the generation ifGenerationMatch takes for "the object does not exist"


class PreconditionFailed(RuntimeError):
    """The object changed (or appeared, or went) since the generation the caller read."""


def _bucket_and_name(path: str) -> tuple[Any, str]:
    from google.cloud import storage

    if not path.startswith("gs://") or "/" not in path[5:]:
        raise ValueError(f"{path} is not a gs://bucket/object path")
    bucket, name = path[5:].split("/", 1)
    return storage.Client().bucket(bucket), name


def _blob(path: str) -> Any:
    bucket, name = _bucket_and_name(path)
    return bucket.blob(name)


def read_with_generation(path: str, attempts: int = 5) -> tuple[bytes | None, int]:
    """The object's bytes and the generation they are of; (None, NO_OBJECT) when there is none.

    The metadata is read first, then that generation's bytes (`ifGenerationMatch`): an object replaced
    in between is read again, so the bytes and the generation always belong together."""
    from google.api_core import exceptions

    bucket, name = _bucket_and_name(path)
    for _ in range(attempts):
        blob = bucket.get_blob(name)
        if blob is None:
            return None, NO_OBJECT
        generation = int(blob.generation)  # before the download, which resets it from response headers
        try:
            return blob.download_as_bytes(if_generation_match=generation), generation
        except (exceptions.PreconditionFailed, exceptions.NotFound):
            continue
    raise PreconditionFailed(f"{path} kept changing while it was read ({attempts} attempts)")


def write_if_generation(path: str, data: bytes, generation: int) -> int:
    """Write `data` if the object's live generation is `generation`; its new generation.

    Raises `PreconditionFailed` when another writer got there first. The client retries a conditional
    upload whose response was lost, and the retry then fails the precondition its own first attempt
    moved: so a 412 over an object holding exactly `data` is this write's success (callers' data carry
    their writer and time, so another writer's bytes are never the same)."""
    from google.api_core import exceptions

    blob = _blob(path)
    try:
        blob.upload_from_string(data, if_generation_match=generation)
    except exceptions.PreconditionFailed as error:
        found, live = read_with_generation(path)
        if found == data:
            return live
        raise PreconditionFailed(f"{path} changed since generation {generation}") from error
    return int(blob.generation)


def delete_if_generation(path: str, generation: int) -> None:
    """Delete the object if its live generation is `generation` (a missing object is left missing)."""
    from google.api_core import exceptions

    try:
        _blob(path).delete(if_generation_match=generation)
    except exceptions.NotFound:
        return
    except exceptions.PreconditionFailed as error:
        raise PreconditionFailed(f"{path} changed since generation {generation}") from error


__all__ = [
    "NO_OBJECT",
    "PreconditionFailed",
    "delete_if_generation",
    "read_with_generation",
    "write_if_generation",
]
