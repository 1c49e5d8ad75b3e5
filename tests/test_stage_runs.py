"""The drivers' stage runner (skip if finished, time, record) and the plain-text table of the reports."""

from __future__ import annotations

import logging
import time
from types import SimpleNamespace

import numpy as np
import pytest

from evaluation.text_table import format_text_table
from pipelines import stage_runs
from pipelines.stage_runs import StageRunner, is_finished
from pipelines.storage.stage_manifests import write_stage_manifest

KIND = "madr-test-stage"


def _finished_folder(tmp_path, kind: str = KIND):
    folder = tmp_path / "stage"
    folder.mkdir()
    (folder / "part-0.txt").write_text("rows\n")
    write_stage_manifest(str(folder), kind, {})
    return folder


def _clock(monkeypatch, *readings: float) -> None:
    ticks = iter(readings)
    monkeypatch.setattr(stage_runs, "time", SimpleNamespace(perf_counter=lambda: next(ticks)))


def _never() -> str:
    raise AssertionError("a finished stage must not run")


def test_a_finished_stage_is_skipped_and_not_timed(tmp_path, caplog) -> None:
    folder = _finished_folder(tmp_path)
    timings: dict[str, float] = {}
    results: dict[str, object] = {}
    runner = StageRunner(timings, logger=logging.getLogger("test"), results=results)
    with caplog.at_level(logging.INFO, logger="test"):
        assert runner.run("embed", _never, folder, KIND) is None
        assert runner.run("index", _never, str(folder)) is None  # without a kind: any manifest
    assert runner.skipped == ["embed", "index"] and timings == {} and results == {}
    assert "embed: finished in an earlier attempt, skipped" in caplog.text


def test_an_unfinished_stage_runs_is_timed_and_recorded(tmp_path, monkeypatch, capsys, caplog) -> None:
    folder = tmp_path / "left-by-a-crash"
    folder.mkdir()
    (folder / "part-0.txt").write_text("half\n")  # no manifest: an interrupted attempt
    timings: dict[str, float] = {}
    results: dict[str, object] = {}
    runner = StageRunner(
        timings,
        digits=1,
        announce="\n== {name}",
        report="   x: {name} {seconds}s",
        logger=logging.getLogger("test"),
        results=results,
    )
    _clock(monkeypatch, 10.0, 12.34)
    with caplog.at_level(logging.WARNING, logger="test"):
        assert runner.run("train", lambda: {"steps": 3}, folder, KIND) == {"steps": 3}
    assert timings == {"train": 2.3} and results == {"train": {"steps": 3}} and runner.skipped == []
    assert capsys.readouterr().out == "\n== train\n   x: train 2.3s\n"
    assert f"train: replacing what an interrupted attempt left in {folder}" in caplog.text


def test_without_a_folder_a_stage_always_runs_and_keeps_its_seconds_unrounded(monkeypatch, capsys) -> None:
    timings: dict[str, float] = {}
    runner = StageRunner(timings, report="   {name}: {seconds:.1f}s")
    _clock(monkeypatch, 1.0, 3.25)
    assert runner.run("generate", lambda: 7) == 7
    assert timings == {"generate": pytest.approx(2.25)}
    assert capsys.readouterr().out == "   generate: 2.2s\n"


def test_a_seconds_file_gives_a_stage_skipped_as_finished_the_seconds_it_took_when_it_ran(
    tmp_path, monkeypatch
) -> None:
    seconds = tmp_path / "stage_seconds.json"
    folder = tmp_path / "embeddings"

    def embed() -> None:
        folder.mkdir()
        write_stage_manifest(str(folder), KIND, {})

    _clock(monkeypatch, 1.0, 4.0, 10.0, 10.5)
    first = StageRunner({}, seconds_file=seconds)
    first.run("embed", embed, folder, KIND)
    first.run("report", lambda: None)
    resumed = StageRunner({}, seconds_file=seconds)
    assert resumed.run("embed", _never, folder, KIND) is None
    assert resumed.skipped == ["embed"] and resumed.timings == {"embed": 3.0}
    assert StageRunner({}).run("embed", _never, folder, KIND) is None  # without the file: nothing known


def test_a_stage_that_fails_records_nothing(tmp_path) -> None:
    timings: dict[str, float] = {}
    runner = StageRunner(timings, results={})

    def broken() -> None:
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        runner.run("evaluate", broken, tmp_path / "eval")
    assert timings == {} and runner.results == {} and runner.skipped == []


def test_an_incomplete_or_other_kind_manifest_is_not_finished_for_that_kind(tmp_path) -> None:
    folder = _finished_folder(tmp_path)
    assert is_finished(folder, KIND) and is_finished(folder)
    assert not is_finished(folder, "madr-embeddings")  # another stage's output
    (folder / "part-0.txt").unlink()  # a listed file was lost
    assert not is_finished(folder, KIND)
    assert is_finished(folder, KIND, complete=False) and not is_finished(folder)
    assert not is_finished(tmp_path / "absent") and not is_finished(tmp_path / "absent", KIND)
    (folder / "manifest.json").write_text("{not json")
    assert not is_finished(folder, KIND)

    ran: list[str] = []
    runner = StageRunner({})
    runner.run("embed", lambda: ran.append("embed"), folder, KIND)
    (tmp_path / "b").mkdir()
    runner.run("other", lambda: ran.append("other"), _finished_folder(tmp_path / "b", "other-kind"), KIND)
    assert ran == ["embed", "other"] and runner.skipped == []


def test_a_text_table_aligns_its_columns() -> None:
    table = format_text_table(
        ("metric", "mean", "queries"), [("recall@10", "0.5000", "4"), ("mrr", "n/a", "12")]
    )
    assert table.split("\n") == [
        "metric       mean  queries",
        "recall@10  0.5000        4",
        "mrr           n/a       12",
    ]


def test_a_value_wider_than_its_header_widens_the_column_and_lines_end_without_spaces() -> None:
    table = format_text_table(("a", "b"), [("a long first cell", "1"), ("x", "a long last cell")], " | ")
    assert table.splitlines() == [
        "a                 |                b",
        "a long first cell |                1",
        "x                 | a long last cell",
    ]
    assert format_text_table(("name", "note"), [("x", "")]) == "name  note\nx"
    assert format_text_table(("only", "header"), []) == "only  header"
    with pytest.raises(ValueError, match="2 columns"):
        format_text_table(("a", "b"), [("1", "2", "3")])


def test_each_stage_records_its_own_cpu_seconds_and_peak_memory() -> None:
    """A small stage after a big one reports its own peak, not the big one's (the peak is reset)."""
    usage: dict = {}
    runner = StageRunner({}, usage=usage)

    def hold(megabytes: int) -> int:
        block = np.ones(megabytes * 2**20 // 8)  # touched, so resident
        return int(block.sum())

    def spin() -> float:
        started = time.process_time()
        while time.process_time() - started < 0.3:
            pass
        return time.process_time() - started

    runner.run("big", lambda: hold(400))
    runner.run("small", lambda: hold(50))
    runner.run("busy", spin)
    assert usage["big"]["peak_rss_scope"] == usage["small"]["peak_rss_scope"] == "stage"
    assert usage["big"]["peak_rss_mb"] - usage["small"]["peak_rss_mb"] > 300
    assert usage["busy"]["cpu_seconds"] >= 0.3 - 0.05
    assert usage["small"]["cpu_seconds"] < usage["busy"]["cpu_seconds"]


def test_without_usage_the_runner_records_none() -> None:
    runner = StageRunner({})
    runner.run("a", lambda: 1)
    assert runner.usage is None and set(runner.timings) == {"a"}
