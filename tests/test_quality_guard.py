"""The nightly's quality guard (`jobs.quality_guard`): tonight against last night and the zero-shot row."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from jobs.nightly_latest import read_latest
from jobs.quality_guard import QualityRefused, quality_check
from pipelines.evaluate.report import PER_QUERY_FILE
from pipelines.evaluate.zero_shot import ZERO_SHOT_FOLDER
from tests.test_embed_pipeline import catalog, write_catalog, write_test_queries


def _per_query(folder: Path, ndcg: np.ndarray, recall: np.ndarray | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    recall = ndcg if recall is None else recall
    rows = {"query_id": [f"q{i}" for i in range(len(ndcg))], "recall@100": recall, "ndcg@10": ndcg}
    pq.write_table(pa.table(rows), folder / PER_QUERY_FILE)
    return folder


def test_a_significant_loss_against_zero_shot_is_named_and_refused(tmp_path) -> None:
    rng = np.random.default_rng(51)
    base = rng.uniform(0.6, 0.9, size=40)
    tonight = _per_query(tmp_path / "eval", base - 0.05 + rng.normal(0, 0.01, size=40))
    _per_query(tmp_path / "eval" / ZERO_SHOT_FOLDER / "eval", base)
    check = quality_check("refuse", str(tonight), None)
    losses = check.losses()
    assert [loss.split()[0] for loss in losses] == ["recall@100", "ndcg@10"]  # the file's column order
    assert all("for the backbone used zero-shot (p " in loss for loss in losses)
    assert "significantly below" in check.verdict() and "not published" in check.verdict()
    with pytest.raises(QualityRefused, match="--quality_guard warn"):
        check.enforce()
    quality_check("warn", str(tonight), None).enforce()  # warns only
    assert quality_check("off", str(tonight), None).verdict() == "quality guard: off"


def test_a_loss_under_the_margin_or_not_significant_is_not_acted_on(tmp_path) -> None:
    rng = np.random.default_rng(7)
    base = rng.uniform(0.6, 0.9, size=40)
    last = _per_query(tmp_path / "mon", base)
    small = _per_query(tmp_path / "tue", base - 0.005)  # significant, but half a point
    noisy = _per_query(tmp_path / "wed", base + rng.normal(-0.02, 0.2, size=40).clip(-0.5, 0.1))
    for tonight in (small, noisy):
        check = quality_check("refuse", str(tonight), ("mon", str(last)))
        assert check.losses() == [] and check.verdict().startswith(
            "quality guard: not below last night (run mon)"
        )
        check.enforce()
    first = quality_check("refuse", str(small), None)
    assert first.comparisons == () and "nothing to compare with" in first.verdict()
    # Runs that share no query are not called "not below": nothing was tested.
    (tmp_path / "other").mkdir()
    stranger = pa.table({"query_id": [f"x{i}" for i in range(40)], "ndcg@10": base, "recall@100": base})
    pq.write_table(stranger, tmp_path / "other" / PER_QUERY_FILE)
    unrelated = quality_check("refuse", str(small), ("sun", str(tmp_path / "other")))
    assert unrelated.verdict().startswith("quality guard: not compared")


def test_the_nightly_refuses_a_night_below_last_nights_then_publishes_it_when_told(
    tmp_path, tiny_model_dir, capsys
) -> None:
    """Typed as a user types it. Monday's published evaluation is replaced by a perfect one, so Tuesday
    (the same model, the same catalog) is significantly below it."""
    from jobs.cli import main

    write_catalog(tmp_path / "catalog.parquet", catalog(60))
    queries, judgments = write_test_queries(tmp_path, count=20, stride=3)
    root = tmp_path / "nightly"
    argv = [
        *("nightly", "--model", str(tiny_model_dir), "--products", str(tmp_path / "catalog.parquet")),
        *("--output", str(root), "--queries", queries, "--judgments", judgments, "--max_k", "20"),
    ]
    assert main([*argv, "--run_id", "mon"]) == 0
    assert "quality guard: nothing to compare with yet" in capsys.readouterr().out
    monday = pq.read_table(root / "mon" / "eval" / PER_QUERY_FILE)
    perfect = pa.table({name: [1.0] * monday.num_rows for name in monday.column_names if name != "query_id"})
    pq.write_table(
        perfect.add_column(0, "query_id", monday.column("query_id")), root / "mon" / "eval" / PER_QUERY_FILE
    )

    assert main([*argv, "--run_id", "tue", "--quality_guard", "refuse"]) == 2
    err = capsys.readouterr().err
    assert "tonight is significantly below" in err and "last night (run mon)" in err
    assert read_latest(str(root))["run_id"] == "mon"
    assert main([*argv, "--run_id", "tue"]) == 0  # warn: the finished run is published
    out = capsys.readouterr().out
    assert "quality guard: tonight is significantly below" in out and "published anyway" in out
    assert read_latest(str(root))["run_id"] == "tue"
    manifest = json.loads((root / "tue" / "manifest.json").read_text())
    assert manifest.get("info", manifest)["quality"]["below"]
