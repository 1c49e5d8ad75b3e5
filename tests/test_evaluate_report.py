"""The evaluation report: exact vs ANN in one job, the recall@k plot, the dataset's relevance rule, AUC.

The ANN index here holds the right ids but negated vectors, so it ranks the catalog upside down and
loses recall against exact search; both sides of the comparison are recomputed by hand from run files.
"""

from __future__ import annotations

import json
import math
import struct
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from evaluation.plot import k_grid, recall_curve
from index_builder import ExactSearcher, ScannIndexBuilder
from jobs.cli import parse_command
from pipelines.embed.stage import embed_catalog
from pipelines.evaluate.calibration import calibrate, choose
from pipelines.evaluate.report import resolve_rule
from pipelines.evaluate.searchers import searcher_specs
from pipelines.evaluate.stage import SearcherSpec, evaluate_retrieval
from pipelines.io.parquet_reading import read_embeddings
from pipelines.settings.options import EvaluateSettings
from schemas import JUDGMENT_SCHEMA, PRODUCT_SCHEMA, QUERY_SCHEMA

ITEMS = ["juicer", "blender", "socks", "sneakers", "lamp", "toaster"]
NUM_PRODUCTS = 60
METRICS = "recall@5,recall@20,recall@100,auc"  # recall@100 ranks the whole 60-product corpus
# Queries q0 and q4 have no grade-3 product: relevant under grade >= 2, undefined under ESCI's grade >= 3.
GRADES = {j: ([2, 2, 1, 0, 0] if j % 4 == 0 else [3, 2, 2, 1, 0]) for j in range(8)}


@pytest.fixture(scope="module")
def collection(tmp_path_factory: pytest.TempPathFactory, tiny_model_dir: Path) -> dict[str, str]:
    root = tmp_path_factory.mktemp("report-collection")
    products = [
        {
            "product_id": f"p{i}",
            "title": f"{ITEMS[i % 6]} number {i}",
            "description": None,
            "bullet_points": [],
            "brand": None,
            "color": None,
            "category_path": [ITEMS[i % 6]],
            "aspects": None,
            "locale": "us",
        }
        for i in range(NUM_PRODUCTS)
    ]
    queries = [
        {"query_id": f"q{j}", "text": f"{ITEMS[j % 6]} {j}", "aspects": None, "split": "test"}
        for j in range(8)
    ]
    judgments = [
        {"query_id": f"q{j}", "product_id": f"p{(j + 7 * n) % NUM_PRODUCTS}", "grade": grade, "label": None}
        for j, grades in GRADES.items()
        for n, grade in enumerate(grades)
    ]
    for name in ("plain", "esci"):
        (root / name).mkdir()
        pq.write_table(
            pa.Table.from_pylist(judgments, schema=JUDGMENT_SCHEMA), root / name / "judgments.parquet"
        )
    # What product_data/ingest/writer.py writes for ESCI (only the fields the evaluation reads matter).
    manifest = {"kind": "dataset", "source": "esci", "positive_min_grade": 3, "gain_map": None, "files": {}}
    (root / "esci" / "manifest.json").write_text(json.dumps(manifest))
    paths = {
        "products": str(root / "products.parquet"),
        "queries": str(root / "queries.parquet"),
        "judgments": str(root / "plain" / "judgments.parquet"),
        "esci_judgments": str(root / "esci" / "judgments.parquet"),
        "embeddings": str(root / "embeddings"),
        "index": str(root / "upside_down_index"),
        "model": str(tiny_model_dir),
    }
    pq.write_table(pa.Table.from_pylist(products, schema=PRODUCT_SCHEMA), paths["products"])
    pq.write_table(pa.Table.from_pylist(queries, schema=QUERY_SCHEMA), paths["queries"])
    embed_catalog(
        *parse_command(
            "embed",
            ["--products", paths["products"], "--model", paths["model"], "--output", paths["embeddings"]],
        )
    )
    ids, matrix, manifest = read_embeddings(paths["embeddings"])
    index = ScannIndexBuilder.for_corpus(len(ids), matrix.shape[1], depth=NUM_PRODUCTS).build(-matrix, ids)
    index.save(paths["index"], model_id=manifest["model_id"], model_version=manifest["model_version"])
    return paths


