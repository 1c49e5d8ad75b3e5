"""BM25 and BM25 + zero-shot (reciprocal rank fusion) beside every evaluation, scored like the model."""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path

import ir_measures
import numpy as np
import pyarrow.parquet as pq
import pytest

from evaluation import paired_t_test
from index_builder import IndexArtifactError, ScannIndex, ScannIndexBuilder
from index_builder.bm25 import Bm25Index, Bm25Settings
from index_builder.lexical import reciprocal_rank_fusion
from tests.conftest import STORE_ITEMS, embed_and_evaluate, write_judged_store

PLAIN = Bm25Settings(language="none")


def _lucene_bm25(docs: list[list[str]], query: list[str], k1: float = 1.2, b: float = 0.75) -> np.ndarray:
    """Lucene's BM25 written out: idf ln(1 + (N − df + 0.5) / (df + 0.5)) times the saturated, length-
    normalised tf, without the constant (k1 + 1) factor Lucene 8 dropped (it does not change a ranking)."""
    average = sum(map(len, docs)) / len(docs)
    frequency = Counter(term for doc in docs for term in set(doc))
    scores = np.zeros(len(docs))
    for i, doc in enumerate(docs):
        counts = Counter(doc)
        for term in query:
            if counts[term]:
                idf = math.log(1 + (len(docs) - frequency[term] + 0.5) / (frequency[term] + 0.5))
                tf = counts[term]
                scores[i] += idf * tf / (tf + k1 * (1 - b + b * len(doc) / average))
    return scores


def test_bm25_scores_are_lucenes_formula_and_only_matches_are_ranked() -> None:
    texts = ["red wool socks", "red red running shoes for trail", "blue wool blanket", "desk lamp brass"]
    index = Bm25Index.from_texts([f"p{i}" for i in range(4)], texts, PLAIN)
    [ranking] = index.search(["red wool"], depth=10)
    expected = _lucene_bm25([t.split() for t in texts], ["red", "wool"])
    assert list(ranking.rows) == [0, 1, 2]  # the lamp shares no term: not ranked at all
    np.testing.assert_allclose(ranking.scores, expected[[0, 1, 2]], rtol=1e-5)
    assert list(index.search(["red wool"], depth=2)[0].rows) == [0, 1]


def test_bm25_stems_english_and_a_query_with_no_known_term_matches_nothing() -> None:
    index = Bm25Index.from_texts(["a", "b"], ["Running shoe", "Wool blanket"], Bm25Settings())
    assert list(index.search(["the runners shoes"], depth=5)[0].rows) == [0]
    assert [len(r.rows) for r in index.search(["zzz qqq", "the", ""], depth=5)] == [0, 0, 0]
    with pytest.raises(ValueError, match="unknown BM25 language"):
        Bm25Settings(language="klingon")


def test_reciprocal_rank_fusion_sums_one_over_k_plus_rank() -> None:
    first, second = [4, 1, 7], [1, 9, 4, 3]
    fused = reciprocal_rank_fusion([np.array(first), np.array(second)], depth=10, k=60)
    expected: dict[int, float] = {}
    for ranking in (first, second):
        for rank, row in enumerate(ranking, start=1):
            expected[row] = expected.get(row, 0.0) + 1 / (60 + rank)
    assert list(fused.rows) == [1, 4, 9, 7, 3]
    np.testing.assert_allclose(fused.scores, [expected[r] for r in fused.rows], rtol=1e-6)
    assert list(reciprocal_rank_fusion([np.array(first)], depth=2).rows) == [4, 1]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Products with judged queries, some said in the titles' words (BM25 finds them), some not."""
    root = tmp_path_factory.mktemp("lexical-store")
    products = [
        {
            "product_id": f"p{i}",
            "title": f"{['Fellow', 'Zwilling'][i % 2]} {STORE_ITEMS[i % 6]}",
            "bullet_points": [f"made in batch {i}"],
            "description": None,
            "aspects": None,
            "locale": "us",
        }
        for i in range(12)
    ]
    said = ["espresso", "kitchen knife", "socks", "sneakers", "reading light", "comforter duvet"]
    train = {"query_id": "train", "text": "espresso", "aspects": None, "split": "train"}
    return write_judged_store(root, products, said, (train,))


