"""Metrics against independent implementations: trec_eval (via ir_measures), sklearn's AUC, hand sums.

ir_measures is made comparable as follows:
* recall@k -> ``R(rel=2)@k`` (pytrec_eval, relevance_level=2); mrr@10 -> ``RR(rel=2)@10`` (msmarco provider).
* ndcg@k -> ``nDCG(gains={g: 2**g - 1})@k``: ir_measures maps each judged grade to that integer gain before
  trec_eval sees it, so trec_eval's DCG is exactly the 2^rel − 1 DCG (§8.3, madral-kdd22).
* float gains (ESCI 1.0/0.1/0.01/0): trec_eval only takes integer relevance, but NDCG is invariant to scaling
  every gain, so ESCI gains ×100 (100/10/1/0, integers) give the same NDCG in trec_eval.
* Runs carry strictly decreasing scores, so trec_eval's tie-breaking (docid) never reorders them.
* Queries without relevant judged products: trec_eval scores them 0, we leave them undefined (nan); those
  queries are compared for that difference explicitly and left out of the value comparison.
"""

from __future__ import annotations

import math

import ir_measures
import numpy as np
import pytest
from ir_measures import RR, R, nDCG

from evaluation.metrics import (
    DEFAULT_METRICS,
    ESCI_RELEVANCE,
    MetricMean,
    MetricSpec,
    RelevanceRule,
    aggregate,
    evaluate_query,
    parse_metric,
    parse_metrics,
)

RULE = RelevanceRule()
TOLERANCE = 1e-9
RECALL_CUTOFFS = (1, 10, 50, 100, 1000)
NDCG_CUTOFFS = (1, 5, 10, 100)
POWER_GAINS = {grade: 2**grade - 1 for grade in range(5)}


def _random_collection(seed: int = 7) -> tuple[dict[str, list[str]], dict[str, dict[str, int]]]:
    """30 queries, 200 products: grades 0–4, unjudged retrieved products, relevant products missed."""
    rng = np.random.default_rng(seed)
    products = [f"p{index:03d}" for index in range(200)]
    runs: dict[str, list[str]] = {}
    qrels: dict[str, dict[str, int]] = {}
    for index in range(30):
        query_id = f"q{index:02d}"
        judged = rng.choice(products, size=int(rng.integers(5, 30)), replace=False)
        grades = rng.integers(0, 5, size=judged.size)
        if index in (0, 1):
            grades = rng.integers(0, 2, size=judged.size)  # no relevant product: recall/mrr undefined
        if index == 2:
            grades = rng.integers(2, 5, size=judged.size)  # no negative: auc undefined
        if index == 3:
            grades = np.zeros(judged.size, dtype=int)  # ideal DCG 0: ndcg undefined too
        qrels[query_id] = {str(product): int(grade) for product, grade in zip(judged, grades, strict=True)}
        runs[query_id] = [str(product) for product in rng.permutation(products)[: int(rng.integers(20, 150))]]
    return runs, qrels


RUNS, QRELS = _random_collection()


def _ir_measures_per_query(measures: list, qrels: dict[str, dict[str, int]]) -> dict[tuple[str, str], float]:
    run = [
        ir_measures.ScoredDoc(query_id, product_id, float(1000 - rank))
        for query_id, ranking in RUNS.items()
        for rank, product_id in enumerate(ranking)
    ]
    judged = [
        ir_measures.Qrel(query_id, product_id, grade)
        for query_id, grades in qrels.items()
        for product_id, grade in grades.items()
    ]
    return {(str(m.measure), m.query_id): m.value for m in ir_measures.iter_calc(measures, judged, run)}


def _ours(rule: RelevanceRule, specs: tuple[MetricSpec, ...]) -> dict[str, dict[str, float]]:
    return {query_id: evaluate_query(RUNS[query_id], QRELS[query_id], specs, rule) for query_id in RUNS}


def _has_relevant(query_id: str, min_grade: int = 2) -> bool:
    return any(grade >= min_grade for grade in QRELS[query_id].values())


def test_the_random_collection_covers_the_awkward_cases() -> None:
    unjudged_retrieved = [q for q in RUNS if set(RUNS[q]) - set(QRELS[q])]
    relevant_missed = [q for q in RUNS if any(g >= 2 and p not in RUNS[q] for p, g in QRELS[q].items())]
    assert len(unjudged_retrieved) == 30
    assert len(relevant_missed) >= 10
    assert sum(not _has_relevant(q) for q in RUNS) == 3


