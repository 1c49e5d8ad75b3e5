"""Scoring a search batch as corpus-row matrices (evaluation/ranked.py) against the id-list path.

`evaluate_query` (product-id rankings) is checked against trec_eval in tests/test_metrics.py; here the
row-matrix path the evaluation stage uses must give the same numbers, ranks and run rows on random
rankings that hold unjudged products, miss judged ones and meet judged ids the corpus lacks.
"""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pytest

from evaluation import RelevanceRule, evaluate_query, evaluate_ranks, parse_metrics
from evaluation.ranked import NOT_IN_CORPUS, CorpusIds, judged_ranks, run_table, score_query
from schemas import RUN_SCHEMA

METRICS = parse_metrics(["recall@1", "recall@10", "recall@40", "ndcg@5", "ndcg@40", "mrr@10", "auc"])
RULE = RelevanceRule()
CORPUS = CorpusIds([f"p{row:03d}" for row in range(300)])


def _random_query(rng: np.random.Generator) -> tuple[np.ndarray, dict[str, int]]:
    """A 40-deep ranking of corpus rows and 0–25 judgments: some ranked, some not, some outside the corpus."""
    ranked = rng.choice(300, size=40, replace=False)
    inside = rng.choice(ranked, size=int(rng.integers(0, 10)), replace=False)
    outside = rng.choice(300, size=int(rng.integers(0, 10)), replace=False)
    ids = [f"p{row:03d}" for row in (*inside, *outside)] + [
        f"gone{n}" for n in range(int(rng.integers(0, 5)))
    ]
    return ranked, {pid: int(rng.integers(0, 5)) for pid in ids}


def test_judged_ranks_match_positions_in_the_ranking() -> None:
    rng = np.random.default_rng(3)
    for _ in range(200):
        ranked, judgments = _random_query(rng)
        rows = CORPUS.rows(judgments)
        position = {int(row): rank for rank, row in enumerate(ranked, start=1)}
        expected = [position.get(int(row), math.inf) for row in rows]
        assert judged_ranks(ranked, rows).tolist() == expected
    assert judged_ranks(np.arange(5), np.array([], dtype=np.int64)).size == 0
    assert judged_ranks(np.array([4, 0, 9]), np.array([9, NOT_IN_CORPUS, 4, 7])).tolist() == [
        3,
        math.inf,
        1,
        math.inf,
    ]


def test_score_query_equals_evaluate_query_on_product_ids() -> None:
    rng = np.random.default_rng(11)
    ids = CORPUS.column.to_pylist()
    checked = 0
    for index in range(300):
        ranked, judgments = _random_query(rng)
        if not judgments:
            continue
        per_query, ranks = score_query(f"q{index}", ranked, judgments, CORPUS, METRICS, RULE)
        ranked_ids = [ids[row] for row in ranked]
        expected = evaluate_query(ranked_ids, judgments, METRICS, RULE)
        assert per_query.pop("query_id") == f"q{index}"
        assert per_query.keys() == expected.keys()
        for key, value in expected.items():
            assert (math.isnan(value) and math.isnan(per_query[key])) or per_query[key] == value, key
        relevant = {pid for pid, grade in judgments.items() if grade >= 2}
        assert ranks == {
            "query_id": f"q{index}",
            "num_relevant": len(relevant),
            "ranks": [rank for rank, pid in enumerate(ranked_ids, start=1) if pid in relevant],
        }
        checked += 1
    assert checked > 250


def test_evaluate_ranks_refuses_misaligned_ranks() -> None:
    with pytest.raises(ValueError, match="1 ranks for 2 judged products"):
        evaluate_ranks({"a": 2, "b": 0}, [1.0], METRICS, RULE)


def test_run_table_is_the_ranking_in_run_schema() -> None:
    indices = np.array([[5, 2, 299], [0, 7, 5]])
    scores = np.array([[0.9, 0.5, -0.1], [0.3, 0.2, 0.1]], dtype=np.float32)
    table = run_table(["qa", "qb"], indices, scores, CORPUS)
    assert table.schema == RUN_SCHEMA
    assert table.to_pylist() == [
        {"query_id": query_id, "product_id": f"p{row:03d}", "rank": rank, "score": pytest.approx(score)}
        for query_id, rows, row_scores in (
            ("qa", [5, 2, 299], [0.9, 0.5, -0.1]),
            ("qb", [0, 7, 5], [0.3, 0.2, 0.1]),
        )
        for rank, (row, score) in enumerate(zip(rows, row_scores, strict=True), start=1)
    ]
    assert isinstance(table.column("product_id").chunk(0), pa.StringArray)
    with pytest.raises(ValueError, match="1 query ids"):
        run_table(["qa"], indices, scores, CORPUS)
