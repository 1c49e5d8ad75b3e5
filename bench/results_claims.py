"""Every claim of docs/RESULTS.md's "What the figures say", recomputed from the table it rests on, and
every figure of its store-catalog section, recomputed from the committed per-query rows.

    python -m bench.results_claims                                   # the tables in docs/RESULTS.md
    python -m bench.results_claims --results runs/experiment-60k/results.json

Two sets of claims (`bench.claim_checks.ClaimSet`): the main table's (3 seeds at 60,000 products,
"What the figures say", here) and the one-seed 20,000-product run's that it replaced (its own section,
`bench.one_seed_claims`). Each
claim is a sentence quoted word for word with the checks that make it true, read from the table of its
section as a reader sees it (`bench.results_table`), so a re-run that changes a table makes every claim
it no longer supports fail here, and `tests/test_results_claims.py` fails with it. `--results` checks
the main claims against a `madr experiment` results.json instead. Prints one line per claim and exits 1
when any fails or a sentence is no longer in the document.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from bench.claim_checks import (
    HELD_OUT,
    MADRAL_FAMILY,
    RANKING,
    RETRIEVAL,
    ZERO_SHOT,
    Ahead,
    AtLeast,
    Claim,
    ClaimSet,
    Collapsed,
    EveryRow,
    Marked,
    NotMarked,
    Quote,
    aspect_quotes,
    check_claims,
    held_out,
    quoted_range,
)
from bench.one_seed_claims import ONE_SEED_CLAIMS
from bench.results_table import table_of_results
from bench.store_claims import NOT_IN_DOCUMENT, SECTION, STORE_FIGURES, STORE_RESULTS, check_store_figures

# The dense trained rows level with zero-shot at R@100 in the main table; UHD-BERT, sparse, is the fourth.
DENSE_LEVEL_WITH_ZERO_SHOT = ("mural-concat", "mtbert", "bibert-concat")
LEVEL_WITH_ZERO_SHOT = (*DENSE_LEVEL_WITH_ZERO_SHOT, "uhd")

MAIN_CLAIMS: tuple[Claim, ...] = (
    Claim(
        "zero-shot is ahead of every trained variant but MURAL-CONCAT and UHD-BERT at R@100, of every one "
        "but UHD-BERT at R@500, and of every one at R@10k",
        (
            Ahead(ZERO_SHOT, EveryRow(("mural-concat", "uhd")), ("R@100",)),
            Ahead(ZERO_SHOT, ("mural-concat", "uhd"), ("R@100",), lower=True),
            Ahead(ZERO_SHOT, EveryRow(("uhd",)), ("R@500",)),
            Ahead(ZERO_SHOT, ("uhd",), ("R@500",), lower=True),
            Ahead(ZERO_SHOT, EveryRow(), ("R@10k",)),
        ),
    ),
    Claim(
        "and behind every trained variant but DSSM on the ranking task (NDCG@10 0.7707 against 0.86-0.95)",
        (
            Ahead(ZERO_SHOT, EveryRow(("dssm",)), RANKING, lower=True),
            Ahead(ZERO_SHOT, ("dssm",), RANKING),
            Quote(ZERO_SHOT, "NDCG@10", "0.7707"),
            *quoted_range(
                EveryRow((ZERO_SHOT, "dssm")),
                "NDCG@10",
                Quote("uhd", "NDCG@10", "0.86"),
                Quote("mural-concat", "NDCG@10", "0.95"),
            ),
        ),
    ),
    Claim(
        "BiBERT, the papers' baseline, is ▼ at every cut-off (R@100 0.5666 against 0.6508)",
        (
            Marked(("bibert",), RETRIEVAL, "▼"),
            Quote("bibert", "R@100", "0.5666"),
            Quote(ZERO_SHOT, "R@100", "0.6508"),
        ),
    ),
    Claim(
        "Four trained rows are level with zero-shot at R@100, none marked against it: MURAL-CONCAT (0.6691), "
        "UHD-BERT (0.6653), MtBERT (0.6452) and BiBERT-CONCAT (0.6432); every other trained row is ▼ there",
        (
            Quote("mural-concat", "R@100", "0.6691"),
            Quote("uhd", "R@100", "0.6653"),
            Quote("mtbert", "R@100", "0.6452"),
            Quote("bibert-concat", "R@100", "0.6432"),
            NotMarked(LEVEL_WITH_ZERO_SHOT, ("R@100",), "▼"),
            NotMarked(LEVEL_WITH_ZERO_SHOT, ("R@100",), "▲"),
            Marked(EveryRow((ZERO_SHOT, *LEVEL_WITH_ZERO_SHOT)), ("R@100",), "▼"),
        ),
    ),
    Claim(
        "The three dense ones are ↑ against BiBERT at R@100 and on every ranking metric (+10.3, +7.9 and "
        "+7.7 points of R@100)",
        (
            Marked(DENSE_LEVEL_WITH_ZERO_SHOT, ("R@100", *RANKING), "↑"),
            Quote("mural-concat", "R@100 Δ points", "+10.3"),
            Quote("mtbert", "R@100 Δ points", "+7.9"),
            Quote("bibert-concat", "R@100 Δ points", "+7.7"),
        ),
    ),
    Claim(
        "MtBERT is ▼ at R@500 (0.9014) where BiBERT-CONCAT (0.9199) and MURAL-CONCAT (0.9204) are not",
        (
            Marked(("mtbert",), ("R@500",), "▼"),
            NotMarked(("bibert-concat", "mural-concat"), ("R@500",), "▼"),
            Quote("mtbert", "R@500", "0.9014"),
            Quote("bibert-concat", "R@500", "0.9199"),
            Quote("mural-concat", "R@500", "0.9204"),
        ),
    ),
    Claim(
        "Condenser is below BiBERT (R@100 0.5467 ↓",
        (Quote("condenser", "R@100", "0.5467"), Marked(("condenser",), ("R@100",), "↓")),
    ),
    Claim(
        "MADR and MpBERT are far below BiBERT (R@100 0.4016 and 0.4275, both ↓)",
        (
            Quote("madr", "R@100", "0.4016"),
            Quote("mpbert", "R@100", "0.4275"),
            Marked(("madr", "mpbert"), ("R@100",), "↓"),
        ),
    ),
    Claim(
        "MpBERT varies most between seeds (sd 0.1034",
        (
            Quote("mpbert", "R@100 sd", "0.1034"),
            Ahead("mpbert", EveryRow((ZERO_SHOT,)), ("R@100 sd",)),  # zero-shot: one run, no sd
        ),
    ),
    Claim(
        "DSSM collapses (†, R@100 0.0548 ↓)",
        (Collapsed(("dssm",)), Quote("dssm", "R@100", "0.0548"), Marked(("dssm",), ("R@100",), "↓")),
    ),
    Claim(
        "MADRAL-ori is level with BiBERT at R@100 (0.5598) and below it at R@500 (0.8474 ↓)",
        (
            Quote("madral", "R@100", "0.5598"),
            Quote("madral", "R@500", "0.8474"),
            NotMarked(("madral",), ("R@100",), "↓"),
            NotMarked(("madral",), ("R@100",), "↑"),
            Marked(("madral",), ("R@500",), "↓"),
        ),
    ),
    Claim(
        "en-v1 (CLS in place of OTHER) is ahead of MADRAL-ori and ↑ against BiBERT at R@100 (0.5898)",
        (
            Ahead("madral-en-v1", ("madral", "bibert"), ("R@100",)),
            Marked(("madral-en-v1",), ("R@100",), "↑"),
            Quote("madral-en-v1", "R@100", "0.5898"),
        ),
    ),
    Claim(
        "en-v2 (the first k tokens) is behind BiBERT at R@100 and R@500 (0.5458; 0.8086 ↓)",
        (
            Ahead("madral-en-v2", ("bibert",), ("R@100", "R@500"), lower=True),
            Marked(("madral-en-v2",), ("R@500",), "↓"),
            Quote("madral-en-v2", "R@100", "0.5458"),
            Quote("madral-en-v2", "R@500", "0.8086"),
        ),
    ),
    Claim(
        "no-fusion (CLS alone) is the best MADRAL-family row at R@100 (0.6237 ↑)",
        (
            Ahead("no-fusion", ("madral", "madral-en-v1", "madral-en-v2"), ("R@100",)),
            Marked(("no-fusion",), ("R@100",), "↑"),
            Quote("no-fusion", "R@100", "0.6237"),
        ),
    ),
    Claim(
        "Every MADRAL-family row is ↑ against BiBERT at NDCG@5, NDCG@10 and NDCG@50 and ▼ against zero-shot "
        "at R@100",
        (Marked(MADRAL_FAMILY, RANKING[:3], "↑"), Marked(MADRAL_FAMILY, ("R@100",), "▼")),
    ),
    Claim(
        "MURAL (mural-wsdm24) is below BiBERT at every retrieval cut-off (R@100 0.4995 ↓)",
        (Marked(("mural",), RETRIEVAL, "↓"), Quote("mural", "R@100", "0.4995")),
    ),
    Claim(
        "ahead of it only at NDCG@5 (↑",
        (Marked(("mural",), ("NDCG@5",), "↑"), NotMarked(("mural",), RANKING[1:], "↑")),
    ),
    Claim(
        "Its held-out accuracy misses the targets (0.645 / 0.402 / 0.023)",
        (
            *aspect_quotes("mural", HELD_OUT, ("0.645", "0.402", "0.023")),
            AtLeast(("mural",), held_out("category"), 0.90, below=True),
            AtLeast(("mural",), held_out("brand"), 0.90, below=True),
            AtLeast(("mural",), held_out("color"), 0.75, below=True),
        ),
    ),
    Claim(
        "MURAL is ahead of MUR at R@100 and R@500 (0.4995 against 0.3675; 0.8002 against 0.7750) and on "
        "every ranking metric, and behind it at R@10k (0.9762 against 0.9800)",
        (
            Ahead("mural", ("mur",), ("R@100", "R@500", *RANKING)),
            Ahead("mural", ("mur",), ("R@10k",), lower=True),
            Quote("mur", "R@100", "0.3675"),
            Quote("mur", "R@500", "0.7750"),
            Quote("mural", "R@500", "0.8002"),
            Quote("mural", "R@10k", "0.9762"),
            Quote("mur", "R@10k", "0.9800"),
        ),
    ),
    Claim(
        "UHD-BERT (uhd-bert) recalls best of the trained rows at R@500 and ranks worst but DSSM",
        (
            Ahead("uhd", EveryRow((ZERO_SHOT,)), ("R@500",)),
            Ahead("uhd", EveryRow((ZERO_SHOT, "dssm")), RANKING, lower=True),
        ),
    ),
    Claim(
        "R@100 0.6653 and R@500 0.9344, both ↑ against BiBERT (+9.9 and +6.2 points, p 3e-43 and 3e-34) and "
        "not marked against zero-shot",
        (
            Quote("uhd", "R@100", "0.6653"),
            Quote("uhd", "R@500", "0.9344"),
            Marked(("uhd",), ("R@100", "R@500"), "↑"),
            Quote("uhd", "R@100 Δ points", "+9.9"),
            Quote("uhd", "R@500 Δ points", "+6.2"),
            NotMarked(("uhd",), ("R@100", "R@500"), "▼"),
            NotMarked(("uhd",), ("R@100", "R@500"), "▲"),
        ),
    ),
    Claim(
        "↓ against BiBERT on every ranking metric (NDCG@10 0.8620 ↓, −4.9 points)",
        (
            Marked(("uhd",), RANKING, "↓"),
            Quote("uhd", "NDCG@10", "0.8620"),
            Quote("uhd", "NDCG@10 Δ points", "-4.9"),
        ),
    ),
    Claim(
        "every MADRAL-family row and MtBERT meets them: category 0.905-0.938, brand 0.934-0.951, color "
        "0.945-0.971",
        (
            *quoted_range(
                (*MADRAL_FAMILY, "mtbert"),
                held_out("category"),
                Quote("madral-en-v2", held_out("category"), "0.905"),
                Quote("madral", held_out("category"), "0.938"),
            ),
            *quoted_range(
                (*MADRAL_FAMILY, "mtbert"),
                held_out("brand"),
                Quote("mtbert", held_out("brand"), "0.934"),
                Quote("madral-en-v1", held_out("brand"), "0.951"),
            ),
            *quoted_range(
                (*MADRAL_FAMILY, "mtbert"),
                held_out("color"),
                Quote("madral-en-v2", held_out("color"), "0.945"),
                Quote("no-fusion", held_out("color"), "0.971"),
            ),
        ),
    ),
)


CLAIM_SETS: tuple[ClaimSet, ...] = (
    ClaimSet("## What the figures say", "## The main table", MAIN_CLAIMS),
    ClaimSet("### What the one-seed run showed", "## The one-seed run at 20,000 products", ONE_SEED_CLAIMS),
)


def _summary_line(says: str) -> str:
    return " ".join(says.split()).replace("*", "")[:90]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--doc", default="docs/RESULTS.md", help="The document whose claims sections are checked"
    )
    parser.add_argument(
        "--results",
        help="A `madr experiment` results.json to check the main claims against (default: the doc's tables)",
    )
    parser.add_argument(
        "--store_results", default=str(STORE_RESULTS), help="Folder of the store benches' per-query rows"
    )
    args = parser.parse_args(argv)
    markdown = Path(args.doc).read_text()
    failed = total = gone = 0
    for claim_set in CLAIM_SETS:
        print(f"{claim_set.said_in.lstrip('# ')} (the table of {claim_set.table_in.lstrip('# ')!r}):")
        if args.results and claim_set is CLAIM_SETS[0]:
            report = json.loads(Path(args.results).read_text())
            with tempfile.TemporaryDirectory() as folder:
                table = table_of_results(report, Path(folder) / "results.md")
        else:
            table = claim_set.table(markdown)
        for claim, failures in check_claims(table, claim_set.claims):
            failed += bool(failures)
            print(f"  {'FAIL' if failures else 'ok  '}  {_summary_line(claim.says)}")
            for failure in failures:
                print(f"          {failure}")
        missing = claim_set.unquoted(markdown)
        for says in missing:
            print(f"  GONE  {_summary_line(says)}  (no longer in {args.doc}: update its claim set)")
        total += len(claim_set.claims)
        gone += len(missing)
    # The store sections' figures, recomputed from the committed per-query rows (bench.store_claims).
    print(f"{SECTION.lstrip('# ')} (per-query rows in {STORE_RESULTS}):")
    for figure, failure in check_store_figures(markdown, STORE_FIGURES, Path(args.store_results)):
        failed += bool(failure)
        gone += failure == NOT_IN_DOCUMENT
        name = f"{figure.store} {figure.kind} {figure.metric} {figure.a}" + (
            f" vs {figure.b}" if figure.b else ""
        )
        print(
            f"  {'FAIL' if failure else 'ok  '}  {name}: {figure.text}"
            + (f"  ({failure})" if failure else "")
        )
    total += len(STORE_FIGURES)
    print(f"{total - failed} of {total} claims hold; {gone} no longer in the document")
    return 1 if failed or gone else 0


if __name__ == "__main__":
    sys.exit(main())
