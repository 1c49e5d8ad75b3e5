"""bench.distractor_recall's catalog: generator products of another seed, unjudged, with ids of their own."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bench.distractor_recall import (
    COMPARED,
    METRICS,
    PREFIX,
    UNION,
    against_baseline,
    delta_table,
    distractor_catalog,
    evaluate_sparse_variant,
    intent_matches,
    merged_figures,
    recall_table,
    union_catalog,
)
from evaluation import holm_adjusted, paired_t_test
from pipelines.evaluate.sparse import run_sparse_evaluation
from pipelines.layout import DatasetLayout
from product_data.synthetic import SyntheticConfig, generate_benchmark
from tests.conftest import save_tiny_uhd_model


@pytest.fixture(scope="module")
def benchmark(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("benchmark")
    generate_benchmark(SyntheticConfig(num_products=300, num_queries=20, seed=13), str(folder))
    return folder


def test_distractors_are_another_seeds_products_under_ids_of_their_own(
    benchmark: Path, tmp_path: Path
) -> None:
    distractors = distractor_catalog(tmp_path / "d", 400, seed=1013)
    rows = pq.read_table(distractors).to_pylist()
    catalog = pq.read_table(benchmark / "products").to_pylist()
    assert len(rows) == 400 and all(row["product_id"].startswith(PREFIX) for row in rows)
    assert {row["product_id"] for row in rows}.isdisjoint({row["product_id"] for row in catalog})
    # Another seed: other products, not the catalog's under new names.
    same = {row["title"] for row in rows[:300]} & {row["title"] for row in catalog}
    assert len(same) < 30
    judged = set(pq.read_table(benchmark / "judgments.parquet").column("product_id").to_pylist())
    assert judged.isdisjoint(row["product_id"] for row in rows)  # unjudged
    union = union_catalog(distractors.parent, benchmark / "products", distractors)
    assert pq.read_table(union, columns=["product_id"]).num_rows == 700
    assert (
        union_catalog(distractors.parent, benchmark / "products", distractors) == union
    )  # re-run: same links


def test_a_distractor_id_equal_to_a_catalog_id_is_refused(benchmark: Path, tmp_path: Path) -> None:
    # The catalog against itself: every id collides.
    with pytest.raises(ValueError, match="distractor ids are catalog ids"):
        union_catalog(tmp_path, benchmark / "products", benchmark / "products")


def _per_query(folder: Path, values: dict[str, list[float]]) -> Path:
    folder.mkdir(parents=True)
    queries = [f"q{i}" for i in range(len(next(iter(values.values()))))]
    pq.write_table(pa.table({"query_id": queries, **values}), folder / "per_query.parquet")
    return folder


def test_each_variant_is_tested_against_the_baseline_query_by_query_with_holm(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    base = {m: rng.uniform(0.2, 0.8, 30).tolist() for m in METRICS}
    better = {m: [v + 0.1 + rng.normal(0, 0.05) for v in base[m]] for m in METRICS}
    level = {m: [v + rng.normal(0, 0.05) for v in base[m]] for m in METRICS}
    folders = {
        name: _per_query(tmp_path / name, values)
        for name, values in (("zero-shot", base), ("better", better), ("level", level))
    }
    compared = against_baseline(folders, "zero-shot")
    assert set(compared) == {"better", "level"}
    # Paired by query id, in id order (q0, q1, q10, ...), as `madr compare` pairs them.
    order = sorted(range(30), key=lambda i: f"q{i}")
    raw = {
        (v, m): paired_t_test([vals[m][i] for i in order], [base[m][i] for i in order]).pvalue
        for v, vals in (("better", better), ("level", level))
        for m in METRICS
    }
    holm = holm_adjusted(raw)
    for (variant, metric), p in raw.items():
        figures = compared[variant][metric]
        values = better if variant == "better" else level
        assert figures["delta"] == pytest.approx(np.mean(values[metric]) - np.mean(base[metric]))
        assert figures["p"] == p and figures["p_holm"] == holm[variant, metric]
    assert compared["better"]["recall@10000"]["p_holm"] < 0.01 < compared["level"]["recall@10000"]["p_holm"]


def test_variants_evaluated_over_other_queries_are_not_compared(tmp_path: Path) -> None:
    folders = {
        "zero-shot": _per_query(tmp_path / "a", {m: [0.1, 0.2, 0.3] for m in METRICS}),
        "other": _per_query(tmp_path / "b", {m: [0.1, 0.2] for m in METRICS}),
    }
    with pytest.raises(ValueError, match="different queries"):
        against_baseline(folders, "zero-shot")


def _run(baseline_recall: float, variant: str, pvalues: list[float]) -> dict:
    recall = {m: baseline_recall for m in METRICS}
    return {
        "zero-shot": {"with distractors": {**recall, "products": 520, "embed_s": 0.0}},
        variant: {"with distractors": {**recall, "products": 520, "embed_s": 9.0}},
        COMPARED: {
            variant: {m: {"delta": 0.1, "p": p, "p_holm": p} for m, p in zip(METRICS, pvalues, strict=True)}
        },
    }


def test_a_run_added_to_the_saved_one_is_holm_adjusted_with_it_and_needs_the_same_baseline() -> None:
    saved, added = _run(0.5, "bibert", [0.01, 0.02, 0.5]), _run(0.5, "uhd", [0.001, 0.03, 0.04])
    added["zero-shot"]["with distractors"]["embed_s"] = 2238.0  # embedded again: same retrieval
    merged = merged_figures(saved, added)
    assert list(merged) == ["zero-shot", "bibert", "uhd", COMPARED]
    raw = {(v, m): c["p"] for run in (saved, added) for v, by in run[COMPARED].items() for m, c in by.items()}
    holm = holm_adjusted(raw)
    assert {(v, m): c["p_holm"] for v, by in merged[COMPARED].items() for m, c in by.items()} == holm
    # Six tests now, not three: the added run's smallest p is multiplied by 6.
    assert merged[COMPARED]["uhd"]["recall@100"]["p_holm"] == pytest.approx(0.006)
    assert delta_table(merged).count("\n") == delta_table(saved).count("\n") + 1
    # A variant in both runs takes the added figures.
    again = _run(0.5, "bibert", [0.3, 0.3, 0.3])
    assert merged_figures(saved, again)[COMPARED]["bibert"]["recall@100"]["p"] == 0.3
    with pytest.raises(ValueError, match="retrieves differently"):
        merged_figures(saved, _run(0.51, "uhd", [0.001, 0.03, 0.04]))


def test_intent_matches_count_the_products_carrying_every_aspect_a_test_query_names(benchmark: Path) -> None:
    counts = intent_matches(benchmark / "queries.parquet", benchmark / "products")
    products = [dict(p["aspects"] or []) for p in pq.read_table(benchmark / "products").to_pylist()]
    tests = [
        dict(q["aspects"])
        for q in pq.read_table(benchmark / "queries.parquet").to_pylist()
        if q["split"] == "test" and q["aspects"]
    ]
    expected = [
        sum(all(set(p.get(name, [])) & set(values) for name, values in intent.items()) for p in products)
        for intent in tests
    ]
    assert counts == expected and len(counts) > 0 and max(counts) > 0


def test_results_md_holds_the_distractor_tables_of_the_committed_run() -> None:
    """docs/RESULTS.md's distractor tables are the ones bench/results/distractor_recall.json renders: a
    re-run that changes a figure fails here until the page is regenerated."""
    root = Path(__file__).resolve().parents[1]
    figures = json.loads((root / "bench" / "results" / "distractor_recall.json").read_text())["figures"]
    page = (root / "docs" / "RESULTS.md").read_text()
    assert recall_table(figures) in page
    assert delta_table(figures) in page
    rows = recall_table(figures).splitlines()[2:]
    assert sum("| with distractors | 520,000 |" in row for row in rows) == len(rows) // 2 >= 2


def test_a_sparse_model_is_retrieved_through_its_inverted_index_over_union_and_catalog(
    benchmark: Path, tmp_path: Path
) -> None:
    # Seeded: an unseeded random model now and then kept every distractor out of its top 100.
    model = save_tiny_uhd_model(tmp_path / "uhd", dimensions=256, winners=8)
    distractors = distractor_catalog(tmp_path / "d", 400, seed=1013)
    union = union_catalog(distractors.parent, benchmark / "products", distractors)
    figures = evaluate_sparse_variant(model, benchmark, union, tmp_path / "work")
    alone, crowded = figures["catalog alone"], figures["with distractors"]
    assert (alone["products"], crowded["products"]) == (300, 700)
    # A second run reuses the indexes and reports what they cost when they were built, as the dense path.
    again = evaluate_sparse_variant(model, benchmark, union, tmp_path / "work")
    assert again == figures and crowded["embed_s"] > 0
    # Over the catalog alone: what `madr experiment` reports for the model (its binarized index).
    direct = run_sparse_evaluation(DatasetLayout(str(benchmark)), model, tmp_path / "direct", METRICS)
    for metric in METRICS:
        assert alone[metric] == pytest.approx(direct["indexes"]["binary"]["means"][metric])
    # Distractors only push judged products down: catalog scores are unchanged and, on ties, catalog
    # rows come first in the union.
    assert all(crowded[m] <= alone[m] for m in METRICS)
    assert crowded["recall@100"] < alone["recall@100"]
    # Its per-query rows pair with another run's query by query (`against_baseline` reads them).
    compared = against_baseline(
        {"alone": tmp_path / "direct", "uhd": tmp_path / "work" / f"eval-{UNION}"}, "alone"
    )
    for metric in METRICS:
        assert compared["uhd"][metric]["delta"] == pytest.approx(crowded[metric] - alone[metric])
