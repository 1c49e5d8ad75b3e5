"""One writer at a time (issue 24, item 5): a lock per output folder and per nightly root, LATEST replaced
only when it is what the run read, LATEST's path relative to its root, and "finished" meaning a manifest
whose files and counts are there."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from pipelines.nightly.latest import LatestChanged, latest_run_folder, publish_latest, read_latest
from pipelines.nightly.run import run_nightly
from pipelines.stage_runs import unfinished
from pipelines.storage.stage_manifests import write_stage_manifest
from pipelines.storage.staged_output import OutputNotEmpty, fresh_output
from pipelines.storage.writer_lock import WriterBusy, exclusive_writer, lock_path
from tests.test_embed_pipeline import catalog, write_catalog
from tests.test_publish_guard import _job
from tests.test_verify_artifacts import SHARD, _embeddings

REPO = Path(__file__).resolve().parents[1]


def _hold(path: str, ready: multiprocessing.synchronize.Event) -> None:
    with exclusive_writer(path, "a test holder"):
        ready.set()
        time.sleep(60)


def test_a_second_writer_is_refused_naming_the_first_and_a_killed_holder_frees_the_lock(
    tmp_path: Path,
) -> None:
    target = str(tmp_path / "out")
    context = multiprocessing.get_context("spawn")
    ready = context.Event()
    holder = context.Process(target=_hold, args=(target, ready))
    holder.start()
    try:
        assert ready.wait(30)
        busy = rf"pid {holder.pid} .*a test holder.*wait for it to finish"
        with pytest.raises(WriterBusy, match=busy), fresh_output(target):
            pass
        assert not (tmp_path / "out").exists() and not (tmp_path / ".out.staging").exists()
    finally:
        os.kill(holder.pid, signal.SIGKILL)  # no cleanup of any kind: the kernel drops the lock
        holder.join()
    with fresh_output(target) as staging:
        Path(staging, "part.txt").write_text("written")
    assert (tmp_path / "out" / "part.txt").read_text() == "written"
    assert not Path(lock_path(target)).exists()  # released and removed


def test_the_lock_is_taken_again_by_one_process_at_a_time(tmp_path: Path) -> None:
    """Release removes the file; a taker that locked the removed file must take the new one instead."""
    target = str(tmp_path / "out")
    for _ in range(3):
        with exclusive_writer(target, "first"), pytest.raises(WriterBusy), exclusive_writer(target, "second"):
            pass


def test_a_symlinked_output_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    """It wrote, then failed on rmtree of the link, and left the next run stuck in staging."""
    real = tmp_path / "real"
    real.mkdir()
    (real / "old.txt").write_text("kept")
    link = tmp_path / "link"
    link.symlink_to(real)
    refused = pytest.raises(OutputNotEmpty, match=rf"{link} is a symbolic link \(to {real}\)")
    with refused, fresh_output(str(link), overwrite=True):
        raise AssertionError("must not be reached")
    assert (real / "old.txt").read_text() == "kept" and not (tmp_path / ".link.staging").exists()


def test_latest_is_relative_to_its_root_and_is_not_replaced_behind_a_run(tmp_path: Path) -> None:
    root = tmp_path / "nightly"
    root.mkdir()
    publish_latest(str(root), "mon", {}, expected=None)
    monday = read_latest(str(root))
    assert monday["path"] == "mon" and latest_run_folder(str(root)) == str(root / "mon")
    publish_latest(str(root), "tue", {}, expected=monday)  # what the run read at its start: replaced
    with pytest.raises(LatestChanged, match=r"now to run tue.*rerun with --run_id wed"):
        publish_latest(str(root), "wed", {}, expected=monday)
    assert read_latest(str(root))["run_id"] == "tue"
    # A reader in another directory finds the run.
    elsewhere = subprocess.run(
        [
            sys.executable,
            "-c",
            "from pipelines.nightly.latest import latest_run_folder; "
            f"print(latest_run_folder({str(root)!r}))",
        ],
        cwd="/",
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        check=True,
    )
    assert Path(elsewhere.stdout.strip()) == root / "tue"


def test_finished_means_the_listed_files_and_counts_are_there(tmp_path: Path) -> None:
    folder = _embeddings(tmp_path / "embeddings", count=20)
    assert unfinished(folder) is None
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["counts"]["products_embedded"] = 30  # a manifest written over another run's files
    (folder / "manifest.json").write_text(json.dumps(manifest))
    assert unfinished(folder) == f"{folder} holds 20 embedding rows, its manifest counts 30"
    table = pq.read_table(folder / SHARD)
    pq.write_table(table.slice(0, 10), folder / SHARD)
    assert "bytes, its manifest says" in unfinished(folder)
    (folder / SHARD).unlink()
    assert "is missing" in unfinished(folder)
    write_stage_manifest(str(folder), "madr-embeddings", {"counts": {}})
    assert unfinished(folder) is None  # an empty output is finished: its manifest counts no rows


def test_a_second_nightly_on_a_root_is_refused_while_the_first_runs(
    tmp_path: Path, tiny_model_dir: Path
) -> None:
    products = write_catalog(tmp_path / "catalog.parquet", catalog(12))
    root = str(tmp_path / "nightly")
    held = exclusive_writer(os.path.join(root, "LATEST"), "madr nightly run mon")
    with held, pytest.raises(WriterBusy, match=r"madr nightly run mon"):
        run_nightly(_job(tmp_path, tiny_model_dir, products, "tue"))
    assert not (tmp_path / "nightly" / "tue").exists()  # refused before anything was written
    run_nightly(_job(tmp_path, tiny_model_dir, products, "tue"))
    assert read_latest(root)["run_id"] == "tue"
