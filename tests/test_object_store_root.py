"""A gs:// nightly root as safe as a local one: LATEST swapped by compare-and-swap on its generation, and a
writer lock object that one writer at a time holds, that a killed writer's successor takes over once it
is stale, and that its holder keeps fresh. Against the emulator with GCS's preconditions
(`tests/gcs_emulator_cas.py`)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator

import pytest

from pipelines.nightly import latest
from pipelines.nightly.latest import LatestChanged, publish_latest
from pipelines.storage import writer_lock
from pipelines.storage.object_store import PreconditionFailed, read_with_generation, write_if_generation
from pipelines.storage.writer_lock import WriterBusy, exclusive_writer, object_lock_path
from tests.gcs_emulator import GcsEmulator, pointed_at, running_emulator

BUCKET = "madr-roots"
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def gcs() -> Iterator[GcsEmulator]:
    with running_emulator() as emulator, pointed_at(emulator):
        emulator.create_bucket(BUCKET)
        yield emulator


def _pointer(root: str) -> dict | None:
    data, _ = read_with_generation(f"{root}/LATEST")
    return None if data is None else json.loads(data)


def test_a_run_that_read_latest_before_another_published_is_told_not_overwriting(gcs, monkeypatch) -> None:
    root = f"gs://{BUCKET}/cas-latest"
    publish_latest(root, "mon", {}, None)
    monday = _pointer(root)
    real = latest.read_with_generation
    raced: list[str] = []

    def read_then_lose_the_race(path: str):
        found = real(path)  # run "tue-a" compared this generation's content...
        if not raced:
            raced.append("tue-b")
            publish_latest(root, "tue-b", {}, monday)  # ...and "tue-b" published meanwhile
        return found

    monkeypatch.setattr(latest, "read_with_generation", read_then_lose_the_race)
    with pytest.raises(LatestChanged, match="now to run tue-b"):
        publish_latest(root, "tue-a", {}, monday)
    monkeypatch.undo()
    assert _pointer(root)["run_id"] == "tue-b"


_RACER = textwrap.dedent(
    """
    import sys
    from pipelines.nightly.latest import LatestChanged, publish_latest
    from pipelines.storage.writer_lock import WriterBusy, exclusive_writer
    root, run_id = sys.argv[1], sys.argv[2]
    try:
        with exclusive_writer(root + "/LATEST", "race " + run_id):
            publish_latest(root, run_id, {"by": run_id}, None)
    except (WriterBusy, LatestChanged) as refused:
        print(type(refused).__name__)
        sys.exit(2)
    """
)


def test_two_processes_publishing_one_root_ten_times_exactly_one_wins_each_time(gcs) -> None:
    env = {**os.environ, "PYTHONPATH": REPO}
    for attempt in range(10):
        root = f"gs://{BUCKET}/race-{attempt}"
        racers = {
            run_id: subprocess.Popen(
                [sys.executable, "-c", _RACER, root, run_id], env=env, stdout=subprocess.PIPE, text=True
            )
            for run_id in ("a", "b")
        }
        codes = {run_id: process.wait(timeout=60) for run_id, process in racers.items()}
        # Each expects no LATEST: the loser is refused by the lock or, had it taken the lock after the
        # winner let go, by the compare-and-swap. Never both.
        assert sorted(codes.values()) == [0, 2], codes
        pointer = _pointer(root)
        winners = [run_id for run_id, code in codes.items() if code == 0]
        assert pointer["run_id"] == winners[0] and pointer["by"] == winners[0]
        assert read_with_generation(object_lock_path(root + "/LATEST"))[0] is None  # released


def test_a_second_writer_is_refused_naming_the_holder_and_the_lock_is_released(gcs) -> None:
    path = f"gs://{BUCKET}/busy/LATEST"
    with (
        exclusive_writer(path, "madr nightly run mon"),
        pytest.raises(WriterBusy, match=r"madr nightly run mon.*refreshed \d+ s ago"),
        exclusive_writer(path, "madr nightly run tue"),
    ):
        pass
    with exclusive_writer(path, "madr nightly run tue"):
        assert json.loads(read_with_generation(object_lock_path(path))[0])["what"] == "madr nightly run tue"
    assert read_with_generation(object_lock_path(path))[0] is None


def test_a_killed_writers_lock_is_taken_over_once_stale(gcs, monkeypatch, caplog) -> None:
    path = f"gs://{BUCKET}/killed/LATEST"
    holder = textwrap.dedent(
        """
        import sys, time
        from pipelines.storage.writer_lock import exclusive_writer
        with exclusive_writer(sys.argv[1], "the killed run"):
            print("held", flush=True)
            time.sleep(600)
        """
    )
    env = {**os.environ, "PYTHONPATH": REPO}
    process = subprocess.Popen(
        [sys.executable, "-c", holder, path], env=env, stdout=subprocess.PIPE, text=True
    )
    assert process.stdout.readline().strip() == "held"
    process.send_signal(signal.SIGKILL)
    process.wait()
    with (
        pytest.raises(WriterBusy, match=r"the killed run.*if that run was killed, rerun in"),
        exclusive_writer(path, "the next run"),
    ):
        pass
    monkeypatch.setattr(writer_lock, "STALE_LOCK_SECONDS", 0.5)
    time.sleep(0.6)
    logger = "pipelines.storage.writer_lock"
    with caplog.at_level("WARNING", logger=logger), exclusive_writer(path, "the next run"):
        assert "stopped refreshing it" in caplog.text
    assert read_with_generation(object_lock_path(path))[0] is None


def test_the_holder_refreshes_its_lock_and_a_hand_written_stale_one_is_taken(gcs, monkeypatch) -> None:
    path = f"gs://{BUCKET}/fresh/LATEST"
    lock = object_lock_path(path)
    monkeypatch.setattr(writer_lock, "LOCK_REFRESH_SECONDS", 0.1)
    with exclusive_writer(path, "a long run"):
        first = json.loads(read_with_generation(lock)[0])["refreshed"]
        time.sleep(0.5)
        assert json.loads(read_with_generation(lock)[0])["refreshed"] > first
    an_hour_ago = {"pid": 1, "host": "gone", "what": "a run from before", "refreshed": time.time() - 3600}
    write_if_generation(lock, json.dumps(an_hour_ago).encode(), 0)
    with exclusive_writer(path, "today's run"):
        assert json.loads(read_with_generation(lock)[0])["what"] == "today's run"


def test_a_retried_write_that_already_landed_is_its_own_success_not_a_conflict(gcs) -> None:
    """The client retries a conditional upload whose response was lost; the retry then fails the
    precondition its first attempt moved. Same bytes there: success, with their generation."""
    path = f"gs://{BUCKET}/retried/LATEST"
    first = write_if_generation(path, b"run a", 0)
    assert write_if_generation(path, b"run a", 0) == first
    with pytest.raises(PreconditionFailed):
        write_if_generation(path, b"run b", 0)


def test_a_holder_whose_lock_was_taken_over_is_stopped_before_its_final_step(gcs) -> None:
    path = f"gs://{BUCKET}/taken/LATEST"
    lock = object_lock_path(path)
    with exclusive_writer(path, "a run thought dead") as held:
        held.check()  # still ours
        _, generation = read_with_generation(lock)
        write_if_generation(lock, b'{"what": "the run that took over"}', generation)
        with pytest.raises(WriterBusy, match="was taken over by another writer"):
            held.check()
    assert json.loads(read_with_generation(lock)[0])["what"] == "the run that took over"  # not deleted
