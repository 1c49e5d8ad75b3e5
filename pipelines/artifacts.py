"""Stage outputs as artifacts: fresh output folders, manifests written last, and reading shards back.

Works through Beam's FileSystems, so an output folder may be local or gs://.

Every stage writes its output folder through `fresh_output`: a non-empty folder is refused unless
the user passes --overwrite, the files are written into a hidden sibling staging folder, and only a
run that succeeds moves them into place. So an output folder holds exactly one run's files, and
its manifest (which lists the folder's files) never takes in a stale shard of an earlier run.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import json
import logging
import os
import re
import shutil
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.runners.runner import PipelineResult

from pipelines.writer_lock import HeldObjectLock, exclusive_writer
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

LOGGER = logging.getLogger(__name__)
STAGING_SUFFIX = ".staging"
_REPLACED_SUFFIX = ".replaced"


def counter_value(result: PipelineResult, name: str) -> int:
    """The committed value of a Beam counter, or its attempted value on a runner that reports only those
    (0 when it never fired): the row check (`check_rows_written`) must not read a runner's silence as 0."""
    counters = result.metrics().query(MetricsFilter().with_name(name))["counters"]
    return int(sum(c.committed if c.committed is not None else (c.attempted or 0) for c in counters))


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


def is_local(path: str) -> bool:
    """True for a plain local path; anything with a scheme (gs://, file://, ...) goes through FileSystems."""
    return FileSystems.get_scheme(path) is None


# An OS error as Beam re-raises a worker's: only its text is left, "OSError: [Errno 28] No space left on
# device: 'path' [while running 'Step']".
_WRAPPED_OS_ERROR = re.compile(r"\[Errno (\d+)\] ([^\[\]:]+)(?:: '([^']*)')?")


def wrapped_os_error(error: BaseException) -> OSError | None:
    """The OS error behind `error` (a full disk, a denied permission), when it has one: in its chain of
    causes, or in the text Beam keeps of an error raised on a worker."""
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, OSError):
            return seen
        found = _WRAPPED_OS_ERROR.search(str(seen))
        if found:
            return OSError(int(found.group(1)), found.group(2).strip(), found.group(3))
        seen = seen.__cause__ or seen.__context__
    return None


def is_disk_full(error: BaseException) -> bool:
    """Whether `error` is, or was caused by, a full disk (ENOSPC)."""
    found = wrapped_os_error(error)
    return found is not None and found.errno == errno.ENOSPC


class OutputNotEmpty(FileExistsError):
    """An output folder that already holds files, and no --overwrite."""


def staging_folder(target: str) -> str:
    """The hidden sibling a stage writes `target`'s files into before they are moved into place.

    A sibling, so the move stays on one filesystem (a rename) or in one bucket. Its name is fixed
    rather than random, so that a rerun finds what a failed or killed run left there: a stage
    clears it, training resumes from its checkpoint. That is safe because `fresh_output` holds the
    target's write lock (`pipelines.writer_lock`): a second run into the same target is refused
    before it touches the staging folder (on local disk; see that module for object stores).
    """
    parent, name = FileSystems.split(target.rstrip("/"))
    if not name or name in (".", ".."):
        raise ValueError(f"output folder {target!r} must be a folder below a bucket or directory root")
    return FileSystems.join(parent, f".{name}{STAGING_SUFFIX}")


def _files_under(folder: str) -> list[str]:
    """Every file under `folder`, subfolders included; [] when it does not exist."""
    if is_local(folder):
        return sorted(os.path.join(root, name) for root, _dirs, names in os.walk(folder) for name in names)
    found = FileSystems.match([folder.rstrip("/") + "/**"])[0].metadata_list
    # Objects named ".../" are folder placeholders some GCS tools create, not files.
    return sorted(metadata.path for metadata in found if not metadata.path.endswith("/"))


def _holds_anything(folder: str) -> bool:
    if is_local(folder):
        # Anything at all, hidden files and empty subfolders included: a folder is not ours to merge into.
        return os.path.isdir(folder) and any(os.scandir(folder))
    return bool(_files_under(folder))


def remove_folder(folder: str) -> None:
    """Delete `folder` and everything under it (on an object store: every object under the prefix)."""
    if is_local(folder):
        if os.path.isdir(folder):
            shutil.rmtree(folder)
        return
    found = _files_under(folder)
    if found:
        FileSystems.delete(found)