def _evaluate(collection: dict[str, str], out: Path, judgments: str, *flags: str) -> dict[str, Any]:
    typed = ["--queries", collection["queries"], "--judgments", judgments, "--model", collection["model"],
             "--output", str(out), "--metrics", METRICS, *flags]  # fmt: skip
    return evaluate_retrieval(*parse_command("evaluate", typed))


@pytest.fixture(scope="module")
def exact_run(collection, tmp_path_factory) -> tuple[dict[str, Any], Path]:
    out = tmp_path_factory.mktemp("exact")
    flags = ("--searcher", "exact", "--embeddings", collection["embeddings"])
    return _evaluate(collection, out, collection["judgments"], *flags), out


@pytest.fixture(scope="module")
def compared_run(collection, tmp_path_factory) -> tuple[dict[str, Any], Path]:
    out = tmp_path_factory.mktemp("compared")
    # --searcher ann with --embeddings too: --compare_exact is on by default.
    flags = ("--searcher", "ann", "--index", collection["index"], "--embeddings", collection["embeddings"])
    return _evaluate(collection, out, collection["judgments"], *flags), out


def _metrics_json(folder: Path) -> dict[str, Any]:
    return json.loads((folder / "metrics.json").read_text())


def _run(folder: Path) -> dict[str, list[str]]:
    ranked: dict[str, list[str]] = {}
    for row in sorted(pq.read_table(list(folder.glob("run-*.parquet"))).to_pylist(), key=lambda r: r["rank"]):
        ranked.setdefault(row["query_id"], []).append(row["product_id"])
    return ranked


def _judged() -> dict[str, dict[str, int]]:
    return {
        f"q{j}": {f"p{(j + 7 * n) % NUM_PRODUCTS}": grade for n, grade in enumerate(grades)}
        for j, grades in GRADES.items()
    }


def _mean_recall(ranked: dict[str, list[str]], k: int, min_grade: int = 2) -> float:
    """recall@k by hand: the mean over queries with relevant products of |relevant ∩ top k| / |relevant|."""
    values = []
    for query_id, grades in _judged().items():
        relevant = {pid for pid, grade in grades.items() if grade >= min_grade}
        if relevant:
            values.append(len(relevant & set(ranked[query_id][:k])) / len(relevant))
    return sum(values) / len(values)


def test_one_job_reports_exact_ann_and_the_loss_per_recall(compared_run, exact_run) -> None:
    result, folder = compared_run
    exact, exact_folder = exact_run
    document = _metrics_json(folder)
    table = document["ann_vs_exact"]
    assert list(table) == ["recall@5", "recall@20", "recall@100"]
    ann_ranked, exact_ranked = _run(folder), _run(exact_folder)
    for name, row in table.items():
        k = int(name.split("@")[1])
        # exact: what a separate exact-only job ranks; ann: this job's own (upside-down index) ranking.
        assert row["exact"] == pytest.approx(_mean_recall(exact_ranked, k), abs=1e-12), name
        assert row["exact"] == pytest.approx(exact["summary"][name].mean, abs=1e-12), name
        assert row["ann"] == pytest.approx(_mean_recall(ann_ranked, k), abs=1e-12), name
        assert row["ann"] == pytest.approx(document["metrics"][name]["mean"], abs=1e-12), name
        assert row["loss"] == pytest.approx(row["exact"] - row["ann"], abs=1e-12), name
        assert row["queries"] == 8
    # Everything is retrieved at the corpus size; at 5, the upside-down index misses what exact finds.
    assert table["recall@100"] == {"exact": 1.0, "ann": 1.0, "loss": 0.0, "queries": 8}
    assert table["recall@5"]["loss"] > 0
    assert result["ann_vs_exact"] == table
    assert "Recall lost to the index (exact − ann):" in result["table"]
    loss_line = next(
        line for line in result["table"].splitlines() if line.startswith("recall@5 ") and "+" in line
    )
    assert loss_line.split() == [
        "recall@5",
        f"{table['recall@5']['exact']:.4f}",
        f"{table['recall@5']['ann']:.4f}",
        f"{table['recall@5']['loss']:+.4f}",
    ]
    assert result["counts"]["queries_scored"] == result["counts"]["queries_scored_exact"] == 8
    assert result["counts"]["queries_searched"] == result["counts"]["queries_searched_exact"] == 8
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["compare_exact"] is True and "recall_at_k.png" in manifest["files"]
    # Only the primary searcher's run is kept, and no temporary row files are left behind.
    assert len(ann_ranked) == 8 and all(len(ids) == NUM_PRODUCTS for ids in ann_ranked.values())
    assert not list(folder.glob("tmp-*"))


