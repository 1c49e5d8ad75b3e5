"""Runs kept in `--run_archive`: one experiment's seeds spread over sessions pool as if run at once."""

from __future__ import annotations

import dataclasses
import json
import math
import shutil

import numpy as np
import pyarrow.parquet as pq
import pytest

import jobs.experiment as experiment
from evaluation.experiment_stats import pool_seeds
from jobs.experiment_config import ExperimentConfig
from pipelines.experiment.runs import RunArchive
from pipelines.layout import DatasetLayout
from pipelines.storage.stage_manifests import write_stage_manifest
from product_data.synthetic import generate_benchmark

CONFIG = ExperimentConfig(
    variants=("zero-shot", "bibert"),
    baseline="zero-shot",
    num_products=600,
    num_queries=40,
    held_out_products=60,
    seeds=2,
)


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> DatasetLayout:
    root = tmp_path_factory.mktemp("experiment")
    layout = DatasetLayout(str(root / "data"))
    generate_benchmark(CONFIG.benchmark(), layout.root)
    return layout


def _run(data: DatasetLayout, seed: int) -> dict:
    """A run's result as `_run_result` returns it, with made-up figures (NaN where a metric is undefined)."""
    rng = np.random.default_rng(seed)
    test = [q["query_id"] for q in pq.read_table(data.queries).to_pylist() if q["split"] == "test"]
    per_query = {
        q: {"query_id": q, "recall@100": float(rng.uniform()), "ndcg@10": float(rng.uniform())} for q in test
    }
    per_query[test[0]]["ndcg@10"] = math.nan
    return {
        "per_query": per_query,
        "timings": {"train": float(seed)},
        "query_accuracy": {"accuracy": {"brand": 0.5}, "accuracy_at_3": {"brand": 0.75}},
        "product_accuracy": None,
        "document_cosine": np.float32(0.25),
    }


def test_a_kept_run_reads_back_as_it_was_and_pools_the_same(data: DatasetLayout, tmp_path) -> None:
    archive = RunArchive.open(tmp_path / "archive", CONFIG, data)
    runs = [_run(data, 13), _run(data, 14)]
    assert archive.load("bibert", 13) is None
    for seed, run in zip((13, 14), runs, strict=True):
        archive.keep("bibert", seed, run)
    read = [archive.load("bibert", 13), archive.load("bibert", 14)]
    pooled, pooled_read = pool_seeds(runs), pool_seeds(read)
    assert pooled_read["sd"] == pooled["sd"] and pooled_read["timings"] == {"train": 27.0}
    for query_id, row in pooled["per_query"].items():
        for name, value in row.items():
            theirs = pooled_read["per_query"][query_id][name]
            assert theirs == value or (math.isnan(value) and math.isnan(theirs))
    assert pooled_read["document_cosine"] == pytest.approx(0.25)
    before = archive.path("bibert", 13).read_bytes()
    archive.keep("bibert", 13, runs[0])
    assert archive.path("bibert", 13).read_bytes() == before  # nothing for git to see on a re-run


def test_a_run_of_other_settings_or_other_data_is_refused(data: DatasetLayout, tmp_path) -> None:
    RunArchive.open(tmp_path, CONFIG, data).keep("bibert", 13, _run(data, 13))
    other = dataclasses.replace(CONFIG, epochs=2, seeds=3, variants=("bibert",), baseline="bibert")
    with pytest.raises(ValueError, match=r"other settings \(epochs=4 there, 2 here\)"):
        RunArchive.open(tmp_path, other, data).load("bibert", 13)
    # Seeds and variants choose the runs, not what a run is: the same run counts for a larger table.
    more = dataclasses.replace(CONFIG, seeds=3, variants=("bibert",), baseline="bibert")
    assert RunArchive.open(tmp_path, more, data).load("bibert", 13) is not None
    moved = RunArchive(tmp_path, "0" * 64, RunArchive.open(tmp_path, CONFIG, data).settings)
    with pytest.raises(ValueError, match="made over other data"):
        moved.load("bibert", 13)