def test_recall_and_mrr_match_trec_eval_per_query() -> None:
    measures = [R(rel=2) @ k for k in RECALL_CUTOFFS] + [RR(rel=2) @ 10]
    expected = _ir_measures_per_query(measures, QRELS)
    specs = parse_metrics([f"recall@{k}" for k in RECALL_CUTOFFS] + ["mrr@10"])
    ours = _ours(RULE, specs)
    compared = 0
    for query_id, values in ours.items():
        for spec, measure in zip(specs, measures, strict=True):
            reference = expected[(str(measure), query_id)]
            if _has_relevant(query_id):
                assert values[spec.key] == pytest.approx(reference, abs=TOLERANCE), (query_id, spec.key)
                compared += 1
            else:  # our documented deviation: undefined, where trec_eval averages in a 0
                assert math.isnan(values[spec.key]) and reference == 0.0
    assert compared == 27 * len(specs)
    assert len({values["recall@10"] for values in ours.values()}) > 5  # the comparison is not all zeros


def test_ndcg_with_power_gains_matches_trec_eval_per_query() -> None:
    measures = [nDCG(gains=POWER_GAINS) @ k for k in NDCG_CUTOFFS]
    expected = _ir_measures_per_query(measures, QRELS)
    specs = parse_metrics([f"ndcg@{k}" for k in NDCG_CUTOFFS])
    for query_id, values in _ours(RULE, specs).items():
        for spec, measure in zip(specs, measures, strict=True):
            reference = expected[(str(measure), query_id)]
            if query_id == "q03":  # every judged grade 0: ideal DCG 0, undefined; trec_eval says 0
                assert math.isnan(values[spec.key]) and reference == 0.0
            else:
                assert values[spec.key] == pytest.approx(reference, abs=TOLERANCE), (query_id, spec.key)


def test_float_esci_gains_match_trec_eval_on_gains_scaled_to_integers() -> None:
    grades_to_esci = {0: 0, 1: 1, 2: 2, 3: 3, 4: 3}  # fold grade 4 into Exact to reuse the collection
    esci_qrels = {q: {p: grades_to_esci[g] for p, g in grades.items()} for q, grades in QRELS.items()}
    measures = [nDCG(gains={3: 100, 2: 10, 1: 1, 0: 0}) @ k for k in NDCG_CUTOFFS]
    expected = _ir_measures_per_query(measures, esci_qrels)
    specs = parse_metrics([f"ndcg@{k}" for k in NDCG_CUTOFFS])
    for query_id, ranking in RUNS.items():
        values = evaluate_query(ranking, esci_qrels[query_id], specs, ESCI_RELEVANCE)
        for spec, measure in zip(specs, measures, strict=True):
            reference = expected[(str(measure), query_id)]
            if query_id == "q03":
                assert math.isnan(values[spec.key])
            else:
                assert values[spec.key] == pytest.approx(reference, abs=TOLERANCE), (query_id, spec.key)


def test_means_match_trec_eval_aggregates_over_queries_with_relevant_products() -> None:
    answerable = {q: grades for q, grades in QRELS.items() if _has_relevant(q)}
    measures = [R(rel=2) @ 100, nDCG(gains=POWER_GAINS) @ 10, RR(rel=2) @ 10]
    run = [
        ir_measures.ScoredDoc(q, p, float(1000 - rank)) for q in answerable for rank, p in enumerate(RUNS[q])
    ]
    judged = [ir_measures.Qrel(q, p, g) for q, grades in answerable.items() for p, g in grades.items()]
    expected = ir_measures.calc_aggregate(measures, judged, run)
    ours = _ours(RULE, parse_metrics(["recall@100", "ndcg@10", "mrr@10"]))
    everything = aggregate(ours.values())
    assert (everything["recall@100"].count, everything["recall@100"].undefined) == (27, 3)
    assert everything["ndcg@10"].count == 29  # grade-1-only queries have an ideal DCG > 0, so an NDCG
    summary = aggregate(values for query_id, values in ours.items() if query_id in answerable)
    assert summary["recall@100"].mean == pytest.approx(expected[measures[0]], abs=TOLERANCE)
    assert summary["ndcg@10"].mean == pytest.approx(expected[measures[1]], abs=TOLERANCE)
    assert summary["mrr@10"].mean == pytest.approx(expected[measures[2]], abs=TOLERANCE)


