"""bench.results_claims: every claim of RESULTS.md's "What the figures say" holds on its table, and a
table that contradicts a claim fails it."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from bench.results_claims import CLAIMS, Ahead, Claim, check_claims, claims_section, main, unquoted
from bench.results_table import Cell, main_table, parse_cell, table_of_results
from jobs.experiment_report import COLUMNS

RESULTS = Path(__file__).resolve().parents[1] / "docs" / "RESULTS.md"


@pytest.fixture(scope="module")
def markdown() -> str:
    return RESULTS.read_text()


def test_every_claim_holds_on_the_table_it_cites(markdown: str) -> None:
    failed = {claim.says: failures for claim, failures in check_claims(main_table(markdown)) if failures}
    assert failed == {}
    assert unquoted(claims_section(markdown)) == []


def test_the_claim_the_issue_found_false_fails(markdown: str) -> None:
    # Issue 27 item 3: "MURAL is ahead of MUR on every metric" while R@500 and R@10k are below MUR's.
    every_metric = Claim(
        "MURAL ahead of MUR on every metric", (Ahead("mural", ("mur",), tuple(c for _, c in COLUMNS)),)
    )
    [(_, failures)] = check_claims(main_table(markdown), [every_metric])
    assert len(failures) == 1
    assert "R@500: mural 0.8919 vs mur 0.8968" in failures[0] and "R@10k" in failures[0]
    assert "R@100" not in failures[0]


def test_a_table_changed_under_the_claims_fails_them(markdown: str) -> None:
    table = main_table(markdown)
    table.cells["mural"]["R@100"], table.cells["mur"]["R@100"] = (
        table.cells["mur"]["R@100"],
        table.cells["mural"]["R@100"],
    )
    table.cells["uhd"]["R@100"] = dataclasses.replace(table.cells["uhd"]["R@100"], marks="")
    table.cells["mtbert"]["Acc@1 held-out products:brand"] = Cell(0.95)
    failed = {claim.says for claim, failures in check_claims(table) if failures}
    assert any(says.startswith("MURAL is ahead of MUR on R@100") for says in failed)
    assert any("significantly ahead on R@100 is UHD-BERT" in says for says in failed)
    assert any("met by madral-en-v2" in says for says in failed)  # quotes MtBERT's brand 0.912
    assert any(says.startswith("brand / color: MADRAL") for says in failed)
    assert len(failed) == 4  # the rest ("both are below BiBERT on R@100", ...) still hold


def test_a_sentence_rewritten_in_the_document_is_reported(markdown: str) -> None:
    section = claims_section(markdown).replace("collapses (R@100 0.030)", "collapses")
    assert unquoted(section) == ["no-fusion, which embeds CLS alone, collapses (R@100 0.030)"]
    rewrapped = claims_section(markdown).replace("On R@100 no aspect-aware", "On R@100 no\n   aspect-aware")
    assert unquoted(rewrapped) == []


@pytest.mark.parametrize(
    ("text", "cell"),
    [
        ("0.8187", Cell(0.8187)),
        ("0.1244 ↓", Cell(0.1244, "↓")),
        ("0.8513 ± 0.0120 ↑ ▼", Cell(0.8513, "↑▼")),
        ("–", Cell(None)),
    ],
)
def test_cells_read_as_printed(text: str, cell: Cell) -> None:
    assert parse_cell(text) == cell


def _result(means: dict[str, float], pvalues: dict[str, float], accuracy: dict[str, float] | None) -> dict:
    scored = {"accuracy": accuracy, "accuracy_at_3": accuracy} if accuracy else None
    return {
        "means": means,
        "pvalues": pvalues,
        "pvalues_holm": pvalues,
        "seeds": 1,
        "query_accuracy": scored,
        "product_accuracy": scored,
    }


def test_a_results_json_reads_as_its_markdown(tmp_path: Path) -> None:
    keys = [key for key, _ in COLUMNS]
    report = {
        "config": {"num_products": 1000, "num_queries": 60, "baseline": "bibert", "seeds": 1},
        "summary": {
            "bibert": _result(dict.fromkeys(keys, 0.5), {}, None),
            "mtbert": _result(
                {**dict.fromkeys(keys, 0.6), "recall@100": 0.4},
                {**dict.fromkeys(keys, 0.001), "recall@100": 0.2},
                {"category": 0.91, "brand": 0.8, "color": 0.7},
            ),
        },
        "wall_seconds": 60.0,
    }
    table = table_of_results(report, tmp_path / "results.md")
    assert table.baseline == "bibert"
    assert table.value("mtbert", "NDCG@10") == 0.6 and table.marks("mtbert", "NDCG@10") == "↑"
    assert table.value("mtbert", "R@100") == 0.4 and table.marks("mtbert", "R@100") == ""
    assert table.value("mtbert", "R@100 Δ points") == pytest.approx(-0.1)
    assert table.value("mtbert", "Acc@1 held-out products:category") == 0.91
    assert table.value("bibert", "Acc@1 held-out products:category") is None


def test_the_command_exits_1_on_a_failed_claim(markdown: str, tmp_path: Path, capsys) -> None:
    assert main(["--doc", str(RESULTS)]) == 0
    assert f"{len(CLAIMS)} of {len(CLAIMS)} claims hold" in capsys.readouterr().out
    doc = tmp_path / "RESULTS.md"
    doc.write_text(markdown.replace("| dssm | 0.1244 ↓ |", "| dssm | 0.9244 ↓ |"))
    assert main(["--doc", str(doc)]) == 1
    out = capsys.readouterr().out
    assert "FAIL  DSSM and MADR are far behind" in out and "the table has 0.9244" in out


def test_a_claim_about_a_row_the_table_lost_fails_instead_of_passing(markdown: str) -> None:
    table = main_table(markdown)
    del table.cells["mur"]
    del table.cells["mural"]["R@100"]
    failed = {claim.says: failures for claim, failures in check_claims(table) if failures}
    assert any("no value for mur" in f for f in failed["both are below BiBERT on R@100"])
    assert any(
        "no value for mural R@100" in f
        for f in failed["On R@100 no aspect-aware variant is significantly ahead"]
    )