def test_compare_exact_flag_defaults_and_refusals() -> None:
    def specs(*flags: str) -> list[str]:
        return list(searcher_specs(_settings(*flags)))

    assert specs("--index", "i", "--embeddings", "e") == ["ann", "exact"]
    assert specs("--index", "i") == ["ann"]
    assert specs("--index", "i", "--embeddings", "e", "--compare_exact", "false") == ["ann"]
    assert specs("--searcher", "exact", "--embeddings", "e") == ["exact"]
    with pytest.raises(ValueError, match="--compare_exact needs --searcher ann with both"):
        specs("--index", "i", "--compare_exact")
    with pytest.raises(ValueError, match="--compare_exact needs"):
        specs("--searcher", "exact", "--embeddings", "e", "--compare_exact", "true")


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def test_recall_at_k_plot_and_curve_agree_with_the_metrics(compared_run) -> None:
    result, folder = compared_run
    plot = folder / "recall_at_k.png"
    assert plot.stat().st_size > 20_000  # axes, two lines, legend: far more than a blank canvas
    assert _png_size(plot) == (840, 540)
    curve = _metrics_json(folder)["recall_at_k"]
    assert curve == result["recall_at_k"]
    assert curve["k"] == [1, 2, 5, 10, 20, 50, 60] and curve["queries"] == 8 and curve["plot"] == plot.name
    for searcher in ("ann", "exact"):
        values = curve[searcher]
        assert values == sorted(values) and values[-1] == 1.0
    # The curve comes from the relevant ranks, the metrics from evaluate_query: they must agree.
    table = result["ann_vs_exact"]
    for k in (5, 20):
        index = curve["k"].index(k)
        assert curve["ann"][index] == pytest.approx(table[f"recall@{k}"]["ann"], abs=1e-12)
        assert curve["exact"][index] == pytest.approx(table[f"recall@{k}"]["exact"], abs=1e-12)


def test_positive_min_grade_comes_from_the_dataset_manifest(collection, exact_run, tmp_path) -> None:
    plain, plain_folder = exact_run
    flags = ("--searcher", "exact", "--embeddings", collection["embeddings"])
    esci = _evaluate(collection, tmp_path, collection["esci_judgments"], *flags)
    document = _metrics_json(tmp_path)
    assert document["relevance_rule"]["positive_min_grade"] == 3
    assert "manifest.json" in document["relevance_rule_source"]
    assert _metrics_json(plain_folder)["relevance_rule"]["positive_min_grade"] == 2
    # q0 and q4 hold no grade-3 product: their recall is undefined under the ESCI rule.
    assert (plain["summary"]["recall@5"].count, esci["summary"]["recall@5"].count) == (8, 6)
    assert esci["summary"]["recall@5"].undefined == 2
    judged, esci_ranked, plain_ranked = _judged(), _run(tmp_path), _run(plain_folder)
    esci_rows = {row["query_id"]: row for row in pq.read_table(tmp_path / "per_query.parquet").to_pylist()}
    plain_rows = {
        row["query_id"]: row for row in pq.read_table(plain_folder / "per_query.parquet").to_pylist()
    }
    differs = 0
    for query_id, grades in judged.items():
        for min_grade, rows, ranked in ((3, esci_rows, esci_ranked), (2, plain_rows, plain_ranked)):
            relevant = {pid for pid, grade in grades.items() if grade >= min_grade}
            for k in (5, 20):
                got = rows[query_id][f"recall@{k}"]
                if not relevant:
                    assert math.isnan(got)
                else:
                    assert got == pytest.approx(len(relevant & set(ranked[query_id][:k])) / len(relevant))
        if query_id not in ("q0", "q4"):
            differs += sum(
                esci_rows[query_id][m] != plain_rows[query_id][m] for m in ("recall@5", "recall@20")
            )
    assert differs > 0  # the same rankings, scored under another rule