def _pairwise_auc(ranking: list[str], judgments: dict[str, int]) -> float:
    rank = {product: index for index, product in enumerate(ranking)}
    place = {product: rank.get(product, math.inf) for product in judgments}
    positives = [place[p] for p, g in judgments.items() if g >= 2]
    negatives = [place[p] for p, g in judgments.items() if g < 2]
    wins = sum(1.0 if pos < neg else 0.5 if pos == neg else 0.0 for pos in positives for neg in negatives)
    return wins / (len(positives) * len(negatives))


def test_auc_matches_pairwise_counting_and_sklearn_per_query() -> None:
    roc_auc_score = pytest.importorskip("sklearn.metrics").roc_auc_score
    defined = 0
    for query_id, values in _ours(RULE, (parse_metric("auc"),)).items():
        grades = QRELS[query_id]
        labels = [grade >= 2 for grade in grades.values()]
        if all(labels) or not any(labels):
            assert math.isnan(values["auc"]), query_id
            continue
        rank = {product: index for index, product in enumerate(RUNS[query_id])}
        scores = [-float(rank.get(product, len(rank))) for product in grades]  # unretrieved: one tied score
        assert values["auc"] == pytest.approx(roc_auc_score(labels, scores), abs=TOLERANCE), query_id
        assert values["auc"] == pytest.approx(_pairwise_auc(RUNS[query_id], grades), abs=TOLERANCE)
        defined += 1
    assert defined == 26


# A tiny query computed by hand: d4 is retrieved but unjudged, d8 and d9 are judged but not retrieved.
HAND_RANKING = ["d1", "d2", "d3", "d4", "d5"]
HAND_JUDGMENTS = {"d1": 0, "d2": 3, "d3": 1, "d5": 2, "d9": 4, "d8": 0}


@pytest.mark.parametrize(
    ("metric", "expected"),
    [
        ("recall@1", 0.0),
        ("recall@2", 1 / 3),
        ("recall@5", 2 / 3),
        ("recall@100", 2 / 3),
        ("mrr@1", 0.0),
        ("mrr@10", 1 / 2),
        # gains 2^rel − 1: d2 7, d3 1, d5 3; ideal order d9 15, d2 7, d5 3, d3 1, d1/d8 0
        ("ndcg@1", 0.0),
        (
            "ndcg@5",
            (7 / math.log2(3) + 1 / 2 + 3 / math.log2(6))
            / (15 + 7 / math.log2(3) + 3 / 2 + 1 / math.log2(5)),
        ),
        # positives d2 (rank 2), d5 (rank 5), d9 (absent); negatives d1 (1), d3 (3), d8 (absent):
        # d2 beats d3 and d8, d5 beats d8, d9 ties d8 -> (2 + 1 + 0.5) / 9
        ("auc", 3.5 / 9),
    ],
)
def test_hand_computed_query(metric: str, expected: float) -> None:
    values = evaluate_query(HAND_RANKING, HAND_JUDGMENTS, (parse_metric(metric),), RULE)
    assert values[metric] == pytest.approx(expected, abs=1e-12)


def test_recall_is_not_a_hit_rate() -> None:
    values = evaluate_query(["a", "x"], {"a": 2, "b": 3}, parse_metrics(["recall@10"]), RULE)
    assert values["recall@10"] == 0.5


def test_float_gains_stay_float() -> None:
    assert ESCI_RELEVANCE.gain(2) == 0.1 and ESCI_RELEVANCE.gain(1) == 0.01
    values = evaluate_query(["b", "a"], {"a": 3, "b": 2}, parse_metrics(["ndcg@10"]), ESCI_RELEVANCE)
    float_gains = (0.1 + 1.0 / math.log2(3)) / (1.0 + 0.1 / math.log2(3))
    truncated_gains = 1.0 / math.log2(3)  # what integer gains 1/0/0/0 would give
    assert values["ndcg@10"] == pytest.approx(float_gains, abs=1e-12)
    assert abs(values["ndcg@10"] - truncated_gains) > 0.05


def test_esci_rule_counts_only_exact_as_relevant() -> None:
    values = evaluate_query(
        ["s", "e"], {"e": 3, "s": 2, "c": 1}, parse_metrics(["recall@1", "mrr@10"]), ESCI_RELEVANCE
    )
    assert values == {"recall@1": 0.0, "mrr@10": 0.5}