def _move_into_place(staging: str, target: str) -> None:
    """Replace `target` by `staging`. Locally two renames (the old folder goes only once the new one
    is in place); on an object store each object is copied and deleted, manifests last."""
    if is_local(target):
        os.makedirs(staging, exist_ok=True)  # a run that wrote nothing still leaves an (empty) folder
        replaced = staging[: -len(STAGING_SUFFIX)] + _REPLACED_SUFFIX
        remove_folder(replaced)
        if os.path.lexists(target):
            os.rename(target, replaced)
        os.rename(staging, target)
        remove_folder(replaced)
        return
    remove_folder(target)
    prefix = staging.rstrip("/") + "/"
    names = [path[len(prefix) :] for path in _files_under(staging)]

    def order(name: str) -> tuple[bool, int]:
        # Data first, then nested manifests (index shards), the folder's own manifest last: a reader
        # that finds a manifest may then trust every file it lists to be in place.
        is_manifest = name.rsplit("/", 1)[-1] == MANIFEST_FILE
        return is_manifest, -name.count("/") if is_manifest else 0

    for _, batch in itertools.groupby(sorted(names, key=order), key=order):
        moved = list(batch)
        destinations = [FileSystems.join(target, name) for name in moved]
        FileSystems.rename([prefix + name for name in moved], destinations)


@contextlib.contextmanager
def fresh_output(
    target: str, overwrite: bool = False, resumable: Callable[[str], bool] | None = None
) -> Iterator[str]:
    """The folder to write `target`'s files into; they replace `target` when the block succeeds.

    A `target` that already holds anything is refused (`OutputNotEmpty`) unless `overwrite`: its
    files would otherwise mix with this run's, and a manifest would list both. The block writes
    into `staging_folder(target)`, which is cleared first unless `resumable(staging)` says that
    what a failed run left there can be resumed (training: a checkpoint, which is checked to be of
    the same run before use). On success the staging folder becomes `target`; on failure `target`
    is left as it was and the staging folder keeps what the run wrote (dead letters, say).
    """
    if is_local(target) and os.path.islink(target.rstrip("/")):
        # Replacing it would replace the link, not the folder it names (and rmtree refuses links).
        raise OutputNotEmpty(
            f"{target} is a symbolic link (to {os.path.realpath(target)}); give the folder itself or "
            "another path as the output"
        )
    if is_local(target) and os.path.lexists(target) and not os.path.isdir(target):
        raise OutputNotEmpty(f"{target} is a file, not a folder; choose a folder for the output")
    try:
        with exclusive_writer(target, f"a madr stage writing {target}") as held:
            yield from _fresh_output_locked(target, overwrite, resumable, held)
    except Exception as error:
        if not is_disk_full(error):
            raise
        # Said of the output, whichever write hit the full disk: Beam keeps only the error's text.
        raise OSError(
            errno.ENOSPC, "No space left on device (what this run had written was removed)", target
        ) from error


def _fresh_output_locked(
    target: str, overwrite: bool, resumable: Callable[[str], bool] | None, held: HeldObjectLock | None = None
) -> Iterator[str]:
    """`fresh_output`, once this process is the only writer of `target` (and so of its staging folder)."""
    if not overwrite and _holds_anything(target):
        raise OutputNotEmpty(
            f"{target} is not empty; write to a new folder, or pass --overwrite to replace it"
        )
    staging = staging_folder(target)
    if resumable is None or not resumable(staging):
        remove_folder(staging)  # what a failed or killed earlier run left
    if is_local(staging):
        os.makedirs(staging, exist_ok=True)
    try:
        yield staging
    except BaseException as error:
        if is_disk_full(error):
            remove_folder(staging)  # what it wrote only takes the space the next run needs
            raise
        if not _files_under(staging):
            remove_folder(staging)
        else:
            then = "the next run resumes from it" if resumable else "the next run into the folder clears it"
            LOGGER.warning("%s not written; what the failed run wrote is in %s (%s)", target, staging, then)
        raise
    if held is not None:  # gs://: moved into place only while the lock is still this run's
        held.check()
    _move_into_place(staging, target)