def _evaluate(store: dict[str, str], model: Path, output: Path, *flags: str) -> dict:
    return embed_and_evaluate(
        store, model, output, "recall@2,ndcg@2,mrr@10", "--products", store["products"], *flags
    )


def _qrels(store: dict[str, str]) -> list[ir_measures.Qrel]:
    rows = pq.read_table(store["judgments"]).to_pylist()
    return [ir_measures.Qrel(r["query_id"], r["product_id"], 1 if r["grade"] >= 2 else 0) for r in rows]


def _per_query(path: Path, metric: str) -> dict[str, float]:
    return {row["query_id"]: row[metric] for row in pq.read_table(path).to_pylist()}


@pytest.mark.e2e
def test_evaluate_reports_bm25_and_the_hybrid_as_ir_measures_scores_them(
    store, tiny_model_dir, tmp_path
) -> None:
    result = _evaluate(store, tiny_model_dir, tmp_path / "eval")
    lexical = result["lexical"]
    assert set(lexical["systems"]) == {"bm25", "bm25+zero-shot", "bm25+model"}
    assert lexical["model_fused_with_bm25"]["run_b"] == "bm25+model"
    assert json.loads((tmp_path / "eval" / "manifest.json").read_text())["lexical"] == lexical
    assert "locale's Snowball analyzer" in lexical["bm25"] and "Against bm25+zero-shot" in result["table"]

    # BM25's ranking, from bm25s through our index, scored by ir_measures: equal to the stage's rows.
    products = pq.read_table(store["products"]).to_pylist()
    ids = [p["product_id"] for p in products]
    texts = [f"{p['title']} . {p['bullet_points'][0]}" for p in products]
    index = Bm25Index.from_texts(ids, texts, Bm25Settings())
    texts = {q["query_id"]: q["text"] for q in pq.read_table(store["queries"]).to_pylist()}
    test_ids = [f"q{j}" for j in range(6)]
    bm25 = dict(zip(test_ids, index.search([texts[q] for q in test_ids], depth=12), strict=True))
    run = [
        ir_measures.ScoredDoc(q, ids[row], float(score))
        for q, ranking in bm25.items()
        for row, score in zip(ranking.rows, ranking.scores, strict=True)
    ]
    measured = {m.query_id: m.value for m in ir_measures.iter_calc([ir_measures.R @ 2], _qrels(store), run)}
    folder = tmp_path / "eval" / "lexical"
    stage = _per_query(folder / "bm25" / "per_query.parquet", "recall@2")
    assert stage == pytest.approx({q: measured.get(q, 0.0) for q in test_ids})
    assert stage["q0"] == 1.0 and stage["q3"] == 0.0  # "espresso" is in the titles, "sneakers" is not

    # The hybrid: the zero-shot run the stage wrote, fused with BM25 by 1/(60 + rank), by hand.
    zero = pq.read_table(next((tmp_path / "eval" / "zero_shot" / "eval").glob("run-*.parquet"))).to_pylist()
    fused_run = []
    for q in test_ids:
        fused: dict[str, float] = {}
        zero_ranked = [
            r["product_id"] for r in sorted((r for r in zero if r["query_id"] == q), key=lambda r: r["rank"])
        ]
        for ranking in ([ids[r] for r in bm25[q].rows], zero_ranked):
            for rank, pid in enumerate(ranking, start=1):
                fused[pid] = fused.get(pid, 0.0) + 1 / (60 + rank)
        fused_run += [ir_measures.ScoredDoc(q, pid, score) for pid, score in fused.items()]
    measured = {
        m.query_id: m.value for m in ir_measures.iter_calc([ir_measures.nDCG @ 2], _qrels(store), fused_run)
    }
    hybrid = _per_query(folder / "bm25+zero-shot" / "per_query.parquet", "ndcg@2")
    assert hybrid == pytest.approx({q: measured.get(q, 0.0) for q in test_ids}, abs=1e-6)

    # The comparison is the model's rows against these, query by query.
    model = _per_query(tmp_path / "eval" / "per_query.parquet", "recall@2")
    expected = paired_t_test([model[q] for q in test_ids], [stage[q] for q in test_ids]).pvalue
    reported = lexical["systems"]["bm25"]["metrics"]["recall@2"]
    assert reported["pvalue"] == pytest.approx(expected, nan_ok=True)
    assert reported["mean_a"] == pytest.approx(np.mean([stage[q] for q in test_ids]))