def test_undefined_metrics_are_nan_per_metric() -> None:
    specs = parse_metrics(["recall@10", "mrr@10", "ndcg@10", "auc"])
    no_relevant = evaluate_query(["a"], {"a": 1, "b": 0}, specs, RULE)
    assert math.isnan(no_relevant["recall@10"]) and math.isnan(no_relevant["mrr@10"])
    assert no_relevant["ndcg@10"] == 1.0  # grade 1 still has gain 1, so NDCG is defined
    assert math.isnan(no_relevant["auc"])
    only_relevant = evaluate_query(["a"], {"a": 2, "b": 4}, specs, RULE)
    assert only_relevant["recall@10"] == 0.5 and math.isnan(only_relevant["auc"])
    assert all(math.isnan(value) for value in evaluate_query(["a"], {}, specs, RULE).values())


def test_aggregate_skips_undefined_values_and_counts_queries() -> None:
    rows = [
        {"query_id": "q1", "recall@10": 1.0, "auc": math.nan},
        {"query_id": "q2", "recall@10": 0.5, "auc": 0.25},
        {"query_id": "q3", "recall@10": math.nan, "auc": math.nan},
    ]
    summary = aggregate(rows)
    assert summary["recall@10"] == MetricMean(0.75, count=2, undefined=1)
    assert summary["auc"] == MetricMean(0.25, count=1, undefined=2)
    assert list(summary) == ["recall@10", "auc"]
    nothing = aggregate([{"auc": math.nan}])["auc"]
    assert math.isnan(nothing.mean) and nothing.count == 0
    with pytest.raises(ValueError, match="nan exactly when count is 0"):
        MetricMean(0.5, count=0)


def test_parse_metric() -> None:
    assert parse_metric("recall@100") == MetricSpec("recall", 100)
    assert parse_metric(" NDCG@5 ").key == "ndcg@5"
    assert parse_metric("auc") == MetricSpec("auc", None)
    assert [spec.key for spec in parse_metrics(DEFAULT_METRICS)] == list(DEFAULT_METRICS)
    for bad in ("precision@10", "map", "hits@10"):
        with pytest.raises(ValueError, match=r"known metrics: recall@k, ndcg@k, mrr@k, auc"):
            parse_metric(bad)
    for bad in ("recall", "recall@0", "auc@5", "ndcg@-1", "mrr@ten"):
        with pytest.raises(ValueError):
            parse_metric(bad)
    with pytest.raises(ValueError, match="repeat"):
        parse_metrics(["ndcg@5", "NDCG@5"])


def test_relevance_rule_validation_and_round_trip() -> None:
    assert RelevanceRule().gain(4) == 15.0 and RelevanceRule().gain(0) == 0.0
    assert RelevanceRule(gains={1: 1, 0: 0}).gains == ((0, 0.0), (1, 1.0))
    for rule in (RelevanceRule(), ESCI_RELEVANCE, RelevanceRule(positive_min_grade=1)):
        assert RelevanceRule.from_dict(rule.to_dict()) == rule
    with pytest.raises(ValueError):
        RelevanceRule(positive_min_grade=0)
    with pytest.raises(ValueError):
        RelevanceRule.with_gains({1: -0.5})
    with pytest.raises(ValueError):
        RelevanceRule.with_gains({1: math.inf})
    with pytest.raises(ValueError, match="no gain"):
        evaluate_query(["a"], {"a": 4}, parse_metrics(["ndcg@5"]), ESCI_RELEVANCE)


def test_evaluate_query_rejects_inconsistent_input() -> None:
    specs = parse_metrics(["recall@10000"])
    with pytest.raises(ValueError, match="retrieval depth"):
        evaluate_query(["a"], {"a": 2}, specs, RULE, depth=1000)
    with pytest.raises(ValueError, match="more than depth=1"):
        evaluate_query(["a", "b"], {"a": 2}, parse_metrics(["recall@1"]), RULE, depth=1)
    with pytest.raises(ValueError, match="repeats"):
        evaluate_query(["a", "a"], {"a": 2}, specs, RULE)
    with pytest.raises(ValueError, match="integer"):
        evaluate_query(["a"], {"a": 2.5}, specs, RULE)  # type: ignore[dict-item]
    assert evaluate_query(["a"], {"a": np.int32(3)}, specs, RULE, depth=10000) == {"recall@10000": 1.0}
