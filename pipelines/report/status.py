"""A run that stopped says so: `status.json` in its folder names the stage or guard and the error.

A nightly that fails half way, or that a guard refuses, has no run manifest (it is written only when
every stage and guard passed), so without this file the morning report could only guess from which
stage folders lack their manifest. The nightly writes it when a run stops and removes it when a rerun
of the same night finishes.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import asdict, dataclass

from apache_beam.io.filesystems import FileSystems

STATUS_FILE = "status.json"
STATES = ("failed", "refused")


@dataclass(frozen=True)
class RunStatus:
    """Why a run stopped: `state` failed (an error) or refused (a guard), at `stage`, with `error`'s
    first line."""

    state: str
    stage: str
    error: str
    at: str

    def __post_init__(self) -> None:
        if self.state not in STATES:
            raise ValueError(f"a run status is one of {STATES}, got {self.state!r}")

    def line(self) -> str:
        verb = "refused by" if self.state == "refused" else "failed in"
        return f"{verb} {self.stage}: {self.error}"


def write_run_status(run_folder: str, state: str, stage: str, error: BaseException | str) -> RunStatus:
    """Record why the run in `run_folder` stopped (replacing an earlier attempt's record)."""
    text = str(error).strip() or type(error).__name__
    status = RunStatus(state, stage, text.splitlines()[0], dt.datetime.now(dt.timezone.utc).isoformat())
    with FileSystems.create(FileSystems.join(run_folder, STATUS_FILE)) as handle:
        handle.write((json.dumps(asdict(status), indent=2) + "\n").encode())
    return status


def read_run_status(run_folder: str) -> RunStatus | None:
    path = FileSystems.join(run_folder, STATUS_FILE)
    if not FileSystems.exists(path):
        return None
    with FileSystems.open(path) as handle:
        return RunStatus(**json.loads(handle.read()))


def clear_run_status(run_folder: str) -> None:
    path = FileSystems.join(run_folder, STATUS_FILE)
    if FileSystems.exists(path):
        FileSystems.delete([path])


__all__ = ["STATUS_FILE", "RunStatus", "clear_run_status", "read_run_status", "write_run_status"]
