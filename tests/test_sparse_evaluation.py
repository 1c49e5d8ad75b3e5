"""UHD-BERT retrieved through its inverted indexes, as `madr experiment` does: recall, size, query time.

A hand-built index with known rankings pins the scoring; a tiny random UHD model on a small synthetic
benchmark runs the experiment's sparse path end to end and is checked against dense exact search.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import torch

from evaluation import RelevanceRule, aggregate, parse_metrics
from evaluation.experiment_report import write_report
from evaluation.experiment_stats import summarise
from evaluation.ranked import CorpusIds, score_query
from index_builder import ExactSearcher, InvertedIndex
from model import DenseEncoder, Side, load_encoder, new_encoder, text_for_model
from model.sparse import SparseVector
from pipelines.evaluate.judged_ranking import rerank_judged
from pipelines.evaluate.report import resolve_rule
from pipelines.evaluate.sparse import (
    is_sparse_model,
    read_sparse_results,
    run_sparse_evaluation,
    search_and_score,
)
from pipelines.evaluate.variant_metrics import unseen_products, variant_metrics
from pipelines.index.sparse import sparse_queries
from pipelines.layout import DatasetLayout
from pipelines.storage.verify import ModelMismatchError
from product_data.synthetic import SyntheticConfig, generate_benchmark
from schemas import write_manifest
from schemas.splits import HeldOutProducts
from tests.conftest import tiny_backbone

RULE = RelevanceRule(positive_min_grade=2)


def _product_texts(data: DatasetLayout, encoder: DenseEncoder) -> dict[str, str]:
    """Each product's text as the model reads it (what the index encoded)."""
    rows = pq.read_table(data.root + "/products").to_pylist()
    return {row["product_id"]: text_for_model(row, encoder.config) for row in rows}


def _hand_index() -> InvertedIndex:
    documents = [
        [np.array([0, 1]), np.array([0])],  # p0
        [np.array([1]), np.array([1])],  # p1
        [np.array([2]), np.array([2])],  # p2
        [np.array([3]), np.array([3])],  # p3
    ]
    return InvertedIndex.build(documents, ["p0", "p1", "p2", "p3"], buckets=2, dimensions=4)


def test_search_and_score_on_known_rankings() -> None:
    index = _hand_index()
    queries = [
        [np.array([0, 1]), np.array([0])],  # shares 3 dims with p0, 1 with p1: p0, p1, p2, p3
        [np.array([3]), np.array([2])],  # 1 with p2 and 1 with p3, a tie: the lower row first
        [np.array([0]), np.array([0])],  # unjudged: searched, not scored
    ]
    judgments = {"qa": {"p1": 3, "p3": 2, "p2": 0}, "qb": {"p3": 3}}
    metrics = parse_metrics(["recall@1", "recall@2", "recall@4"])
    rows, seconds = search_and_score(index, ["qa", "qb", "qc"], queries, judgments, metrics, RULE, depth=10)
    assert rows == [
        # qa: relevant p1 at rank 2 and p3 at rank 4.
        {"query_id": "qa", "recall@1": 0.0, "recall@2": 0.5, "recall@4": 1.0},
        # qb: p2 (row 2) wins the tie with p3 (row 3), so p3 is at rank 2.
        {"query_id": "qb", "recall@1": 0.0, "recall@2": 1.0, "recall@4": 1.0},
    ]
    assert seconds > 0
    # Query weights break the tie: 2.0 on p3's dim beats 0.5 on p2's.
    weighted = [[SparseVector(np.array([3]), np.array([2.0])), SparseVector(np.array([2]), np.array([0.5]))]]
    rows, _ = search_and_score(index, ["qb"], weighted, judgments, metrics, RULE, depth=10)
    assert rows[0]["recall@1"] == 1.0


