"""Collapsed embeddings are measured and their rows marked (issue 27, item 2)."""

from __future__ import annotations

import numpy as np
import pytest

from bench.results_table import main_table
from evaluation.collapse import COLLAPSED_COSINE, is_collapsed, mean_pairwise_cosine
from evaluation.experiment_report import COLLAPSED, write_report
from evaluation.experiment_stats import pool_seeds, summarise

QUERIES = 20


def _gram_mean(vectors: np.ndarray) -> float:
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    gram = unit @ unit.T
    n = len(unit)
    return float((gram.sum() - np.trace(gram)) / (n * (n - 1)))


def test_the_mean_pairwise_cosine_is_the_gram_matrix_mean_off_its_diagonal() -> None:
    vectors = np.random.default_rng(0).normal(size=(300, 24)) + 0.5
    assert mean_pairwise_cosine(vectors) == pytest.approx(_gram_mean(vectors))
    # A sample of the rows, the same one every time.
    sampled = mean_pairwise_cosine(vectors, sample=50)
    assert sampled == mean_pairwise_cosine(vectors, sample=50) != pytest.approx(_gram_mean(vectors))


def test_one_direction_for_every_text_is_collapsed_and_spread_vectors_are_not() -> None:
    rng = np.random.default_rng(1)
    spread = rng.normal(size=(500, 32)).astype(np.float32)
    # What a dropped-layer CLS looks like: one large common vector plus small text-specific parts.
    collapsed = (rng.normal(size=32) + 0.01 * rng.normal(size=(500, 32))).astype(np.float32)
    assert not is_collapsed(mean_pairwise_cosine(spread))
    assert is_collapsed(mean_pairwise_cosine(collapsed)) and mean_pairwise_cosine(collapsed) > 0.99
    assert not is_collapsed(None)
    zero_row = np.vstack([np.zeros((1, 32)), spread[:3]])  # counts as orthogonal, no division by zero
    assert np.isfinite(mean_pairwise_cosine(zero_row))
    with pytest.raises(ValueError, match="at least 2"):
        mean_pairwise_cosine(spread[:1])


def _run(cosine: float | None, level: float) -> dict:
    per_query = {f"q{i}": {"recall@100": level + 0.01 * i} for i in range(QUERIES)}
    return {
        "per_query": per_query,
        "query_accuracy": None,
        "product_accuracy": None,
        "timings": {},
        "document_cosine": cosine,
    }


def test_collapsed_rows_are_marked_with_their_cosine_and_read_back(tmp_path) -> None:
    pooled = pool_seeds([_run(0.998, 0.01), _run(0.996, 0.02)])
    assert pooled["document_cosine"] == pytest.approx(0.997)
    results = {"bibert": _run(0.07, 0.5), "no-fusion": pooled, "uhd": _run(None, 0.6)}
    summary = summarise(results, "bibert")
    config = {"num_products": 100, "num_queries": QUERIES, "baseline": "bibert"}
    markdown = write_report({"config": config, "summary": summary, "wall_seconds": 1}, tmp_path / "r.md")
    rows = [line for line in markdown.splitlines() if line.startswith("| ")]
    assert any(line.startswith(f"| no-fusion {COLLAPSED} |") for line in rows)
    assert any(line.startswith("| bibert |") for line in rows) and any(
        line.startswith("| uhd |") for line in rows
    )
    assert f"at least {COLLAPSED_COSINE} (no-fusion 0.997)" in markdown
    table = main_table(markdown)
    assert table.collapsed == {"no-fusion"} and table.value("no-fusion", "R@100") is not None


def test_a_table_without_collapse_has_no_note(tmp_path) -> None:
    summary = summarise({"bibert": _run(0.07, 0.5), "mtbert": _run(0.2, 0.6)}, "bibert")
    config = {"num_products": 100, "num_queries": QUERIES, "baseline": "bibert"}
    markdown = write_report({"config": config, "summary": summary, "wall_seconds": 1}, tmp_path / "r.md")
    assert COLLAPSED not in markdown and main_table(markdown).collapsed == set()