def test_the_experiment_reads_kept_runs_instead_of_running_them(
    data: DatasetLayout, tmp_path, monkeypatch, capsys
) -> None:
    root = tmp_path / "run"
    shutil.copytree(data.root, root / "data")  # the experiment's own data: nothing generated again
    config = dataclasses.replace(CONFIG, run_archive=str(tmp_path / "archive"))
    archive = RunArchive.open(config.run_archive, config, DatasetLayout(str(root / "data")))
    kept = {("zero-shot", 13): _run(data, 1), ("bibert", 13): _run(data, 13), ("bibert", 14): _run(data, 14)}
    for (variant, seed), run in kept.items():
        archive.keep(variant, seed, run)

    def must_not_run(*args, **kwargs):
        raise AssertionError(f"ran {args[1]} although its result was kept")

    monkeypatch.setattr(experiment, "_run_variant", must_not_run)
    report = experiment.run_experiment(config, str(root))
    bibert = report["summary"]["bibert"]
    assert bibert["seeds"] == 2
    expected = np.mean(
        [np.mean([r["recall@100"] for r in kept[("bibert", s)]["per_query"].values()]) for s in (13, 14)]
    )
    assert bibert["means"]["recall@100"] == pytest.approx(expected)
    assert json.loads((root / "results.json").read_text())["config"]["run_archive"] == config.run_archive
    # BM25 ranks the catalog beside the models; the zero-shot run came from the archive, so no fusion.
    bm25 = report["summary"]["bm25"]
    assert "bm25+zero-shot" not in report["summary"] and 0 < bm25["means"]["recall@100"] <= 1
    assert "recall@100" in bm25["pvalues"] and "| bm25 |" in (root / "results.md").read_text()
    # Nothing ran, so there is no pace to report: no "runs done" line with an ETA from instant reads.
    printed = capsys.readouterr().out
    assert f"3 runs are in {tmp_path / 'archive'}, 0 to run" in printed and "runs done" not in printed


def test_the_pace_counts_only_runs_that_trained_or_embedded_here_and_a_resumed_run_keeps_its_cost(
    data: DatasetLayout, tmp_path, monkeypatch, capsys
) -> None:
    root = tmp_path / "run"
    shutil.copytree(data.root, root / "data")

    def resumed_zero_shot(config, variant, data, folder, stages) -> None:
        if variant != "zero-shot":
            stages.run("train", lambda: None)
            return
        # Every stage finished by an earlier attempt, which wrote down what it took.
        (folder / "stage_seconds.json").write_text(json.dumps({"embed": 5.0}))
        embeddings = folder / "embeddings"
        embeddings.mkdir()
        write_stage_manifest(str(embeddings), "madr-test-stage", {})
        stages.run("embed", lambda: pytest.fail("a finished stage ran"), embeddings)

    timings: dict[str, dict[str, float]] = {}

    def result(data, folder, rule, held_out, stage_timings) -> dict:
        timings[str(folder.relative_to(root))] = stage_timings
        return _run(data, len(str(folder)))

    monkeypatch.setattr(experiment, "_run_variant", resumed_zero_shot)
    monkeypatch.setattr(experiment, "_run_result", result)
    experiment.run_experiment(CONFIG, str(root))
    printed = capsys.readouterr().out
    # Three runs; zero-shot's was finished before, so the two bibert seeds are the whole count.
    assert "runs done: 1 of 2" in printed and "runs done: 2 of 2" in printed and "of 3" not in printed
    assert f"zero-shot, seed 13: finished by an earlier attempt in {root / 'zero-shot'}" in printed
    assert timings["zero-shot"] == {"embed": 5.0}  # the earlier attempt's seconds, not nothing
    assert set(timings["bibert"]) == set(timings["seeds/14/bibert"]) == {"train"}
