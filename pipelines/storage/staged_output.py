"""A stage's output folder, written whole or not at all: `fresh_output`.

Works through Beam's FileSystems, so an output folder may be local or gs://. A non-empty folder is
refused unless the user passes --overwrite, the files are written into a hidden sibling staging
folder, and only a run that succeeds moves them into place. So an output folder holds exactly one
run's files, and its manifest (which lists the folder's files) never takes in a stale shard of an
earlier run. Also: what a full disk or a denied permission looks like after Beam re-raised it.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import logging
import os
import re
import shutil
from collections.abc import Callable, Iterator

from apache_beam.io.filesystems import FileSystems

from pipelines.storage.writer_lock import HeldObjectLock, exclusive_writer
from schemas.manifest import (
    MANIFEST_FILE,
)

LOGGER = logging.getLogger(__name__)


STAGING_SUFFIX = ".staging"


_REPLACED_SUFFIX = ".replaced"


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
    target's write lock (`pipelines.storage.writer_lock`): a second run into the same target is refused
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
