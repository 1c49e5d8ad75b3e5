"""bench.archive_pairs: two archived variants compared on per-query means pooled over their seeds,
checked against scipy's paired t-test on the same pooled values."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from bench.archive_pairs import archived_runs, compare, main
from evaluation.experiment_stats import pool_seeds


def _keep(folder: Path, variant: str, seed: int, recalls: list[float]) -> None:
    per_query = {f"q{i}": {"query_id": f"q{i}", "recall@100": r} for i, r in enumerate(recalls)}
    result = {"per_query": per_query, "timings": {}, "query_accuracy": None, "product_accuracy": None}
    path = folder / str(seed) / f"{variant}.json.gz"
    path.parent.mkdir(parents=True, exist_ok=True)
    record = {"variant": variant, "seed": seed, "data": "digest", "settings": {}, "result": result}
    path.write_bytes(gzip.compress(json.dumps(record).encode()))


@pytest.fixture
def archive(tmp_path: Path) -> Path:
    rng = np.random.default_rng(0)
    for seed in (13, 14):
        _keep(tmp_path, "first", seed, list(rng.uniform(0.3, 1.0, 40)))
        _keep(tmp_path, "second", seed, list(rng.uniform(0.0, 0.8, 40)))
    _keep(tmp_path, "zero-shot", 13, list(rng.uniform(0.0, 1.0, 40)))
    return tmp_path


def test_pooled_difference_matches_scipy(archive: Path) -> None:
    pooled = {v: pool_seeds([r["result"] for _, r in archived_runs(archive, v)]) for v in ("first", "second")}
    figures = compare(pooled["first"], pooled["second"], "recall@100")
    raw = {
        v: [
            [r["result"]["per_query"][f"q{i}"]["recall@100"] for i in range(40)]
            for _, r in archived_runs(archive, v)
        ]
        for v in ("first", "second")
    }
    first, second = np.mean(raw["first"], axis=0), np.mean(raw["second"], axis=0)
    assert figures["queries"] == 40
    assert figures["points"] == pytest.approx((first - second).mean() * 100)
    assert figures["p"] == pytest.approx(stats.ttest_rel(first, second).pvalue)
    assert figures["p"] < 0.01  # uniform(0.3, 1) against uniform(0, 0.8): a real difference


def test_a_variant_run_once_pairs_with_every_seed_of_the_other(archive: Path, capsys) -> None:
    assert main([str(archive), "first", "zero-shot", "--metrics", "recall@100"]) == 0
    out = capsys.readouterr().out
    assert "first: seeds 13, 14" in out and "zero-shot: seeds 13" in out
    assert "over 40 queries" in out


def test_a_variant_not_in_the_archive_is_named(archive: Path) -> None:
    with pytest.raises(SystemExit, match="no run of 'mural'"):
        main([str(archive), "first", "mural"])
