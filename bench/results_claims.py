"""Every figure README.md and docs/ quote from a committed result, recomputed from that result; every
section whose data is not committed marked so in the document; every comparative word held to its figure.

    python -m bench.results_claims                       # the committed results against the documents
    python -m bench.results_claims --results runs/experiment-60k/results.json

What it recomputes, and from what:

- the main table of docs/RESULTS.md, row by row, and the claims of "What the figures say" and of the cost
  bullet under it, from the run archive `bench/results/experiment-runs/default-60k/` (`bench.archive_runs`:
  the experiment's own pooling, tests and writer; `bench.main_claims`), including the differences,
  p-values and seed means the sentences quote that the table does not print;
- the store sections' figures from the per-query rows in `bench/results/store/` (`bench.store_claims`);
- the recipe ablation's table and the figures its sentences quote, from its per-query rows and result
  (`bench/results/recipe_ablation.parquet` and `.json`, `bench.ablation_claims`);
- `madr adapt`'s learning curves, tables and sentences, from their per-query rows and results
  (`bench/results/adapt_learning_curve_<tag>.parquet` and `.json`, `bench.curve_claims`);
- figures quoted from `bench/results/<name>.json` (docs/SCALING.md's in `bench.scaling_claims`), the
  distractor and zero-shot tables (`bench.json_claims`),
  and docs/PERFORMANCE.md, rendered again from those files (`bench.performance_doc`);
- the vocabulary (ahead, behind, above, below, beats, significant, level, tie, met) against the p-value or
  the repeated runs beside it, in README.md and docs/ (`bench.claim_words`).

The one-seed run's claims are checked against their section's own table, since its data was not kept;
that section, and every other whose data is not committed (`NOT_RECHECKABLE`), must say so in the document
("*Not re-checkable from this repository: ...*"). `--results` checks the main claims against a `madr
experiment` results.json instead of the archive. Prints one line per check and exits 1 when any fails, a
quoted sentence is no longer in its document, or a word says more than its figure.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from bench.ablation_claims import ABLATION, ABLATION_FIGURES, ABLATION_JSON_FIGURES, ablation_differences
from bench.archive_runs import MAIN_ARCHIVE, ArchivedExperiment, row_differences, table_rows
from bench.claim_checks import ClaimSet, check_claims, section
from bench.claim_words import DOCUMENTS, overstated
from bench.curve_claims import (
    CURVE,
    CURVE_JSON_FIGURES,
    README_CURVE_FIGURES,
    TABLES,
    check_curve_figures,
    curve_differences,
)
from bench.json_claims import (
    JSON_FIGURES,
    RESULTS,
    distractor_differences,
    gap_fill_differences,
    zero_shot_differences,
)
from bench.main_claims import COST_CLAIMS, MAIN_CLAIMS, PAIRED_CLAIMS
from bench.one_seed_claims import ONE_SEED_CLAIMS
from bench.performance_doc import DOC as PERFORMANCE
from bench.performance_doc import INTRO, render
from bench.results_table import Table, table_of_results
from bench.scaling_claims import SCALING_FIGURES
from bench.store_claims import (
    NOT_IN_DOCUMENT,
    SECTION,
    STORE_FIGURES,
    STORE_RESULTS,
    StoreFigure,
    check_store_figures,
)

MAIN_TABLE = "## The main table"
CLAIM_SETS: tuple[ClaimSet, ...] = (
    ClaimSet("## What the figures say", MAIN_TABLE, (*MAIN_CLAIMS, *PAIRED_CLAIMS)),
    ClaimSet(MAIN_TABLE, MAIN_TABLE, COST_CLAIMS),
    ClaimSet("### What the one-seed run showed", "## The one-seed run at 20,000 products", ONE_SEED_CLAIMS),
)
FROM_ARCHIVE = (CLAIM_SETS[0], CLAIM_SETS[1])  # the others read their section's table

MARKER = "*Not re-checkable from this repository:"
# Sections of docs/RESULTS.md whose figures no committed file holds: each must carry MARKER.
NOT_RECHECKABLE = (
    "## Condenser, and one aspect removed",  # runs/experiment folders
    "## Annotations users can trust",  # `madr explain` on a runs/ model
    "### The same models on the store export",  # the 60,000-product models' store rows
    "## The one-seed run at 20,000 products",  # before the run archive
    "## Annotations on a catalog the model never saw",  # the precision table's predictions
    "## The paper profile on a lent H200",  # the lent machine's runs/ folder
)


def _summary_line(says: str) -> str:
    return " ".join(says.split()).replace("*", "")[:90]


class Tally:
    def __init__(self) -> None:
        self.checked = self.failed = self.gone = 0

    def line(self, ok: bool, text: str, detail: list[str] | str | None = None) -> None:
        self.checked += 1
        self.failed += not ok
        print(f"  {'ok  ' if ok else 'FAIL'}  {text}")
        for failure in [] if ok else [detail] if isinstance(detail, str) else detail or []:
            print(f"          {failure}")

    def missing(self, says: str, document: str) -> None:
        self.gone += 1
        print(f"  GONE  {' '.join(says.split())}\n          (no longer in {document}: update its claim set)")


def _main_table(args: argparse.Namespace, markdown: str, tally: Tally) -> Table:
    """The table the main claims are checked against, after the document's rows are compared with it."""
    if args.results:  # a re-run's table; the figures it does not print come from --archive
        report = json.loads(Path(args.results).read_text())
        with tempfile.TemporaryDirectory() as folder:
            table = table_of_results(report, Path(folder) / "results.md")
        table.archive = ArchivedExperiment.load(args.archive)
        return table
    written = table_rows(section(markdown, MAIN_TABLE))
    archive = ArchivedExperiment.load(args.archive)
    order = list(written)
    print(f"The main table's rows, recomputed from {args.archive}:")
    differences = row_differences(written, table_rows(archive.markdown(order)))
    for variant in sorted(written.keys() | archive.runs.keys()):
        mine = [d for d in differences if d.startswith(f"{variant}:")]
        tally.line(not mine, variant, mine)
    return archive.table(order)


