"""A catalog the generator did not make: the hand-written store export, adapted without judgments.

examples/store_export is a European shop's export written by hand: its own column names, brands the
synthetic catalog never has, breadcrumbs, HTML descriptions, German, French and Spanish listings,
near-duplicates, and graded judgments. `madr adapt` reads only its products; the judgments are used to
check that the adapted model retrieves no worse than the backbone used zero-shot.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from jobs.adapt import evaluate_model
from pipelines.layout import DatasetLayout
from pipelines.train.adapt import AdaptJob, run_adapt
from pipelines.train.shipped_recipe import adapt_loop
from product_data.ingest.export_folder import ingest_export_folder, load_export_folder

STORE = Path(__file__).resolve().parents[1] / "examples" / "store_export"


def test_the_export_ingests_whole() -> None:
    result = load_export_folder(STORE)
    for stream in ("products", "queries", "judgments"):
        counts = result.counts[stream]
        assert counts.rejected == 0 and counts.rows_in == counts.records_out > 0, (stream, counts)
    brands = {product["brand"] for product in result.products}
    assert {"Fellow", "Zwilling", "Fissler"} <= brands
    assert {product["locale"] for product in result.products} >= {"de_de", "en_gb"}
    # One mapping.json with a section per file; HTML read as plain text, the category the breadcrumbs' leaf.
    described = [product["description"] for product in result.products if product["description"]]
    assert described and not any("<p>" in text or "&amp;" in text for text in described)
    assert all(dict(p["aspects"])["category"] == [p["category_path"][-1]] for p in result.products)
    kept = load_export_folder(STORE, keep_html=True)
    assert any("<p>" in (product["description"] or "") for product in kept.products)


@pytest.mark.e2e
def test_adapting_to_the_store_keeps_retrieval_at_zero_shot_or_above(tmp_path) -> None:
    store = DatasetLayout(str(tmp_path / "store"))
    ingest_export_folder(STORE, store.root)
    # 25 steps, not the command's 100: the suite's budget (the demo runs 20; bench.zero_shot_bench the 100).
    job = AdaptJob(dataset=store.root, output=str(tmp_path / "adapted"), max_document_length=64, min_steps=25)
    loop = adapt_loop()
    report = run_adapt(job, loop)
    # The catalog's own brands are the classes now: the shop's Fellow is predicted as Fellow, not as
    # the nearest brand of another catalog.
    vocabulary = json.loads((Path(report.model_dir) / "aspect_vocabulary.json").read_text())
    assert "fellow" in json.dumps(vocabulary).lower()
    assert report.held_out_accuracy is not None
    manifest = json.loads((Path(report.model_dir) / "manifest.json").read_text())
    assert manifest["calibrated_on_products"]["fraction"] == pytest.approx(0.025)
    result = evaluate_model(str(report.model_dir), store, tmp_path / "eval", overwrite=False)
    compared = result["zero_shot"]["metrics"]
    # The bar: Recall@100 within 0.5 points of zero-shot, NDCG@10 within 1 point, or above.
    assert compared["recall@100"]["delta"] >= -0.005, compared["recall@100"]
    assert compared["ndcg@10"]["delta"] >= -0.01, compared["ndcg@10"]
    assert compared["ndcg@10"]["queries"] == result["counts"]["queries_scored"] >= 30
    # BM25 over the same text. With one English analyzer for every listing, as the issue measured it by hand
    # with bm25s: R@100 0.826, NDCG@10 0.776; each listing analyzed in its locale's language (the 27 German,
    # French and Spanish ones too), the queries in the catalog's main one, English (issue 62):
    bm25 = result["lexical"]["systems"]["bm25"]["metrics"]
    # R@100 0.809, NDCG@10 0.759: a German listing's stems no longer meet an English query's words.
    assert bm25["recall@100"]["mean_a"] == pytest.approx(0.809, abs=0.001)
    assert bm25["ndcg@10"]["mean_a"] == pytest.approx(0.7585, abs=0.001)
