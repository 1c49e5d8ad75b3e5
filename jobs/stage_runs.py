"""One stage of a driver (demo, nightly, experiment): skip it if finished, else run it and time it.

A stage is finished when its output folder holds a manifest (`schemas.manifest`): stages write
it last, so a folder without one is what an interrupted attempt left. By default any manifest in
the folder counts, which is the rule every driver has always used; given a `kind`, only a
manifest of that kind whose listed files are all present (`artifacts.read_stage_manifest`) does.

The stage itself writes its manifest; the runner only reads it.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar, overload

from apache_beam.io.filesystems import FileSystems

from pipelines.artifacts import read_stage_manifest
from schemas.manifest import MANIFEST_FILE, ArtifactError

T = TypeVar("T")


def is_finished(folder: str | os.PathLike[str], kind: str | None = None, complete: bool = True) -> bool:
    """Whether `folder` holds a finished stage's output (local or gs://).

    Without `kind`, a manifest file is enough. With it, the manifest must be of that kind and,
    with `complete`, every file it lists must still be there.
    """
    path = os.fspath(folder)
    if kind is None:
        return FileSystems.exists(FileSystems.join(path, MANIFEST_FILE))
    try:
        read_stage_manifest(path, kind, complete)
    except (ArtifactError, ValueError):  # ValueError: a manifest that is not JSON
        return False
    return True


@dataclass
class StageRunner:
    """Runs a driver's stages one by one into shared records.

    - `timings`: seconds per stage that ran, by stage name (rounded to `digits` when given).
    - `skipped`: names of the stages skipped as finished; `results`, when given: each stage's result.
    - `announce` / `report`: lines printed before and after a stage runs, formatted with `name`
      (and `seconds` for `report`); None prints nothing.
    - `logger`: when given, says that a stage was skipped (info), or that it replaces what an
      interrupted attempt left in its folder (warning).
    """

    timings: dict[str, float]
    digits: int | None = None
    announce: str | None = None
    report: str | None = None
    logger: logging.Logger | None = None
    skipped: list[str] = field(default_factory=list)
    results: dict[str, Any] | None = None

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
                if self.logger:
                    self.logger.info("%s: finished in an earlier attempt, skipped", name)
                return None
            if self.logger and FileSystems.exists(os.fspath(folder)):
                self.logger.warning("%s: replacing what an interrupted attempt left in %s", name, folder)
        if self.announce is not None:
            print(self.announce.format(name=name), flush=True)
        started = time.perf_counter()
        value = work()
        seconds = time.perf_counter() - started
        self.timings[name] = seconds if self.digits is None else round(seconds, self.digits)
        if self.results is not None:
            self.results[name] = value
        if self.report is not None:
            print(self.report.format(name=name, seconds=self.timings[name]), flush=True)
        return value
