"""bench.ablation_claims: the recipe ablation of docs/RESULTS.md is rendered again from its committed
per-query rows and result (bench/results/recipe_ablation.parquet and .json); a changed cell of the table, or
a changed per-query row, fails `python -m bench.results_claims` naming the row."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from bench.ablation_claims import (
    ABLATION,
    ABLATION_FIGURES,
    ROW_LABELS,
    TABLE,
    ZERO_SHOT,
    ablation_differences,
    ablation_table,
    row_cells,
)
from bench.results_claims import main
from bench.results_table import table_body
from bench.store_claims import check_store_figures

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
DOC = ROOT / "docs" / "RESULTS.md"


@pytest.fixture(scope="module")
def markdown() -> str:
    return DOC.read_text()


def _results_copy(tmp_path: Path) -> Path:
    copy = tmp_path / "results"
    shutil.copytree(RESULTS, copy)
    return copy


def test_the_table_and_its_sentences_hold_on_the_committed_rows(markdown: str) -> None:
    assert ablation_differences(markdown, RESULTS) == []
    assert [
        figure for figure, failure in check_store_figures(markdown, ABLATION_FIGURES, RESULTS) if failure
    ] == []
    written = {row[0] for row in table_body(markdown, TABLE) or []}
    assert written == {label for (label,) in ablation_table(RESULTS)}  # every finished row is in the document
    assert written <= ROW_LABELS.keys()


def test_each_sentence_figure_is_in_its_sentence() -> None:
    """A per-query figure is checked against its text alone: the text must then be what the sentence says
    (the document writes a minus sign, the figure a hyphen)."""
    for figure in ABLATION_FIGURES:
        assert figure.text in figure.says or figure.text.replace("-", "−", 1) in figure.says, figure


def test_a_changed_cell_of_the_table_fails_naming_its_row(markdown: str, tmp_path: Path, capsys) -> None:
    body = table_body(markdown, TABLE)
    assert body
    label, cells = body[-1][0], body[-1][1:]  # the last row, its R@100 cell changed
    line = "| " + " | ".join([label, *cells]) + " |"
    assert markdown.count(line) == 1
    changed = [cells[0], "0.999", *cells[2:]]
    doc = tmp_path / "RESULTS.md"
    doc.write_text(markdown.replace(line, "| " + " | ".join([label, *changed]) + " |"))
    assert main(["--doc", str(doc)]) == 1
    out = capsys.readouterr().out
    assert "FAIL  the ablation table, from recipe_ablation.parquet and recipe_ablation.json" in out
    assert f"{label}: written {changed}, {ABLATION}.parquet and .json gives {cells}" in out


def test_a_changed_per_query_row_fails_the_rows_that_rest_on_it(markdown: str, tmp_path: Path) -> None:
    """Zero-shot's first 10 queries' Recall@100 flipped (to 0 from 0.5 or more, else to 1): zero-shot's
    mean moves by at least 0.008, and with it every row's difference from zero-shot."""
    copy = _results_copy(tmp_path)
    path = copy / f"{ABLATION}.parquet"
    table = pq.read_table(path)
    first = pc.index(table.column("system"), ZERO_SHOT).as_py()
    recall = table.column("recall@100").to_pylist()
    for row in range(first, first + 10):
        recall[row] = 0.0 if recall[row] >= 0.5 else 1.0
    table = table.set_column(table.schema.get_field_index("recall@100"), "recall@100", pa.array(recall))
    pq.write_table(table, path)
    failed = ablation_differences(markdown, copy)
    assert len(failed) == len(ablation_table(RESULTS))  # zero-shot's row and every row compared with it
    assert all("written" in failure for failure in failed)


def test_a_row_without_a_p_value_renders_a_dash() -> None:
    figures = {"recall@10": 0.5, "recall@100": 0.9, "ndcg@10": 0.3, "accuracy@1": {"category": 0.9}}
    same = {"delta_recall@100": 0.0, "p_recall@100": math.nan, "delta_ndcg@10": -0.01, "p_ndcg@10": 0.004}
    assert row_cells({**figures, **same}, "old") == [
        "0.500",
        "0.900",
        "+0.000 (–)",
        "0.300",
        "−0.010 (0.004)",
        "0.900 / – / –",
    ]
    del figures["accuracy@1"]
    assert row_cells(figures, ZERO_SHOT) == ["0.500", "0.900", "–", "0.300", "–", "–"]