def _claim_sets(args: argparse.Namespace, markdown: str, tally: Tally) -> None:
    main_table = _main_table(args, markdown, tally)
    for claim_set in CLAIM_SETS:
        archived = claim_set in FROM_ARCHIVE
        source = "the run archive" if archived else f"the document's table of {claim_set.table_in!r}"
        print(f"{claim_set.said_in.lstrip('# ')} (against {source}):")
        table = main_table if archived else claim_set.table(markdown)
        for claim, failures in check_claims(table, claim_set.claims):
            tally.line(not failures, _summary_line(claim.says), failures)
        for says in claim_set.unquoted(markdown):
            tally.missing(says, args.doc)


def _data_figures(args: argparse.Namespace, markdown: str, tally: Tally) -> None:
    print(f"{SECTION.lstrip('# ')} (per-query rows in {args.store_results}):")
    _per_query_lines(tally, check_store_figures(markdown, STORE_FIGURES, Path(args.store_results)), args.doc)
    _ablation_figures(args, markdown, tally)
    _curve_figures(args, markdown, tally)
    print(f"Figures quoted from {args.bench_results}/<name>.json:")
    documents = {"docs/RESULTS.md": markdown}
    for figure in (*JSON_FIGURES, *ABLATION_JSON_FIGURES, *CURVE_JSON_FIGURES, *SCALING_FIGURES):
        text = documents.setdefault(figure.document, Path(figure.document).read_text())
        failure = figure.failure(text, Path(args.bench_results))
        if failure == NOT_IN_DOCUMENT:
            tally.missing(figure.says, figure.document)
        else:
            tally.line(failure is None, f"{figure.result}: {figure.text}", failure)
    for name, differences in (
        ("the distractor tables, from distractor_recall.json", distractor_differences),
        ("the zero-shot table, from zero_shot.json and head_refit.json", zero_shot_differences),
        ("the gap-filling table, from gap_fill.json", gap_fill_differences),
    ):
        found = differences(markdown, Path(args.bench_results))
        tally.line(not found, name, found)
    # docs/PERFORMANCE.md is generated from bench/results/*.json: it must be what they render now.
    same = Path(PERFORMANCE).read_text() == render(INTRO)
    fix = "it differs from its results: run `python -m bench.performance_doc`"
    tally.line(same, f"docs/PERFORMANCE.md, rendered again from {RESULTS}/*.json", fix)


