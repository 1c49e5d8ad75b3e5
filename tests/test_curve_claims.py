"""bench.curve_claims: docs/RESULTS.md's learning curves of `madr adapt` are rendered again from their
committed per-query rows and results (bench/results/adapt_learning_curve_<tag>.parquet and .json); a changed
cell, or a changed per-query row, fails `python -m bench.results_claims` naming the row."""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from bench.curve_claims import (
    CURVE,
    CURVE_FIGURES,
    README_CURVE_FIGURES,
    TABLES,
    check_curve_figures,
    curve_differences,
    curve_table,
)
from bench.results_claims import main
from bench.results_table import table_body

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
DOC = ROOT / "docs" / "RESULTS.md"


@pytest.fixture(scope="module")
def markdown() -> str:
    return DOC.read_text()


def test_the_tables_and_their_sentences_hold_on_the_committed_rows(markdown: str) -> None:
    assert curve_differences(markdown, RESULTS) == []
    assert [figure for figure, failure in check_curve_figures(markdown, RESULTS) if failure] == []
    readme = (ROOT / "README.md").read_text()
    assert [f for f, failure in check_curve_figures(readme, RESULTS, README_CURVE_FIGURES) if failure] == []
    for tag, header in TABLES.items():
        written = {row[0] for row in table_body(markdown, header) or []}
        assert written == {label for (label,) in curve_table(RESULTS, tag)}, tag  # every run is written


def test_each_sentence_figure_is_in_its_sentence() -> None:
    assert CURVE_FIGURES, "the section's sentences quote figures of the curve"
    for figure in (*CURVE_FIGURES, *README_CURVE_FIGURES):
        assert figure.text in figure.says or figure.text.replace("-", "−", 1) in figure.says, figure


def test_a_changed_cell_fails_naming_its_row(markdown: str, tmp_path: Path, capsys) -> None:
    header = TABLES["generator_100k"]
    body = table_body(markdown, header)
    assert body
    label, cells = body[0][0], body[0][1:]  # the first run's NDCG@10 cell changed
    line = "| " + " | ".join([label, *cells]) + " |"
    assert markdown.count(line) == 1
    changed = [*cells[:2], "0.9999", *cells[3:]]
    doc = tmp_path / "RESULTS.md"
    doc.write_text(markdown.replace(line, "| " + " | ".join([label, *changed]) + " |"))
    assert main(["--doc", str(doc)]) == 1
    out = capsys.readouterr().out
    assert f"{label}: written {changed}, {CURVE}_generator_100k .parquet/.json gives {cells}" in out


def test_a_changed_per_query_row_fails_the_rows_that_rest_on_it(markdown: str, tmp_path: Path) -> None:
    """The reference run's model loses its first 20 queries' NDCG@10 (set to 0): its mean moves, and with
    it every other run's difference from it."""
    copy = tmp_path / "results"
    shutil.copytree(RESULTS, copy, ignore=shutil.ignore_patterns("experiment-runs", "store"))
    path = copy / f"{CURVE}_generator_100k.parquet"
    table = pq.read_table(path)
    reference = pc.and_(pc.equal(table["run"], "all"), pc.equal(table["system"], "model")).to_pylist()
    ndcg = table.column("ndcg@10").to_pylist()
    for row in [i for i, chosen in enumerate(reference) if chosen][:20]:
        ndcg[row] = 0.0
    table = table.set_column(table.schema.get_field_index("ndcg@10"), "ndcg@10", pa.array(ndcg))
    pq.write_table(table, path)
    failed = curve_differences(markdown, copy)
    runs = len(table_body(markdown, TABLES["generator_100k"]) or []) - 2  # less the two baselines
    assert len(failed) == runs, failed  # the reference's own row, and every run compared with it
    assert all("written" in failure for failure in failed)
