"""The evaluation stage on a real Beam runner, checked against ir_measures on its own run file."""

from __future__ import annotations

import json
from pathlib import Path

import ir_measures
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from ir_measures import RR, R, nDCG

from evaluation import parse_metrics
from evaluation.cutoffs import plan_cutoffs
from jobs.cli import parse_command
from pipelines.embed.stage import embed_catalog
from pipelines.evaluate.stage import evaluate_retrieval
from schemas import JUDGMENT_SCHEMA, PRODUCT_SCHEMA, QUERY_SCHEMA
from tests.conftest import index_embeddings

ITEMS = ["juicer", "blender", "socks", "sneakers", "lamp", "comforter", "toaster", "backpack"]
BRANDS = ["Breville", "Nike", "Acme", "Zinus"]


@pytest.fixture(scope="module")
def collection(tmp_path_factory: pytest.TempPathFactory, tiny_model_dir: Path) -> dict[str, str]:
    root = tmp_path_factory.mktemp("collection")
    products = [
        {
            "product_id": f"p{i}",
            "title": f"{BRANDS[i % 4]} {ITEMS[i % 8]} model {i}",
            "description": None,
            "bullet_points": [],
            "brand": BRANDS[i % 4],
            "color": None,
            "category_path": [ITEMS[i % 8]],
            "aspects": {"category": [ITEMS[i % 8]]},
            "locale": "us",
        }
        for i in range(120)
    ]
    queries = [
        {
            "query_id": f"q{j}",
            "text": f"{BRANDS[j % 4]} {ITEMS[j % 8]}",
            "aspects": None,
            "split": "test" if j < 12 else "train",
        }
        for j in range(16)
    ]
    queries.append({"query_id": "bad", "text": "", "aspects": None, "split": "test"})
    # A test query nobody judged: searched and in the run, but not scored.
    queries.append({"query_id": "unjudged", "text": "Acme lamp", "aspects": None, "split": "test"})
    judgments = []
    for j in range(16):
        for i in range(j, 120, 8)[:6]:
            judgments.append(
                {"query_id": f"q{j}", "product_id": f"p{i}", "grade": (i + j) % 5, "label": None}
            )
    judgments.append({"query_id": "q0", "product_id": "p1", "grade": -1, "label": None})  # invalid grade
    paths = {name: str(root / f"{name}.parquet") for name in ("products", "queries", "judgments")}
    pq.write_table(pa.Table.from_pylist(products, schema=PRODUCT_SCHEMA), paths["products"])
    pq.write_table(pa.Table.from_pylist(queries, schema=QUERY_SCHEMA), paths["queries"])
    pq.write_table(pa.Table.from_pylist(judgments, schema=JUDGMENT_SCHEMA), paths["judgments"])
    paths["embeddings"] = str(root / "embeddings")
    embed_catalog(
        *parse_command(
            "embed",
            [
                "--products",
                paths["products"],
                "--model",
                str(tiny_model_dir),
                "--output",
                paths["embeddings"],
            ],
        )
    )
    paths["model"] = str(tiny_model_dir)
    return paths


def _evaluate(collection: dict[str, str], out: Path, *flags: str) -> dict:
    return evaluate_retrieval(
        *parse_command(
            "evaluate",
            [
                "--queries",
                collection["queries"],
                "--judgments",
                collection["judgments"],
                "--model",
                collection["model"],
                "--output",
                str(out),
                "--metrics",
                "recall@10,recall@100,recall@10000,ndcg@5,mrr@10",
                # One query and one judgment of the collection are planted invalid: past the 1 % default.
                "--max_dead_letter_fraction",
                "0.1",
                *flags,
            ],
        )
    )