@pytest.fixture(scope="module")
def sparse_run(tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = tmp_path_factory.mktemp("sparse-experiment")
    data = DatasetLayout(str(root / "data"))
    generate_benchmark(SyntheticConfig(num_products=400, num_queries=16, seed=3), data.root)
    folder = root / "uhd"
    encoder, tokenizer = new_encoder(
        "uhd", pretrained=False, backbone=tiny_backbone(), dimensions=256, winners=8,
        model_id="uhd-tiny", model_version="1",
    )  # fmt: skip
    encoder.save_pretrained(folder / "model", tokenizer)
    report = run_sparse_evaluation(data, folder / "model", folder / "eval", ["recall@10", "recall@50"])
    return {"data": data, "folder": folder, "report": report}


def test_both_indexes_report_recall_size_and_query_time(sparse_run: dict) -> None:
    folder: Path = sparse_run["folder"]
    eval_dir = folder / "eval"
    report = sparse_run["report"]
    assert report == read_sparse_results(eval_dir) and is_sparse_model(folder / "model")
    assert (eval_dir / "manifest.json").is_file()
    binary, weighted = report["indexes"]["binary"], report["indexes"]["weighted"]
    assert (binary["binary"], weighted["binary"]) == (True, False)
    assert binary["products"] == weighted["products"] == 400
    assert binary["postings"] == weighted["postings"] > 400
    for name, result in report["indexes"].items():
        directory = eval_dir / f"index-{name}"
        manifest = json.loads((directory / "manifest.json").read_text())
        listed = sum(entry["bytes"] for entry in manifest["files"].values())
        assert result["size_bytes"] == listed + (directory / "manifest.json").stat().st_size
        assert result["query_ms"] > 0 and result["encode_ms"] > 0
    # Binarization saves the values: 4 bytes a posting (values.npy), plus its header and manifest entry.
    assert weighted["size_bytes"] - binary["size_bytes"] >= 4 * weighted["postings"]
    test_queries = [q for q in pq.read_table(sparse_run["data"].queries).to_pylist() if q["split"] == "test"]
    rows = pq.read_table(eval_dir / "per_query.parquet").to_pylist()
    assert 0 < len(rows) <= len(test_queries) and set(rows[0]) == {"query_id", "recall@10", "recall@50"}
    assert binary["queries"] == len(rows)
    assert binary["means"] == {key: mean.mean for key, mean in aggregate(rows).items()}
    assert all(0 <= row["recall@10"] <= row["recall@50"] <= 1 for row in rows)


def test_weighted_index_retrieves_as_dense_exact_search_of_the_model(sparse_run: dict) -> None:
    """Eq. 7 through the weighted postings ranks as the model's embeddings do (Rel = buckets × dot)."""
    data, folder = sparse_run["data"], sparse_run["folder"]
    encoder, tokenizer = load_encoder(folder / "model", "cpu")
    index = InvertedIndex.load(folder / "eval" / "index-weighted")
    products = _product_texts(data, encoder)
    ids = list(index.ids)
    vectors = encoder.embed_texts(tokenizer, [products[pid] for pid in ids], Side.DOCUMENT).embedding
    exact = ExactSearcher(vectors.numpy(), ids)
    queries = [q for q in pq.read_table(data.queries).to_pylist() if q["split"] == "test"]
    judgments: dict[str, dict[str, int]] = {}
    for row in pq.read_table(data.judgments).to_pylist():
        judgments.setdefault(row["query_id"], {})[row["product_id"]] = row["grade"]
    query_embeddings = encoder.embed_texts(tokenizer, [q["text"] for q in queries], Side.QUERY).embedding
    found = exact.search(query_embeddings.numpy(), 50)
    rule, _ = resolve_rule(data.judgments, None)
    metrics = parse_metrics(["recall@10", "recall@50"])
    corpus = CorpusIds(ids)
    dense_rows = [
        score_query(q["query_id"], found.indices[i], judgments[q["query_id"]], corpus, metrics, rule)[0]
        for i, q in enumerate(queries)
        if judgments.get(q["query_id"])
    ]
    sparse_rows = pq.read_table(folder / "eval" / "per_query_weighted.parquet").to_pylist()
    assert sorted(sparse_rows, key=lambda r: r["query_id"]) == sorted(dense_rows, key=lambda r: r["query_id"])
    buckets = len(encoder.config.bucket_layers)
    assert buckets == 2
    top = index.search(sparse_queries(encoder, tokenizer, [q["text"] for q in queries], binary=False), 5)
    np.testing.assert_allclose(top.scores, buckets * found.scores[:, :5], rtol=1e-4, atol=1e-6)


def test_experiment_ranking_summary_and_table_for_a_sparse_variant(sparse_run: dict) -> None:
    data, folder = sparse_run["data"], sparse_run["folder"]
    driver = variant_metrics(data, folder, RULE, unseen_products(data, HeldOutProducts(0.25, by="title")))
    assert driver["query_accuracy"] is None  # UHD learns no aspects
    assert driver["document_cosine"] is None  # collapse is measured on dense embeddings only
    ranking = {row["query_id"]: row for row in driver["ranking_rows"]}
    assert ranking and all(0 <= row["ndcg@5"] <= 1 for row in ranking.values())
    # The weighted index re-ranks judged products exactly as the model's embeddings do.
    encoder, tokenizer = load_encoder(folder / "model", "cpu")
    queries = [q for q in pq.read_table(data.queries).to_pylist() if q["split"] == "test"]
    judgments: dict[str, dict[str, int]] = {}
    for row in pq.read_table(data.judgments).to_pylist():
        judgments.setdefault(row["query_id"], {})[row["product_id"]] = row["grade"]
    judged = sorted({pid for q in queries for pid in judgments.get(q["query_id"], {})})
    products = _product_texts(data, encoder)
    product_vectors = encoder.embed_texts(tokenizer, [products[pid] for pid in judged], Side.DOCUMENT)
    query_vectors = encoder.embed_texts(tokenizer, [q["text"] for q in queries], Side.QUERY)
    dense = rerank_judged(
        {q["query_id"]: query_vectors.embedding[i].numpy() for i, q in enumerate(queries)},
        dict(zip(judged, product_vectors.embedding.numpy(), strict=True)),
        judgments,
        RULE,
    )
    assert [row["query_id"] for row in dense] == list(ranking)
    for row in dense:
        assert row == pytest.approx(ranking[row["query_id"]])

    per_query = {
        row["query_id"]: row for row in pq.read_table(folder / "eval" / "per_query.parquet").to_pylist()
    }
    sparse = read_sparse_results(folder / "eval")
    assert sparse is not None
    results = {
        "uhd": {
            "per_query": per_query,
            "timings": {},
            "query_accuracy": None,
            "product_accuracy": None,
            "sparse_indexes": sparse["indexes"],
        }
    }
    summary = summarise(results, "uhd")
    assert (
        summary["uhd"]["sparse_indexes"]["weighted"]["postings"] == sparse["indexes"]["weighted"]["postings"]
    )
    assert math.isclose(
        summary["uhd"]["means"]["recall@10"], sparse["indexes"]["binary"]["means"]["recall@10"]
    )
    config = {"num_products": 400, "num_queries": 16, "baseline": "uhd"}
    markdown = write_report({"config": config, "summary": summary, "wall_seconds": 60}, folder / "results.md")
    table = [line for line in markdown.splitlines() if line.startswith("| uhd | ")]
    # The main table's row (this run has no recall@100: "–"), then one row per inverted index.
    assert [line.split(" | ")[1] for line in table] == ["–", "binary", "weighted"]
    binary = sparse["indexes"]["binary"]
    assert f"| {binary['means']['recall@10']:.4f} | {binary['means']['recall@50']:.4f} | " in table[1]
    assert (
        f"| {binary['size_bytes'] / 2**20:.1f} | {binary['postings']:,} | {binary['query_ms']:.2f} |"
        in table[1]
    )


def test_held_out_products_are_the_rules_minus_tuned_judgments_and_their_near_duplicates(
    sparse_run: dict,
) -> None:
    """Regenerates the experiment's held-out set from the code: the title rule's products, less those
    judged for train or valid queries and those whose title words are one of theirs."""
    from model.text import document_text_with_aspects
    from schemas.splits import title_key

    data = sparse_run["data"]
    rule = HeldOutProducts(0.25, by="title")
    products = unseen_products(data, rule)
    catalog = pq.read_table(f"{data.root}/products").to_pylist()
    tuned = {q["query_id"] for q in pq.read_table(data.queries).to_pylist() if q["split"] != "test"}
    judged = {j["product_id"] for j in pq.read_table(data.judgments).to_pylist() if j["query_id"] in tuned}
    trained_titles = {
        title_key(p["title"]) for p in catalog if not rule.holds(p) or p["product_id"] in judged
    }
    expected = {
        p["product_id"]
        for p in catalog
        if p["aspects"] and rule.holds(p) and title_key(p["title"]) not in trained_titles
    }
    ids = {p["product_id"] for p in products}
    assert ids == expected and not ids & judged
    # No held-out product has a near-duplicate title among the products trained on.
    assert not {title_key(p["title"]) for p in products} & trained_titles
    # BiBERT-CONCAT's text builder reads the aspects as a dict (it crashed on Parquet's pairs).
    assert all(isinstance(p["aspects"], dict) for p in products)
    assert "category: " in document_text_with_aspects(products[0], ("category", "brand", "color"))


def test_an_index_another_model_left_in_the_folder_is_refused(sparse_run: dict, tmp_path: Path) -> None:
    """The indexes of a folder are reused when finished: one built by another model would be scored as
    this model's. They record the model's fingerprint, and the evaluation compares it (issue 24)."""
    models = []
    for seed in (1, 2):
        torch.manual_seed(seed)
        encoder, tokenizer = new_encoder(
            "uhd", pretrained=False, backbone=tiny_backbone(), dimensions=256, winners=8,
            model_id="uhd-tiny", model_version="1",
        )  # fmt: skip
        encoder.save_pretrained(tmp_path / f"model-{seed}", tokenizer)
        write_manifest(tmp_path / f"model-{seed}", "madr-model", {"variant": "uhd"})
        models.append(tmp_path / f"model-{seed}")
    data = sparse_run["data"]
    run_sparse_evaluation(data, models[0], tmp_path / "eval", ["recall@10"])
    with pytest.raises(ModelMismatchError, match=r"index-binary .* was made by the model with fingerprint"):
        run_sparse_evaluation(data, models[1], tmp_path / "eval", ["recall@10"])
