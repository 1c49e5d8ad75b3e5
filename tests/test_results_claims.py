"""bench.results_claims: every claim of RESULTS.md holds on the data it rests on (the main table's run
archive; the one-seed run's own table, marked not re-checkable), and a table, an archive, a result file or a
sentence that contradicts a claim fails it."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from bench.archive_runs import ArchivedExperiment, table_rows
from bench.claim_checks import Ahead, Claim, Collapsed, Paired, SeedMeans, SeedMinutes, check_claims, section
from bench.results_claims import CLAIM_SETS, FROM_ARCHIVE, MAIN_TABLE, main
from bench.results_table import Cell, main_table, parse_cell, table_of_results
from bench.store_claims import STORE_FIGURES
from evaluation.experiment_report import COLUMNS

RESULTS = Path(__file__).resolve().parents[1] / "docs" / "RESULTS.md"
MAIN, COST, ONE_SEED = CLAIM_SETS


@pytest.fixture(scope="module")
def markdown() -> str:
    return RESULTS.read_text()


@pytest.fixture(scope="module")
def archive() -> ArchivedExperiment:
    return ArchivedExperiment.load()


def _archived_table(archive: ArchivedExperiment, markdown: str):
    return archive.table(list(table_rows(section(markdown, MAIN_TABLE))))


def test_every_claim_holds_on_the_data_it_cites(markdown: str, archive: ArchivedExperiment) -> None:
    for claim_set in CLAIM_SETS:
        archived = claim_set in FROM_ARCHIVE
        table = _archived_table(archive, markdown) if archived else claim_set.table(markdown)
        failed = {
            claim.says: failures for claim, failures in check_claims(table, claim_set.claims) if failures
        }
        assert failed == {}
        assert claim_set.unquoted(markdown) == []


def test_each_set_reads_the_table_of_its_own_section(markdown: str) -> None:
    assert MAIN.table(markdown).value("bibert", "R@100") == 0.5666  # 3 seeds, 60,000 products
    assert MAIN.table(markdown).value("bibert", "R@100 sd") == 0.0237
    assert ONE_SEED.table(markdown).value("bibert", "R@100") == 0.8187  # one seed, 20,000 products
    assert ONE_SEED.table(markdown).value("bibert", "R@100 sd") is None
    assert main_table(markdown).value("bibert", "R@100") == 0.5666  # the document's first such table


def test_a_section_ends_at_the_next_heading_of_its_level() -> None:
    doc = "# T\n## A\na\n### A1\na1\n## B\nb\n### B1\nb1\n# U\nu"
    assert section(doc, "## A") == "## A\na\n### A1\na1"
    assert section(doc, "### B1") == "### B1\nb1"
    assert section(doc, "## B") == "## B\nb\n### B1\nb1"
    with pytest.raises(ValueError, match="no heading starting '## C'"):
        section(doc, "## C")


def test_the_claim_the_issue_found_false_fails(markdown: str) -> None:
    # Issue 27 item 3: "MURAL is ahead of MUR on every metric" while R@500 and R@10k are below MUR's.
    every_metric = Claim(
        "MURAL ahead of MUR on every metric", (Ahead("mural", ("mur",), tuple(c for _, c in COLUMNS)),)
    )
    [(_, failures)] = check_claims(ONE_SEED.table(markdown), [every_metric])
    assert len(failures) == 1
    assert "R@500: mural 0.8919 vs mur 0.8968" in failures[0] and "R@10k" in failures[0]
    assert "R@100" not in failures[0]


def test_a_one_seed_table_changed_under_its_claims_fails_them(markdown: str) -> None:
    table = ONE_SEED.table(markdown)
    table.cells["mural"]["R@100"], table.cells["mur"]["R@100"] = (
        table.cells["mur"]["R@100"],
        table.cells["mural"]["R@100"],
    )
    table.cells["uhd"]["R@100"] = dataclasses.replace(table.cells["uhd"]["R@100"], marks="")
    table.cells["mtbert"]["Acc@1 held-out products:brand"] = Cell(0.95)
    failed = {claim.says for claim, failures in check_claims(table, ONE_SEED.claims) if failures}
    assert any(says.startswith("MURAL is ahead of MUR on R@100") for says in failed)
    assert any("significantly ahead on R@100 is UHD-BERT" in says for says in failed)
    assert any("met by madral-en-v2" in says for says in failed)  # quotes MtBERT's brand 0.912
    assert any(says.startswith("brand / color: MADRAL") for says in failed)
    assert len(failed) == 4  # the rest ("both are below BiBERT on R@100", ...) still hold


def test_the_main_table_changed_under_its_claims_fails_them(markdown: str, archive) -> None:
    table = _archived_table(archive, markdown)
    table.cells["bibert"]["R@100"] = dataclasses.replace(table.cells["bibert"]["R@100"], marks="")
    table.cells["madral"]["R@500"] = dataclasses.replace(table.cells["madral"]["R@500"], marks="▼")
    table.cells["no-fusion"]["R@100"] = dataclasses.replace(table.cells["no-fusion"]["R@100"], value=0.5)
    failed = {claim.says for claim, failures in check_claims(table, MAIN.claims) if failures}
    assert any(says.startswith("BiBERT, the papers' baseline, is ▼") for says in failed)
    assert any(says.startswith("MADRAL-ori is level with BiBERT") for says in failed)  # R@500 not ↓
    assert any(says.startswith("no-fusion (CLS alone) is the best") for says in failed)
    assert any(says.startswith("Four trained rows are level with zero-shot") for says in failed)  # BiBERT
    assert any(says.startswith("zero-shot is ahead (▼ against it)") for says in failed)  # BiBERT's ▼
    assert len(failed) == 5
    table.collapsed.clear()
    [(_, failures)] = check_claims(table, [Claim("DSSM collapses", (Collapsed(("dssm",)),))])
    assert failures == ["not marked † (collapsed): dssm"]


def test_a_claim_about_every_row_covers_a_row_added_later(markdown: str, archive) -> None:
    table = _archived_table(archive, markdown)
    later = {"R@100": Cell(0.70, "↑"), "R@500": Cell(0.93, "↑"), "R@10k": Cell(0.999, "↑")}
    table.cells["a-later-variant"] = later
    failed = {claim.says: failures for claim, failures in check_claims(table, MAIN.claims) if failures}
    ahead = next(says for says in failed if says.startswith("zero-shot is ahead (▼ against it) of every"))
    assert any("not marked ▼: a-later-variant R@100" in f for f in failed[ahead])
    level = next(says for says in failed if says.startswith("Four trained rows are level"))
    assert any("a-later-variant R@100" in f for f in failed[level])  # neither level with zero-shot nor ▼


def test_a_sentence_rewritten_in_the_document_is_reported(markdown: str) -> None:
    rewritten = markdown.replace("collapses (†, R@100 0.0548 ↓)", "collapses")
    assert MAIN.unquoted(rewritten) == ["DSSM collapses (†, R@100 0.0548 ↓)"]
    assert ONE_SEED.unquoted(rewritten) == []
    rewrapped = markdown.replace("On R@100 no aspect-aware", "On R@100 no\n   aspect-aware")
    assert ONE_SEED.unquoted(rewrapped) == []
    # A sentence said in another section than its set's does not count.
    moved = markdown.replace("collapses (R@100 0.030)", "collapses")
    assert ONE_SEED.unquoted(moved) == ["no-fusion, which embeds CLS alone, collapses (R@100 0.030)"]


@pytest.mark.parametrize(
    ("text", "cell"),
    [
        ("0.8187", Cell(0.8187)),
        ("0.1244 ↓", Cell(0.1244, "↓")),
        ("0.8513 ± 0.0120 ↑ ▼", Cell(0.8513, "↑▼", 0.012)),
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
    out = capsys.readouterr().out
    assert "FAIL" not in out and "GONE" not in out
    doc = tmp_path / "RESULTS.md"
    doc.write_text(markdown.replace("| dssm † | 0.0548 ± 0.0072 ↓ ▼ |", "| dssm † | 0.9548 ± 0.0072 ↓ ▼ |"))
    assert main(["--doc", str(doc)]) == 1
    out = capsys.readouterr().out
    assert "FAIL  dssm" in out
    assert "R@100 written '0.9548 ± 0.0072 ↓ ▼', recomputed '0.0548 ± 0.0072 ↓ ▼'" in out


# The audit of issue 68: three edits of RESULTS.md that the check passed while it read the document's table.
AUDIT_EDITS = (
    (
        "+1.8 points pooled, p 0.02, not significant after Holm",
        "+4.8 points pooled, p 2e-9, significant after Holm",
        "GONE  MURAL-CONCAT is higher than zero-shot on each seed (0.6771 / 0.6735 / 0.6566: +1.8 points",
    ),
    (
        "| 0.871 / 0.994 / 0.993 |",
        "| 0.971 / 0.994 / 0.993 |",
        "Acc@1 queries written '0.971 / 0.994 / 0.993', recomputed '0.871 / 0.994 / 0.993'",
    ),
    (
        "| 0.9508 ± 0.0030 ↑ ▲ |",
        "| 0.9708 ± 0.0030 ↑ ▲ |",
        "NDCG@50 written '0.9708 ± 0.0030 ↑ ▲', recomputed '0.9508 ± 0.0030 ↑ ▲'",
    ),
)


@pytest.mark.parametrize(("before", "after", "named"), AUDIT_EDITS)
def test_each_edit_of_the_audit_fails_naming_the_figure(
    markdown: str, tmp_path: Path, capsys, before: str, after: str, named: str
) -> None:
    assert markdown.count(before) == 1
    doc = tmp_path / "RESULTS.md"
    doc.write_text(markdown.replace(before, after))
    assert main(["--doc", str(doc)]) == 1
    assert named in capsys.readouterr().out


def test_a_changed_run_in_the_archive_fails_the_table_and_the_sentences(tmp_path: Path, capsys) -> None:
    """The figures come from the per-query metrics: one variant's seed with every query's R@100 halved
    changes its row and the pooled difference a sentence quotes."""
    import gzip
    import json
    import shutil

    from bench.archive_runs import MAIN_ARCHIVE

    copy = tmp_path / "archive"
    shutil.copytree(Path(__file__).resolve().parents[1] / MAIN_ARCHIVE, copy)
    path = copy / "13" / "mural-concat.json.gz"
    record = json.loads(gzip.decompress(path.read_bytes()))
    for row in record["result"]["per_query"].values():
        row["recall@100"] /= 2
    path.write_bytes(gzip.compress(json.dumps(record).encode()))
    assert main(["--archive", str(copy)]) == 1
    out = capsys.readouterr().out
    assert "FAIL  mural-concat" in out
    assert "quotes mural-concat vs zero-shot recall@100 as +1.8 points" in out
    assert "quotes mural-concat's seeds as 0.6771 / 0.6735 / 0.6566" in out


def test_sentence_figures_need_the_archive_and_name_what_differs(markdown: str, archive) -> None:
    table = _archived_table(archive, markdown)
    wrong = [
        Paired("mural-concat", "zero-shot", "recall@100", "+4.8", "2e-9"),
        SeedMeans("mpbert", "recall@100", "0.4292 / 0.5300 / 0.3234"),
        SeedMinutes("madr", "9-10"),
    ]
    [(_, failures)] = check_claims(table, [Claim("three wrong figures", tuple(wrong))])
    assert failures == [
        "quotes mural-concat vs zero-shot recall@100 as +4.8 points (the archive gives +1.8) and p 2e-9 "
        "(the archive gives 0.02)",
        "quotes mpbert's seeds as 0.4292 / 0.5300 / 0.3234; archived: 0.4292 / 0.5300 / 0.3233",
        "quotes madr 9-10 min a seed; archived: 10.6-12.2",
    ]
    [(_, failures)] = check_claims(MAIN.table(markdown), [Claim("from the document", (wrong[0],))])
    assert failures == ["needs the run archive; this table has none behind it"]


def test_a_section_without_committed_data_must_say_so(markdown: str, tmp_path: Path, capsys) -> None:
    doc = tmp_path / "RESULTS.md"
    marker = "*Not re-checkable from this repository: the run's folder stayed in `runs/`"
    assert marker in markdown
    doc.write_text(markdown.replace(marker, "*The run's folder stayed in `runs/`"))
    assert main(["--doc", str(doc)]) == 1
    assert "FAIL  The paper profile on a lent H200" in capsys.readouterr().out


def test_figures_quoted_from_a_result_file_are_recomputed_from_it(tmp_path: Path, capsys) -> None:
    import json
    import shutil

    results = Path(__file__).resolve().parents[1] / "bench" / "results"
    copy = tmp_path / "results"
    copy.mkdir()
    # Every committed result (and the per-query rows beside them); two results are then changed.
    for path in [*results.glob("*.json"), *results.glob("*.parquet")]:
        shutil.copy(path, copy)
    serving = json.loads((copy / "serving_finals.json").read_text())
    serving["figures"]["summary"]["k=10"]["over_best_faiss"] = 0.65
    (copy / "serving_finals.json").write_text(json.dumps(serving))
    distractors = json.loads((copy / "distractor_recall.json").read_text())
    distractors["figures"]["vs zero-shot, with distractors"]["shipped"]["recall@100"]["p_holm"] = 0.02
    (copy / "distractor_recall.json").write_text(json.dumps(distractors))
    assert main(["--bench_results", str(copy)]) == 1
    out = capsys.readouterr().out
    assert "quotes 0.99x; serving_finals.json gives 0.65x" in out
    assert "shipped: written ['+0.0637 (p 0.005)', '+0.0055 (p 1)', '-0.0018 (p 1)']" in out
    assert "fusion_ablation: +2.4 to +3.1 points over the hybrid (p 0.0071 to 0.00095)" in out  # still holds


def test_a_claim_about_a_row_the_table_lost_fails_instead_of_passing(markdown: str) -> None:
    table = ONE_SEED.table(markdown)
    del table.cells["mur"]
    del table.cells["mural"]["R@100"]
    failed = {claim.says: failures for claim, failures in check_claims(table, ONE_SEED.claims) if failures}
    assert any("no value for mur" in f for f in failed["both are below BiBERT on R@100"])
    assert any(
        "no value for mural R@100" in f
        for f in failed["On R@100 no aspect-aware variant is significantly ahead"]
    )
    table = MAIN.table(markdown)
    del table.cells["mpbert"]
    failed = {claim.says: failures for claim, failures in check_claims(table, MAIN.claims) if failures}
    assert any(
        "mpbert has no R@100" in f for f in failed[next(s for s in failed if s.startswith("MADR and MpBERT"))]
    )


def test_store_figures_are_recomputed_from_the_committed_per_query_rows(markdown: str, tmp_path) -> None:
    """Every quoted store figure holds on bench/results/store/*.parquet; one query's NDCG@10 changed in a
    copy of those rows fails the figures that rest on it, and `python -m bench.results_claims` with it."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from bench.store_claims import STORE_RESULTS, check_store_figures

    assert [figure for figure, failure in check_store_figures(markdown, STORE_FIGURES) if failure] == []
    copy = tmp_path / "store"
    copy.mkdir()
    for path in (Path(__file__).resolve().parents[1] / STORE_RESULTS).glob("*.parquet"):
        table = pq.read_table(path)
        if path.stem == "second_store":
            # The first model row's NDCG@10 set to 0: the model's mean, and every comparison with it, moves.
            first = pc.index(table.column("system"), "model").as_py()
            ndcg = table.column("ndcg@10").to_pylist()
            ndcg[first] = 0.0
            table = table.set_column(table.schema.get_field_index("ndcg@10"), "ndcg@10", pa.array(ndcg))
        pq.write_table(table, copy / path.name)
    failed = {
        (figure.store, figure.kind, figure.metric, figure.a)
        for figure, failure in check_store_figures(markdown, STORE_FIGURES, copy)
        if failure
    }
    assert ("second_store", "mean", "ndcg@10", "model") in failed
    assert ("second_store", "delta", "ndcg@10", "model") in failed
    assert all(store == "second_store" and metric == "ndcg@10" for store, _, metric, _ in failed)
    assert main(["--store_results", str(copy)]) == 1


def test_ahead_on_the_archive_needs_a_paired_p_under_001(markdown: str, archive) -> None:
    """The one-seed run's "MURAL is ahead of MUR on every ranking metric" held on the means; at 60,000
    products AUC's difference has p 0.6."""
    table = _archived_table(archive, markdown)
    on_auc = Ahead("mural", ("mur",), ("AUC",))
    [(_, failures)] = check_claims(table, [Claim("MURAL ahead of MUR at AUC", (on_auc,))])
    assert failures == ["not ahead of on AUC: mural vs mur at p 0.6, not under 0.01"]
    untested = dataclasses.replace(on_auc, tested=False)  # a sentence that says it is not significant
    assert check_claims(table, [Claim("higher, untested", (untested,))])[0][1] == []
    # Read from a document, the table has no per-query data: the order of the means is all it can check.
    assert check_claims(MAIN.table(markdown), [Claim("from the document", (on_auc,))])[0][1] == []


def test_a_rerun_is_checked_with_its_archive_beside_it(tmp_path: Path, archive, markdown: str) -> None:
    import json

    report = archive.report(list(table_rows(section(markdown, MAIN_TABLE))))
    results = tmp_path / "results.json"
    results.write_text(json.dumps(report, default=float))
    assert main(["--results", str(results)]) == 0


def test_scaling_figures_hold_and_an_edited_one_fails_naming_its_file() -> None:
    """docs/SCALING.md's measured figures are recomputed from their result files (`bench.scaling_claims`)."""
    from bench.scaling_claims import SCALING_FIGURES

    markdown = Path("docs/SCALING.md").read_text()
    assert [figure.failure(markdown) for figure in SCALING_FIGURES] == [None] * len(SCALING_FIGURES)
    edited = markdown.replace(
        "| 10M | shard by shard | 189.4 | 0.6716 | 1,944.5 MB |",
        "| 10M | shard by shard | 189.4 | 0.6716 | 944.5 MB |",
    )
    failures = [figure.failure(edited) for figure in SCALING_FIGURES]
    assert failures.count(None) == len(SCALING_FIGURES) - 1
    assert (
        "944.5 MB |; sharded_eval.json gives | 10M | shard by shard | 189.4 | 0.6716 | 1,944.5 MB |"
        in str(failures)
    )
    # A figure inside a quoted sentence: the sentence no longer matches, which fails the command (GONE).
    edited = markdown.replace("2,405 MB against 4,490 MB", "1,405 MB against 4,490 MB")
    changed = {figure.result for figure in SCALING_FIGURES if figure.failure(edited) is not None}
    assert changed == {"union_recall"}