def test_auc_runs_end_to_end(exact_run) -> None:
    result, folder = exact_run
    assert result["summary"]["auc"].count == 8
    assert _metrics_json(folder)["metrics"]["auc"]["definition"].startswith("P(random judged positive")
    ranked = _run(folder)
    rows = {row["query_id"]: row for row in pq.read_table(folder / "per_query.parquet").to_pylist()}
    for query_id, grades in _judged().items():
        rank = {pid: position for position, pid in enumerate(ranked[query_id])}
        positives = [rank[pid] for pid, grade in grades.items() if grade >= 2]
        negatives = [rank[pid] for pid, grade in grades.items() if grade < 2]
        wins = sum(p < n for p in positives for n in negatives)
        assert rows[query_id]["auc"] == pytest.approx(wins / (len(positives) * len(negatives)))
    assert result["summary"]["auc"].mean == pytest.approx(np.mean([row["auc"] for row in rows.values()]))


def test_relevance_rule_precedence(tmp_path) -> None:
    judgments = str(tmp_path / "judgments.parquet")
    assert resolve_rule(judgments, None)[0].positive_min_grade == 2
    assert resolve_rule(judgments, None)[1] == "default"
    (tmp_path / "manifest.json").write_text(
        json.dumps({"kind": "benchmark", "relevance": {"positive_min_grade": 4}})
    )
    assert resolve_rule(judgments, None)[0].positive_min_grade == 4  # the synthetic benchmark's layout
    (tmp_path / "manifest.json").write_text(json.dumps({"kind": "dataset", "positive_min_grade": 3}))
    assert resolve_rule(judgments, None)[0].positive_min_grade == 3
    assert resolve_rule(judgments, 1) == (resolve_rule(judgments, 1)[0], "--positive_min_grade")
    assert resolve_rule(judgments, 1)[0].positive_min_grade == 1
    (tmp_path / "manifest.json").write_text(json.dumps({"kind": "dataset", "positive_min_grade": None}))
    assert resolve_rule(judgments, None)[0].positive_min_grade == 2  # a generic dataset that says nothing
    (tmp_path / "manifest.json").write_text(json.dumps({"kind": "dataset", "positive_min_grade": "3"}))
    with pytest.raises(ValueError, match="positive_min_grade must be an int"):
        resolve_rule(judgments, None)


def test_k_grid_and_recall_curve_by_hand() -> None:
    assert k_grid(1) == [1]
    assert k_grid(100) == [1, 2, 5, 10, 20, 50, 100]
    assert k_grid(120) == [1, 2, 5, 10, 20, 50, 100, 120]
    assert k_grid(10_000)[-3:] == [2000, 5000, 10_000]
    rows = [
        {"query_id": "a", "num_relevant": 2, "ranks": [1, 7]},
        {"query_id": "b", "num_relevant": 4, "ranks": [3]},
        {"query_id": "c", "num_relevant": 0, "ranks": []},  # no relevant product: no recall
    ]
    values, queries = recall_curve(rows, [1, 5, 10])
    assert queries == 2
    assert values == pytest.approx([(0.5 + 0) / 2, (0.5 + 0.25) / 2, (1.0 + 0.25) / 2])
    assert all(math.isnan(v) for v in recall_curve(rows[2:], [1, 5])[0])
    with pytest.raises(ValueError, match="3 ranks for 2 relevant"):
        recall_curve([{"query_id": "d", "num_relevant": 2, "ranks": [1, 2, 3]}], [1])


