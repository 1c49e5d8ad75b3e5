"""The demo path end to end at tiny size, with the real bundled MiniLM backbone."""

from __future__ import annotations

import json
import math

import pyarrow.parquet as pq
import pytest

from jobs.cli import main
from jobs.commands import runs as commands
from jobs.demo import run_demo


@pytest.mark.e2e
def test_demo_runs_every_stage_and_reports_sane_metrics(tmp_path, monkeypatch) -> None:
    # `madr demo ...` as typed; the wrapper keeps what run_demo returns, for the checks below.
    returned: dict = {}
    monkeypatch.setattr(commands, "run_demo", lambda args: returned.update(run_demo(args)))
    assert (
        main(
            [
                "demo",
                "--out",
                str(tmp_path / "demo"),
                "--num_products",
                "800",
                "--num_queries",
                "80",
                "--seed",
                "3",
                "--max_document_length",
                "32",
                "--pretrain_steps",
                "4",
                # The store export is adapted in tests/test_store_export_e2e.py.
                "--store_export",
                "",
            ]
        )
        == 0
    )
    result = returned
    evaluation = result["evaluation"]
    ann = evaluation["summary"]

    # Depth is capped at the corpus, so every product is retrieved: recall@10000 (its name kept over the
    # 800-product corpus) is 1.
    assert "recall@10000" in ann and ann["recall@10000"].mean == pytest.approx(1.0)
    recalls = [ann[name].mean for name in ("recall@10", "recall@100", "recall@10000")]
    assert recalls == sorted(recalls)
    # A fine-tuned MiniLM finds relevant products far above chance (chance recall@100 is 100/800).
    assert ann["recall@100"].mean > 0.4
    assert ann["ndcg@10"].mean > 0.3
    # The small corpus is scored exactly inside ScaNN: the index loses nothing against exact search.
    for name in ("recall@10", "recall@100"):
        assert math.isclose(evaluation["ann_vs_exact"][name]["loss"], 0.0, abs_tol=0.02)
    assert (tmp_path / "demo" / "eval" / "recall_at_k.png").stat().st_size > 10_000
    # The demo ends with its morning report, the model's row beside the zero-shot backbone's.
    report = (tmp_path / "demo" / "report.html").read_text()
    assert result["report"] == str(tmp_path / "demo" / "report.html")
    assert f"<td>ndcg@10</td><td>{ann['ndcg@10'].mean:.4f}</td>" in report and "zero-shot backbone" in report

    demo = tmp_path / "demo"
    # What the README quotes, as the demo printed it (bench/readme_excerpts.py puts it in the README).
    results = (demo / "excerpts" / "results.txt").read_text()
    assert results.startswith("metric ") and f"ndcg@10       {ann['ndcg@10'].mean:.4f}" in results, results
    assert "Against the backbone used zero-shot" in results and "Aspect annotations" in results
    annotated = (demo / "excerpts" / "annotated.txt").read_text().splitlines()
    assert annotated and annotated[0].startswith("   - ") and annotated[1].startswith("       predicted: ")
    metrics = json.loads((demo / "eval" / "metrics.json").read_text())
    # The demo evaluates with --searcher auto: both searchers timed on a sample, the choice recorded.
    choice = metrics["searcher_choice"]
    assert choice["choice"] in ("ann", "exact") and choice["ann_recall"] == pytest.approx(1.0)
    assert choice["ann_seconds"] > 0 and choice["exact_seconds"] > 0
    assert metrics["num_queries"] == evaluation["counts"]["queries_scored"] > 0
    manifest = json.loads((demo / "embeddings" / "manifest.json").read_text())
    counts = manifest["counts"]
    assert counts["products_read"] == counts["products_embedded"] + counts["products_dead_lettered"] == 800
    assert json.loads((demo / "index" / "manifest.json").read_text())["count"] == 800
    assert json.loads((demo / "model" / "manifest.json").read_text())["kind"] == "madr-model"
    run = pq.read_table(list((demo / "eval").glob("run-*.parquet")))
    assert set(run.column_names) == {"query_id", "product_id", "rank", "score"}

    # The shipped variant annotates: every shard row carries a confidence per aspect, and a value for each
    # aspect but brand and colour where the product's text does not name the predicted one.
    shards = pq.read_table(list((demo / "embeddings").glob("embeddings-*.parquet")))
    values = [dict(v) for v in shards.column("aspect_values").to_pylist()]
    confidences = shards.column("aspect_confidences").to_pylist()
    assert all("category" in v for v in values) and all(len(c) == 3 for c in confidences)
    assert sum("brand" in v for v in values) > 0.5 * len(values)
    # The gaps are filled with provenance, and the counts reconcile per aspect.
    enriched = json.loads((demo / "enriched" / "manifest.json").read_text())["counts"]
    assert enriched["products_read"] == enriched["enriched_products_written"] == 800
    for aspect in ("category", "brand", "color"):
        parts = (enriched[f"{aspect}_{kind}"] for kind in ("from_catalog", "predicted", "withheld", "empty"))
        assert sum(parts) == 800
        # ... and the report shows the same counts.
        shown = ("from_catalog", "predicted")
        cells = "".join(f"<td>{enriched[f'{aspect}_{kind}']:,}</td>" for kind in shown)
        assert f"<td>{aspect}</td>{cells}" in report
    # Evaluation scores the annotations on the products pre-training held out.
    quality = json.loads((demo / "eval" / "annotation_quality.json").read_text())
    assert set(quality["products"]["accuracy"]) == {"category", "brand", "color"}
    assert 0 < quality["products_measured"] < 800 and "held-out products (5% of" in quality["held_out"]
    # The reliability diagram's points cover every scored product once, and the report draws them.
    for aspect, count in quality["products"]["counts"].items():
        bins = quality["products"]["reliability"][aspect]
        assert sum(b["count"] for b in bins) == count and all(0 <= b["accuracy"] <= 1 for b in bins)
    assert "alt='Reliability diagram, confidence against observed accuracy." in report
    # ... and the values the embed stage wrote score as the model does (same fp32 model, no threshold;
    # ONNX Runtime and torch agree to 1e-6, which can still flip a near tie of a briefly trained model).
    assert quality["written"] == pytest.approx(quality["products"]["accuracy"], abs=0.05)
    assert "Aspect annotations on" in evaluation["table"]
    # ... and beside the model, the backbone used zero-shot on the same queries, with paired t-tests.
    zero_shot = json.loads((demo / "eval" / "zero_shot.json").read_text())
    assert zero_shot["metrics"]["recall@100"]["queries"] == metrics["num_queries"]
    assert "Against the backbone used zero-shot" in evaluation["table"]
    # ... and BM25 and BM25 fused with zero-shot, on the same queries.
    lexical = json.loads((demo / "eval" / "lexical.json").read_text())
    # The index carries BM25: the reported ranking is the served one (dense + BM25), so BM25 + the model
    # is the model's own row, and the lexical rows come from the index's BM25.
    assert set(lexical["systems"]) == {"bm25", "bm25+zero-shot"} and lexical["model_ranking"] == "served"
    assert lexical["systems"]["bm25"]["metrics"]["recall@100"]["queries"] == metrics["num_queries"]
    assert "Against bm25+zero-shot" in evaluation["table"]
    assert result["store"] is None