def test_exact_evaluation_matches_ir_measures_on_its_own_run(collection, tmp_path) -> None:
    result = _evaluate(collection, tmp_path, "--searcher", "exact", "--embeddings", collection["embeddings"])
    # 12 judged test queries, one unjudged, one invalid query dead-lettered; judged train queries are not
    # searched. recall@10000 keeps its name over the 120-product corpus: it ranks the whole of it.
    assert result["counts"]["queries_searched"] == 13
    assert result["counts"]["queries_scored"] == 12
    assert result["counts"]["queries_without_judgments"] == 1
    assert result["counts"]["queries_dead_lettered"] == 1
    assert result["counts"]["judgments_dead_lettered"] == 1
    assert set(result["summary"]) == {"recall@10", "recall@100", "recall@10000", "ndcg@5", "mrr@10"}
    # Every product is retrieved, so recall at the corpus size is exactly 1 wherever it is defined.
    assert result["summary"]["recall@10000"].mean == 1.0

    run = pq.read_table(list(tmp_path.glob("run-*.parquet"))).to_pylist()
    assert {r["rank"] for r in run if r["query_id"] == "q0"} == set(range(1, 121))
    assert {r["query_id"] for r in run} == {f"q{j}" for j in range(12)} | {"unjudged"}
    assert len(run) == 13 * 120
    assert _matches_ir_measures(tmp_path, collection["judgments"]) >= 40
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["kind"] == "madr-evaluation" and "metrics.json" in manifest["files"]


def _matches_ir_measures(folder: Path, judgments: str) -> int:
    """Check an evaluation's per-query metrics against ir_measures over its own run file and `judgments`
    (the 12 test queries'); returns how many values were compared."""
    run = pq.read_table(list(folder.glob("run-*.parquet"))).to_pylist()
    qrels = [
        ir_measures.Qrel(r["query_id"], r["product_id"], r["grade"])
        for r in pq.read_table(judgments).to_pylist()
        if r["grade"] >= 0 and int(r["query_id"][1:]) < 12
    ]
    scored = [ir_measures.ScoredDoc(r["query_id"], r["product_id"], -float(r["rank"])) for r in run]
    measures = {
        "recall@10": R(rel=2) @ 10,
        "recall@100": R(rel=2) @ 100,
        "mrr@10": RR(rel=2) @ 10,
        "ndcg@5": nDCG(gains={g: 2**g - 1 for g in range(5)}) @ 5,
    }
    expected = {
        (m.query_id, str(m.measure)): m.value for m in ir_measures.iter_calc(measures.values(), qrels, scored)
    }
    per_query = pq.read_table(folder / "per_query.parquet").to_pylist()
    assert len(per_query) == 12
    checked = 0
    for row in per_query:
        for name, measure in measures.items():
            key = (row["query_id"], str(measure))
            if key in expected and row[name] == row[name]:  # nan: undefined for us, 0 for trec_eval
                assert row[name] == pytest.approx(expected[key], abs=1e-9), (name, row["query_id"])
                checked += 1
    return checked


def _run_scores(folder: Path) -> dict[str, list[float]]:
    scores: dict[str, list[float]] = {}
    for row in sorted(pq.read_table(list(folder.glob("run-*.parquet"))).to_pylist(), key=lambda r: r["rank"]):
        scores.setdefault(row["query_id"], []).append(row["score"])
    return scores


def test_ann_evaluation_through_the_index_returns_the_exact_scores(collection, tmp_path) -> None:
    # A 120-product index is scored by brute force inside ScaNN, so its ranked scores must equal
    # exact search's. Ids may differ among tied scores (an untrained model scores many products alike).
    index_dir = tmp_path / "index"
    index_embeddings(collection["embeddings"], str(index_dir))
    ann = _evaluate(collection, tmp_path / "ann", "--searcher", "ann", "--index", str(index_dir))
    _evaluate(collection, tmp_path / "exact", "--searcher", "exact", "--embeddings", collection["embeddings"])
    assert ann["counts"]["queries_scored"] == 12
    ann_scores, exact_scores = _run_scores(tmp_path / "ann"), _run_scores(tmp_path / "exact")
    assert ann_scores.keys() == exact_scores.keys() and len(ann_scores) == 13
    for query_id, scores in exact_scores.items():
        assert len(ann_scores[query_id]) == len(scores) == 120
        assert ann_scores[query_id] == pytest.approx(scores, abs=1e-4), query_id


def test_cutoffs_past_the_corpus_keep_their_names_so_nights_line_up() -> None:
    """recall@10000 over 395 products, then over 375: the same metric both nights, not recall@395/@375."""
    requested = parse_metrics(["recall@10", "recall@1000", "recall@10000", "auc"])
    for corpus in (395, 375):
        plan = plan_cutoffs(requested, depth=10_000, corpus_size=corpus)
        assert [spec.key for spec in plan.metrics] == ["recall@10", "recall@1000", "recall@10000", "auc"]
        assert plan.to_dict()["ranks_whole_corpus"] == ["recall@1000", "recall@10000"]
        assert plan.to_dict()["corpus_size"] == corpus and plan.depth == corpus


