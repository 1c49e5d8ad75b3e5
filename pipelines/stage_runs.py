"""One stage of a driver (demo, nightly, experiment): skip it if finished, else run it and time it.

A stage is finished when its output folder holds a manifest (`schemas.manifest`) whose files are
there as it lists them (`unfinished` says what is not): stages write it last, so a folder without one
is what an interrupted attempt left. Given a `kind`, only a manifest of that kind counts.

The stage itself writes its manifest; the runner only reads it.
"""

from __future__ import annotations

import json
import logging
import os
import re
import resource
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar, overload

import pyarrow.parquet as pq
from apache_beam.io.filesystems import FileSystems

from pipelines.embed.stage import EMBEDDINGS_KIND, rows_held
from pipelines.storage.stage_manifests import read_stage_manifest
from schemas.manifest import ArtifactError

T = TypeVar("T")


def is_finished(folder: str | os.PathLike[str], kind: str | None = None, complete: bool = True) -> bool:
    """Whether `folder` holds a finished stage's output (local or gs://): `unfinished` says nothing."""
    return unfinished(folder, kind, complete) is None


def unfinished(folder: str | os.PathLike[str], kind: str | None = None, complete: bool = True) -> str | None:
    """Why `folder` does not hold a finished stage's output, or None when it does.

    Finished means a manifest (of `kind`, when given) whose files are there as it lists them: with
    `complete`, every listed file present at its recorded size and, for an embed output, as many
    embedding rows in its shards as its counts say. A manifest is not proof on its own: one written
    over files that another process then changed or removed once made every rerun skip a broken stage.
    Sizes and Parquet footers only, no hashing: the stage that reads the folder verifies its bytes.
    """
    path = os.fspath(folder)
    try:
        manifest = read_stage_manifest(path, kind or "madr", complete=False, any_kind=kind is None)
    except (ArtifactError, ValueError) as error:  # ValueError: a manifest that is not JSON
        return str(error) or "its manifest cannot be read"
    if not complete:
        return None
    listed = manifest.get("files") or {}
    names = sorted(listed)
    found = FileSystems.match([FileSystems.join(path, name) for name in names]) if names else []
    for name, result in zip(names, found, strict=True):
        entry = listed[name]
        expected = entry.get("bytes", entry.get("size"))
        sizes = [m.size_in_bytes for m in result.metadata_list]
        if not sizes:
            return f"{FileSystems.join(path, name)}, listed in its manifest, is missing"
        if expected is not None and sizes[0] != int(expected):
            return f"{FileSystems.join(path, name)} is {sizes[0]} bytes, its manifest says {expected}"
    if manifest.get("kind") == EMBEDDINGS_KIND:
        expected_rows = rows_held(manifest.get("counts") or {})
        rows = 0
        for name in names:
            if name.startswith("embeddings") and name.endswith(".parquet"):
                with FileSystems.open(FileSystems.join(path, name)) as handle:
                    rows += pq.ParquetFile(handle).metadata.num_rows
        if rows != expected_rows:
            return f"{path} holds {rows} embedding rows, its manifest counts {expected_rows}"
    return None


def _cpu_seconds() -> float:
    """User + system CPU seconds of this process and of its children that have been waited for."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def peak_rss_mb() -> float | None:
    """This process's peak resident memory (VmHWM, Linux /proc); None where there is no /proc."""
    try:
        match = re.search(r"^VmHWM:\s+(\d+) kB", Path("/proc/self/status").read_text(), re.MULTILINE)
    except OSError:
        return None
    return int(match.group(1)) / 1024 if match else None


def reset_peak_rss() -> bool:
    """Start this process's peak RSS again from its current RSS (Linux >= 4.0), so that the next peak
    is one stage's own and not the largest stage's so far."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


@dataclass
class StageRunner:
    """Runs a driver's stages one by one into shared records.

    - `timings`: seconds per stage that ran, by stage name (rounded to `digits` when given).
    - `seconds_file`: when given, a JSON file that keeps those seconds across attempts, so that a stage
      skipped as finished still reports what it took when it ran (a resumed run's cost stays whole).
    - `skipped`: names of the stages skipped as finished; `results`, when given: each stage's result.
    - `announce` / `report`: lines printed before and after a stage runs, formatted with `name`
      (and `seconds` for `report`); None prints nothing.
    - `logger`: when given, says that a stage was skipped (info), or that it replaces what an
      interrupted attempt left in its folder (warning).
    - `usage`: when given, what each stage that ran cost: `cpu_seconds` (this process and the child
      processes it waited for: a local runner's workers, not a remote runner's) and `peak_rss_mb`, this
      process's peak resident memory during the stage (`peak_rss_scope` "stage"; "process" where the peak
      could not be reset and is the largest since the process started).
    """

    timings: dict[str, float]
    digits: int | None = None
    announce: str | None = None
    report: str | None = None
    logger: logging.Logger | None = None
    skipped: list[str] = field(default_factory=list)
    results: dict[str, Any] | None = None
    usage: dict[str, dict[str, Any]] | None = None
    seconds_file: Path | None = None

    @overload
    def run(self, name: str, work: Callable[[], T]) -> T: ...

    @overload
    def run(
        self,
        name: str,
        work: Callable[[], T],
        folder: str | os.PathLike[str] | None,
        kind: str | None = None,
        complete: bool = True,
    ) -> T | None: ...

    def run(
        self,
        name: str,
        work: Callable[[], T],
        folder: str | os.PathLike[str] | None = None,
        kind: str | None = None,
        complete: bool = True,
    ) -> T | None:
        """Run `work` as stage `name` and return its result; None, without running it, when
        `folder` is given and already holds the finished stage (`is_finished`)."""
        if folder is not None:
            if is_finished(folder, kind, complete):
                self.skipped.append(name)
                if name in (recorded := self._recorded_seconds()):
                    self.timings[name] = recorded[name]
                if self.logger:
                    self.logger.info("%s: finished in an earlier attempt, skipped", name)
                return None
            if self.logger and FileSystems.exists(os.fspath(folder)):
                self.logger.warning(
                    "%s: replacing what an interrupted attempt left in %s (%s)",
                    name,
                    folder,
                    unfinished(folder, kind, complete),
                )
        if self.announce is not None:
            print(self.announce.format(name=name), flush=True)
        scope = "stage" if self.usage is not None and reset_peak_rss() else "process"
        cpu_before = _cpu_seconds()
        started = time.perf_counter()
        value = work()
        seconds = time.perf_counter() - started
        self.timings[name] = seconds if self.digits is None else round(seconds, self.digits)
        if self.seconds_file is not None:
            self.seconds_file.write_text(json.dumps({**self._recorded_seconds(), name: self.timings[name]}))
        if self.usage is not None:
            peak = peak_rss_mb()
            self.usage[name] = {
                "cpu_seconds": round(_cpu_seconds() - cpu_before, 1),
                "peak_rss_mb": None if peak is None else round(peak, 1),
                "peak_rss_scope": scope,
            }
        if self.results is not None:
            self.results[name] = value
        if self.report is not None:
            print(self.report.format(name=name, seconds=self.timings[name]), flush=True)
        return value

    def _recorded_seconds(self) -> dict[str, float]:
        if self.seconds_file is None or not self.seconds_file.is_file():
            return {}
        return json.loads(self.seconds_file.read_text())