def _ablation_figures(args: argparse.Namespace, markdown: str, tally: Tally) -> None:
    folder = Path(args.bench_results)
    print(f"The recipe ablation (per-query rows in {folder / ABLATION}.parquet):")
    found = ablation_differences(markdown, folder)
    tally.line(not found, f"the ablation table, from {ABLATION}.parquet and {ABLATION}.json", found)
    _per_query_lines(tally, check_store_figures(markdown, ABLATION_FIGURES, folder), args.doc)


def _curve_figures(args: argparse.Namespace, markdown: str, tally: Tally) -> None:
    folder = Path(args.bench_results)
    print(f"The adapt learning curves (per-query rows in {folder / CURVE}_<tag>.parquet):")
    found = curve_differences(markdown, folder)
    tally.line(not found, f"the curve tables ({', '.join(TABLES)}), from their .parquet and .json", found)
    _per_query_lines(tally, check_curve_figures(markdown, folder), args.doc)
    readme = Path("README.md").read_text()
    _per_query_lines(tally, check_curve_figures(readme, folder, README_CURVE_FIGURES), "README.md")


def _per_query_lines(tally: Tally, checked: list[tuple[StoreFigure, str | None]], document: str) -> None:
    """One line per figure recomputed from per-query rows (`bench.store_claims.check_store_figures`)."""
    for figure, failure in checked:
        name = f"{figure.store} {figure.kind} {figure.metric} {figure.a}" + (
            f" vs {figure.b}" if figure.b else ""
        )
        if failure == NOT_IN_DOCUMENT:
            tally.missing(figure.says, document)
        else:
            tally.line(failure is None, f"{name}: {figure.text}", failure)


def _marked_and_worded(args: argparse.Namespace, markdown: str, tally: Tally) -> None:
    print("Sections whose data is not committed, marked so in the document:")
    for heading in NOT_RECHECKABLE:
        tally.line(MARKER in section(markdown, heading), heading.lstrip("# "), f"no {MARKER!r} note in it")
    print("Comparative words against the figures beside them (bench.claim_words):")
    documents = [Path(args.doc) if str(d) == "docs/RESULTS.md" else d for d in DOCUMENTS]
    for document in documents:
        words = overstated(document)
        tally.line(not words, str(document), [str(word) for word in words])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--doc", default="docs/RESULTS.md", help="The results document to check")
    parser.add_argument(
        "--results",
        help="A `madr experiment` results.json to check the main claims against (default: the archive)",
    )
    parser.add_argument(
        "--archive",
        default=str(MAIN_ARCHIVE),
        help="The main table's run archive (with --results: the re-run's, for the figures its table lacks)",
    )
    parser.add_argument(
        "--store_results", default=str(STORE_RESULTS), help="Folder of the store benches' per-query rows"
    )
    parser.add_argument("--bench_results", default=str(RESULTS), help="Folder of the benchmarks' results")
    args = parser.parse_args(argv)
    markdown = Path(args.doc).read_text()
    tally = Tally()
    _claim_sets(args, markdown, tally)
    _data_figures(args, markdown, tally)
    _marked_and_worded(args, markdown, tally)
    held = tally.checked - tally.failed
    print(f"{held} of {tally.checked} checks hold; {tally.gone} quoted sentences no longer in their document")
    return 1 if tally.failed or tally.gone else 0


if __name__ == "__main__":
    sys.exit(main())
