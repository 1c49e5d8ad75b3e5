"""One writer at a time: an exclusive lock beside whatever a madr process is writing.

Two processes writing one output folder (or two nightlies on one root) undo each other: one clears the
staging folder the other is writing, or replaces a pointer the other just moved. So a stage takes
`exclusive_writer` on its output folder for as long as it writes (`artifacts.fresh_output`), and the
nightly takes it on its root. A second writer is refused at once, with the holder's pid, host and start
time and the way out, never made to wait: a scheduler that started two runs should hear about it.

The lock is an `fcntl.flock` on a hidden sibling file (`.NAME.lock`). The kernel drops it when its
holder exits, however it exits (kill -9 included), so a crashed run never leaves a stale lock behind.
The file is removed on release; a taker checks that the file it locked is still the one at the path,
so a release racing with a new taker cannot hand the lock to two processes.

Local paths only: object stores (gs://) have no advisory locks. There the runs must be serialised by
their scheduler, as Dataflow jobs writing one prefix are anyway; the nightly's LATEST is still only
replaced when it is what the run read when it started (`pipelines.nightly.latest`).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import json
import logging
import os
import socket
from collections.abc import Iterator

from apache_beam.io.filesystems import FileSystems

from schemas.manifest import ArtifactError

LOGGER = logging.getLogger(__name__)
LOCK_SUFFIX = ".lock"


class WriterBusy(ArtifactError):
    """Another process holds the lock on what this one was about to write."""


def lock_path(path: str) -> str:
    """The lock file of `path`: a hidden sibling, so it never becomes part of the folder it guards."""
    parent, name = os.path.split(os.path.abspath(path).rstrip(os.sep))
    return os.path.join(parent, f".{name}{LOCK_SUFFIX}")


def _holder(lock: str) -> str:
    try:
        with open(lock, encoding="utf-8") as handle:
            found = json.loads(handle.read() or "{}")
    except (OSError, ValueError):
        return "another process"
    return f"pid {found.get('pid')} on {found.get('host')} since {found.get('since')} ({found.get('what')})"


@contextlib.contextmanager
def exclusive_writer(path: str, what: str) -> Iterator[None]:
    """Hold the only write lock on `path` (local) for the block; raise `WriterBusy` if another has it.

    `what` says who holds it (e.g. "madr nightly run 2026-11-26"), for the message the next taker gets.
    A non-local `path` is not locked (see the module's docstring).
    """
    if FileSystems.get_scheme(path) is not None:
        yield
        return
    lock = lock_path(path)
    os.makedirs(os.path.dirname(lock), exist_ok=True)
    while True:
        descriptor = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(descriptor)
            raise WriterBusy(
                f"{path} is being written by {_holder(lock)}, which holds {lock}; wait for it to finish "
                "(a crashed holder releases the lock by itself), or write somewhere else"
            ) from None
        # The holder before us may have removed the file between our open and our lock: then we hold
        # a lock on a file nobody else can find, and must take the one at the path instead.
        try:
            same = os.path.samestat(os.fstat(descriptor), os.stat(lock))
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(descriptor)
    try:
        since = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
        record = {"pid": os.getpid(), "host": socket.gethostname(), "since": since, "what": what}
        with contextlib.suppress(OSError):  # who holds it is for messages only: a full disk may refuse it
            os.ftruncate(descriptor, 0)
            os.write(descriptor, json.dumps(record).encode())
        yield
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(lock)  # before the unlock: a taker that locks the old file sees it is gone
        os.close(descriptor)