def test_auto_picks_exact_when_the_index_loses_recall(collection, exact_run, tmp_path) -> None:
    # At depth 10 the upside-down index returns each query's 10 worst products: recall 0 against exact.
    flags = ("--searcher", "auto", "--index", collection["index"], "--embeddings", collection["embeddings"],
             "--depth", "10", "--metrics", "recall@5,recall@10")  # fmt: skip
    result = _evaluate(collection, tmp_path, collection["judgments"], *flags)
    document = _metrics_json(tmp_path)
    choice = document["searcher_choice"]
    assert choice["queries"] == 8 and choice["depth"] == 10 and choice["min_recall"] == 0.99
    assert choice["ann_recall"] == 0.0 and choice["ann_seconds"] > 0 and choice["exact_seconds"] > 0
    assert choice["choice"] == "exact" and "below 0.99" in choice["reason"]
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["searcher"] == "exact" and manifest["searcher_choice"] == choice
    assert result["searcher_choice"] == choice and result["table"].startswith(
        "Searcher: exact, measured on 8"
    )
    # The chosen searcher is primary (its run and its means); the index is still searched and reported.
    exact, exact_folder = exact_run
    exact_ranked = _run(exact_folder)
    # The kept run is exact search's top 10, not the index's (exact's bottom 10). Separate jobs batch the
    # query encoding differently, so near-tied products of this untrained model may swap: hence >= 8.
    kept = _run(tmp_path)
    assert kept.keys() == exact_ranked.keys()
    for query_id, ranked in exact_ranked.items():
        assert len(set(kept[query_id]) & set(ranked[:10])) >= 8 and not set(kept[query_id]) & set(
            ranked[-10:]
        )
    assert document["metrics"]["recall@5"]["mean"] == pytest.approx(exact["summary"]["recall@5"].mean)
    assert result["counts"]["queries_scored"] == result["counts"]["queries_scored_ann"] == 8
    assert document["ann_vs_exact"]["recall@5"]["loss"] > 0


def test_auto_choice_follows_the_measurements(collection, tmp_path) -> None:
    ids, matrix, manifest = read_embeddings(collection["embeddings"])
    index = ScannIndexBuilder.for_corpus(len(ids), matrix.shape[1], depth=NUM_PRODUCTS).build(matrix, ids)
    index.save(tmp_path / "index", model_id=manifest["model_id"], model_version=manifest["model_version"])
    ann, exact = SearcherSpec("ann", str(tmp_path / "index")), SearcherSpec("exact", collection["embeddings"])
    sample = matrix[::4]  # 15 real embeddings
    free = calibrate(ann, exact, sample, depth=10, min_recall=0.0)
    assert free.choice == ("ann" if free.ann_seconds < free.exact_seconds else "exact")
    # recall by hand: the index's top 10 against exact search's (near-ties of this untrained model make
    # even a numpy argsort disagree with ExactSearcher's float32 blocks, so the truth is ExactSearcher's).
    found = index.search(sample, 10).ids
    truth = ExactSearcher(matrix, ids).search(sample, 10).ids
    hand = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(found, truth, strict=True)])
    assert free.ann_recall == pytest.approx(hand) and hand > 0.5
    strict = calibrate(ann, exact, sample, depth=10, min_recall=1.01)
    assert strict.choice == "exact" and "below 1.01" in strict.reason
    assert calibrate(SearcherSpec("ann", collection["index"]), exact, sample, depth=10).ann_recall == 0.0


def test_choose_needs_recall_and_speed() -> None:
    assert choose(1.0, 2.0, 0.99)[0] == "ann"  # exactly within 1% of exact counts
    assert choose(1.0, 2.0, 0.989)[0] == "exact"
    assert choose(2.0, 1.0, 1.0) == ("exact", "recall 1.0000 >= 0.99, but exact search is as fast or faster")
    assert choose(1.0, 1.0, 1.0)[0] == "exact"


def test_auto_needs_both_searchers() -> None:
    with pytest.raises(ValueError, match="--searcher auto needs both --index and --embeddings"):
        searcher_specs(_settings("--searcher", "auto", "--index", "i"))
    assert list(searcher_specs(_settings("--searcher", "auto", "--index", "i", "--embeddings", "e"))) == [
        "ann",
        "exact",
    ]


def _settings(*flags: str) -> EvaluateSettings:
    """`madr evaluate`'s settings of `flags` (its required inputs made up)."""
    required = ["--queries", "q", "--judgments", "j", "--model", "m", "--output", "o"]
    return parse_command("evaluate", [*required, *flags])[0].evaluate