def test_cutoffs_deeper_than_the_search_are_dropped_not_scored_on_fewer_results() -> None:
    requested = parse_metrics(["recall@10", "recall@100", "recall@1000", "recall@10000", "ndcg@500", "auc"])
    plan = plan_cutoffs(requested, depth=100, corpus_size=3_000)
    assert [spec.key for spec in plan.metrics] == ["recall@10", "recall@100", "auc"]
    assert plan.depth == 100 and plan.dropped == ("recall@1000", "recall@10000", "ndcg@500")
    # Ranking the 3,000-product corpus whole (--depth 3000) would report recall@10000 too.
    assert "--depth 100" in plan.warning() and "pass --depth 3000" in plan.warning()
    # Searching the whole corpus ranks every product: nothing is dropped, and no name changes.
    whole = plan_cutoffs(requested, depth=100, corpus_size=80)
    assert whole.dropped == () and whole.warning() is None
    assert [spec.key for spec in whole.metrics] == [spec.key for spec in requested]
    assert whole.to_dict()["ranks_whole_corpus"] == ["recall@100", "recall@1000", "recall@10000", "ndcg@500"]
    with pytest.raises(ValueError, match=r"every requested metric .* deeper than --depth 5"):
        plan_cutoffs(parse_metrics(["recall@10"]), depth=5, corpus_size=3_000)


def test_evaluation_at_depth_100_never_reports_recall_at_1000(collection, tmp_path, caplog) -> None:
    # The fixture's corpus has 120 products, so --depth 100 is shallower than the corpus.
    result = _evaluate(
        collection,
        tmp_path,
        "--searcher",
        "exact",
        "--embeddings",
        collection["embeddings"],
        "--depth",
        "100",
        "--metrics",
        "recall@10,recall@100,recall@1000,ndcg@5",
    )
    assert set(result["summary"]) == {"recall@10", "recall@100", "ndcg@5"}
    assert result["cutoffs"]["dropped"] == ["recall@1000"] and result["cutoffs"]["depth"] == 100
    assert "not reported: recall@1000" in result["table"]
    assert any("recall@1000" in r.getMessage() and "--depth 100" in r.getMessage() for r in caplog.records)
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert set(metrics["metrics"]) == {"recall@10", "recall@100", "ndcg@5"}
    assert metrics["cutoffs"]["dropped"] == ["recall@1000"] and metrics["cutoffs"]["policy"] == "drop"
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["depth"] == 100 and manifest["cutoffs"]["dropped"] == ["recall@1000"]
    assert "recall@1000" not in pq.read_table(tmp_path / "per_query.parquet").column_names


def test_missing_searcher_path_is_explained(collection, tmp_path) -> None:
    with pytest.raises(ValueError, match="--searcher ann needs --index"):
        _evaluate(collection, tmp_path, "--searcher", "ann")


def test_judgments_of_products_the_catalog_lacks_are_counted_and_left_out(collection, tmp_path) -> None:
    """A judged product removed from the catalog is a miss no model could avoid: it is counted, named in
    the report, and left out, so the scores equal those of the judgments without it.

    Checked on the run's own ranking (ir_measures over it with the catalog's judgments alone): two runs
    of a tiny untrained model order its many tied scores differently, so their means differ."""
    rows = pq.read_table(collection["judgments"]).to_pylist()
    gone = [
        {"query_id": "q0", "product_id": "discontinued-1", "grade": 4, "label": None},
        {"query_id": "q3", "product_id": "discontinued-2", "grade": 4, "label": None},
    ]
    path = tmp_path / "judgments.parquet"
    pq.write_table(pa.Table.from_pylist(rows + gone, schema=JUDGMENT_SCHEMA), path)
    flags = ("--searcher", "exact", "--embeddings", collection["embeddings"])
    with_gone = _evaluate({**collection, "judgments": str(path)}, tmp_path / "with", *flags)
    assert with_gone["counts"]["judgments_not_in_catalog"] == 2
    assert "2 judgments name products the catalog lacks" in with_gone["table"]
    assert _matches_ir_measures(tmp_path / "with", collection["judgments"]) >= 40
    manifest = json.loads((tmp_path / "with" / "manifest.json").read_text())
    assert manifest["counts"]["judgments_not_in_catalog"] == 2