def test_lexical_false_or_without_zero_shot(store, tiny_model_dir, tmp_path) -> None:
    off = _evaluate(store, tiny_model_dir, tmp_path / "off", "--zero_shot", "false")
    assert off["lexical"] is None and not (tmp_path / "off" / "lexical").exists()
    alone = _evaluate(store, tiny_model_dir, tmp_path / "alone", "--zero_shot", "false", "--lexical", "true")
    assert set(alone["lexical"]["systems"]) == {"bm25", "bm25+model"}  # no zero-shot run to fuse with
    assert alone["lexical"]["corpus_size"] == 12
    with pytest.raises(SystemExit):  # argparse names the choices
        _evaluate(store, tiny_model_dir, tmp_path / "bad", "--lexical", "yes")


def test_an_index_artifact_carries_bm25_verified_and_fuses_it_by_reciprocal_rank(tmp_path) -> None:
    rng = np.random.default_rng(3)
    vectors = rng.normal(size=(300, 16)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    ids = [f"p{i}" for i in range(300)]
    texts = [f"item {i} {'espresso machine' if i % 50 == 0 else 'wool socks'}" for i in range(300)]
    index = ScannIndexBuilder.for_corpus(300, 16, depth=10).build(vectors, ids)
    index = index.with_lexical(Bm25Index.from_texts(ids, texts, Bm25Settings()))
    index.save(tmp_path / "index", model_id="m", model_version="1")
    loaded = ScannIndex.load(tmp_path / "index")
    assert loaded.lexical is not None and loaded.manifest.extra["lexical"].startswith("BM25 (Lucene")
    query = vectors[7:8]
    found = loaded.search_hybrid(query, ["espresso machine"], k=5)
    # By hand: the dense ranking to 100, BM25's, and 1/(60 + rank) summed.
    dense = loaded.search(query, 100).indices[0]
    lexical = loaded.lexical.search(["espresso machine"], 100)[0].rows
    expected: dict[int, float] = {}
    for ranking in (dense, lexical):
        for rank, row in enumerate(ranking, start=1):
            expected[int(row)] = expected.get(int(row), 0.0) + 1 / (60 + rank)
    best = sorted(expected, key=lambda row: -expected[row])[:5]
    assert found.indices[0].tolist() == best and found.ids[0] == [f"p{row}" for row in best]
    assert "p7" in found.ids[0] and sum(int(pid[1:]) % 50 == 0 for pid in found.ids[0]) >= 3
    # A changed byte of the BM25 files is refused like any other file of the artifact.
    vocabulary = tmp_path / "index" / "lexical" / "vocabulary.json"
    vocabulary.write_text(vocabulary.read_text().replace("espresso", "espressO"))
    with pytest.raises(IndexArtifactError, match=r"vocabulary\.json"):
        ScannIndex.load(tmp_path / "index")
    with pytest.raises(ValueError, match="no BM25 index"):
        index.with_lexical(None).search_hybrid(query, ["x"], 5)


def test_the_demo_prints_each_peer_and_an_untestable_p_value_as_n_a() -> None:
    from jobs.demo import store_lines

    row = {"mean_a": 0.5, "mean_b": 0.75, "delta": 0.25, "pvalue": 0.01, "queries": 4}
    tied = {**row, "mean_a": 0.75, "delta": 0.0, "pvalue": None}  # every query equal: no test
    metrics = {"recall@100": row, "ndcg@10": row}
    evaluated = {
        "zero_shot": {"metrics": metrics},
        "lexical": {
            "systems": {
                "bm25": {"metrics": metrics},
                "bm25+model": {"metrics": {**metrics, "recall@100": tied}},
            }
        },
    }
    lines = store_lines(evaluated)
    assert (
        lines[0]
        == "recall@100 0.750; zero-shot 0.500 (p 0.01), bm25 0.500 (p 0.01), bm25+model 0.750 (p n/a)"
    )
    assert lines[1].startswith("ndcg@10 0.750; zero-shot 0.500 (p 0.01)")
    assert store_lines({**evaluated, "lexical": None}) == [line.split(", bm25")[0] for line in lines]
