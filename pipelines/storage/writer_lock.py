"""One writer at a time: an exclusive lock beside whatever a madr process is writing.

Two processes writing one output folder (or two nightlies on one root) undo each other: one clears the
staging folder the other is writing, or replaces a pointer the other just moved. So a stage takes
`exclusive_writer` on its output folder for as long as it writes (`staged_output.fresh_output`), and the
nightly takes it on its root. A second writer is refused at once, with the holder's pid, host and start
time and the way out, never made to wait: a scheduler that started two runs should hear about it.

The lock is an `fcntl.flock` on a hidden sibling file (`.NAME.lock`). The kernel drops it when its
holder exits, however it exits (kill -9 included), so a crashed run never leaves a stale lock behind.
The file is removed on release; a taker checks that the file it locked is still the one at the path,
so a release racing with a new taker cannot hand the lock to two processes.

On gs:// the lock is an object (`.NAME.lock` beside the path), created only if absent and kept by
compare-and-swap on its generation (`pipelines.storage.object_store`): of two writers, one creates it and the
other is refused. Nothing releases it when its holder is killed, so the holder rewrites it every
`LOCK_REFRESH_SECONDS`, and a lock not refreshed for `STALE_LOCK_SECONDS` is a dead run's: the next
writer takes it over (again by compare-and-swap, so two takers cannot both win). Other object stores
(s3://, ...) take no lock: their runs must be serialised by their scheduler.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import json
import logging
import os
import socket
import threading
import uuid
from collections.abc import Iterator

from apache_beam.io.filesystems import FileSystems

from pipelines.storage.object_store import (
    NO_OBJECT,
    PreconditionFailed,
    delete_if_generation,
    read_with_generation,
    write_if_generation,
)
from schemas.manifest import ArtifactError

LOGGER = logging.getLogger(__name__)
LOCK_SUFFIX = ".lock"
# A gs:// lock's holder rewrites it this often; one not rewritten for STALE_LOCK_SECONDS is a dead run's
# (clocks of the writers' hosts are compared: 10 minutes leaves room for their skew).
LOCK_REFRESH_SECONDS = 60.0
STALE_LOCK_SECONDS = 600.0


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
    return _described(found)


def _described(holder: dict[str, object]) -> str:
    """Who holds a lock, from its record (a local lock file's or a gs:// lock object's)."""
    return (
        f"pid {holder.get('pid')} on {holder.get('host')} since {holder.get('since')} ({holder.get('what')})"
    )


@contextlib.contextmanager
def exclusive_writer(path: str, what: str) -> Iterator[HeldObjectLock | None]:
    """Hold the only write lock on `path` for the block; raise `WriterBusy` if another has it.

    `what` says who holds it (e.g. "madr nightly run 2026-11-26"), for the message the next taker gets.
    On gs:// the block gets the lock object's handle (`HeldObjectLock.check` before a final step), else
    None; other object stores are not locked (see the module's docstring).
    """
    if path.startswith("gs://"):
        with _object_lock(path, what) as held:
            yield held
        return
    if FileSystems.get_scheme(path) is not None:
        yield None
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
        yield None
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(lock)  # before the unlock: a taker that locks the old file sees it is gone
        os.close(descriptor)


def object_lock_path(path: str) -> str:
    """The lock object of a gs:// `path`: a hidden sibling, as locally."""
    parent, _, name = path.rstrip("/").rpartition("/")
    return f"{parent}/.{name}{LOCK_SUFFIX}"


def _lock_record(what: str) -> dict[str, object]:
    now = dt.datetime.now(dt.timezone.utc)
    # The nonce makes each holder's bytes its own (`object_store.write_if_generation` relies on it).
    record = {"pid": os.getpid(), "host": socket.gethostname(), "what": what, "nonce": uuid.uuid4().hex}
    return {**record, "since": now.isoformat(timespec="seconds"), "refreshed": now.timestamp()}


class _Refresher(threading.Thread):
    """Rewrites the lock object every LOCK_REFRESH_SECONDS while its holder writes; `lost` if another
    writer took it over meanwhile (it found the lock stale: this process was stopped that long)."""

    def __init__(self, lock: str, record: dict[str, object], generation: int) -> None:
        super().__init__(name=f"refresh {lock}", daemon=True)
        self.lock, self.record, self.generation = lock, record, generation
        self.stopped, self.lost = threading.Event(), False

    def run(self) -> None:
        while not self.stopped.wait(LOCK_REFRESH_SECONDS):
            record = {**self.record, "refreshed": dt.datetime.now(dt.timezone.utc).timestamp()}
            try:
                self.generation = write_if_generation(self.lock, json.dumps(record).encode(), self.generation)
            except PreconditionFailed:
                self.lost = True
                LOGGER.error("%s was taken over by another writer: this one was thought dead", self.lock)
                return
            except Exception as error:  # a network hiccup: the next refresh tries again
                LOGGER.warning("could not refresh %s: %s", self.lock, error)


class HeldObjectLock:
    """The handle of a held gs:// lock: `check` before a step that must not happen once another writer
    took the lock over (this process was thought dead: stopped, or cut off, for STALE_LOCK_SECONDS)."""

    def __init__(self, path: str, refresher: _Refresher) -> None:
        self.path, self._refresher = path, refresher

    def check(self) -> None:
        _, live = read_with_generation(self._refresher.lock)
        if self._refresher.lost or live != self._refresher.generation:
            raise WriterBusy(
                f"{self.path}: this run's lock {self._refresher.lock} was taken over by another writer "
                "(this run was thought dead); nothing more is written. Check which run should win, then rerun"
            )


@contextlib.contextmanager
def _object_lock(path: str, what: str) -> Iterator[HeldObjectLock]:
    lock, record = object_lock_path(path), _lock_record(what)
    data = json.dumps(record).encode()
    try:
        generation = write_if_generation(lock, data, NO_OBJECT)
    except PreconditionFailed:
        generation = _take_over_if_stale(path, lock, data)
    refresher = _Refresher(lock, record, generation)
    refresher.start()
    try:
        yield HeldObjectLock(path, refresher)
    finally:
        refresher.stopped.set()
        refresher.join()
        if not refresher.lost:
            with contextlib.suppress(PreconditionFailed):
                delete_if_generation(lock, refresher.generation)


def _take_over_if_stale(path: str, lock: str, data: bytes) -> int:
    """The generation of the lock object, taken over from a holder that stopped refreshing it; else
    `WriterBusy` naming the holder and when its lock turns stale."""
    found, generation = read_with_generation(lock)
    if found is None:  # released between our two calls: take it as new
        return _create_or_busy(path, lock, data)
    try:
        holder = json.loads(found)
        age = dt.datetime.now(dt.timezone.utc).timestamp() - float(holder["refreshed"])
    except (ValueError, KeyError, TypeError):
        holder, age = {}, float("inf")  # unreadable: no live writer wrote it
    if age < STALE_LOCK_SECONDS:
        raise WriterBusy(
            f"{path} is being written by {_described(holder)}, which holds {lock} (refreshed {age:.0f} s "
            f"ago); wait for it to finish, or, if that run was killed, rerun in "
            f"{STALE_LOCK_SECONDS - age:.0f} s, when its lock is stale and is taken over"
        )
    LOGGER.warning("taking over %s: its holder %s stopped refreshing it %.0f s ago", lock, holder, age)
    try:
        return write_if_generation(lock, data, generation)
    except PreconditionFailed:
        raise WriterBusy(f"{path}: another writer took over the stale lock {lock} first") from None


def _create_or_busy(path: str, lock: str, data: bytes) -> int:
    try:
        return write_if_generation(lock, data, NO_OBJECT)
    except PreconditionFailed:
        raise WriterBusy(f"{path}: another writer took the lock {lock} first") from None
