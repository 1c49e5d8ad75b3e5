"""Every claim of docs/RESULTS.md's "What the figures say", recomputed from the table it rests on.

    python -m bench.results_claims                                   # the tables in docs/RESULTS.md
    python -m bench.results_claims --results runs/experiment-60k/results.json

Two sets of claims (`bench.claim_checks.ClaimSet`): the main table's (3 seeds at 60,000 products,
"What the figures say") and the one-seed 20,000-product run's that it replaced (its own section). Each
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
from collections.abc import Iterable
from pathlib import Path

from bench.claim_checks import (
    Ahead,
    AtLeast,
    Claim,
    ClaimSet,
    Collapsed,
    EveryRow,
    Marked,
    NotMarked,
    Quote,
    check_claims,
)
from bench.results_table import table_of_results
from schemas import ECOMMERCE_ASPECTS

ASPECT_VARIANTS = ("mtbert", "madr", "madral", "madral-en-v1", "madral-en-v2", "no-fusion", "mural")
MADRAL_FAMILY = ("madral", "madral-en-v1", "madral-en-v2", "no-fusion")
RETRIEVAL = ("R@100", "R@500", "R@10k")
RANKING = ("NDCG@5", "NDCG@10", "NDCG@50", "AUC")
HELD_OUT = "Acc@1 held-out products"
QUERY_ACCURACY = "Acc@1 queries"
ZERO_SHOT = "zero-shot"
# The trained rows level with zero-shot at R@100 in the main table.
LEVEL_WITH_ZERO_SHOT = ("mural-concat", "mtbert", "bibert-concat")


def _held_out(aspect: str) -> str:
    return f"{HELD_OUT}:{aspect}"


def _quotes(variant: str, column: str, texts: Iterable[str]) -> tuple[Quote, ...]:
    """Quotes of one variant's per-aspect cells (category / brand / color)."""
    return tuple(Quote(variant, f"{column}:{a}", t) for a, t in zip(ECOMMERCE_ASPECTS, texts, strict=True))


def _range(variants: tuple[str, ...], column: str, low: Quote, high: Quote) -> tuple[AtLeast | Quote, ...]:
    """The claim quotes `low`-`high` as the range of `variants`' cells in `column`."""
    top = float(high.text) + 0.0005  # a cell that rounds to `high` is inside the range
    return (
        low,
        high,
        AtLeast(variants, column, float(low.text) - 0.0005),
        AtLeast(variants, column, top, below=True),
    )


MAIN_CLAIMS: tuple[Claim, ...] = (
    Claim(
        "zero-shot is ahead of every trained variant but MURAL-CONCAT at R@100, and of every one at R@500 "
        "and R@10k",
        (
            Ahead(ZERO_SHOT, EveryRow(("mural-concat",)), ("R@100",)),
            Ahead(ZERO_SHOT, EveryRow(), ("R@500", "R@10k")),
        ),
    ),
    Claim(
        "and behind every trained variant but DSSM on the ranking task",
        (Ahead(ZERO_SHOT, EveryRow(("dssm",)), RANKING, lower=True), Ahead(ZERO_SHOT, ("dssm",), RANKING)),
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
        "Three trained rows are level with zero-shot at R@100, none marked against it: MURAL-CONCAT "
        "(0.6691), MtBERT (0.6452) and BiBERT-CONCAT (0.6432); every other trained row is ▼ there",
        (
            Quote("mural-concat", "R@100", "0.6691"),
            Quote("mtbert", "R@100", "0.6452"),
            Quote("bibert-concat", "R@100", "0.6432"),
            NotMarked(LEVEL_WITH_ZERO_SHOT, ("R@100",), "▼"),
            NotMarked(LEVEL_WITH_ZERO_SHOT, ("R@100",), "▲"),
            Marked(EveryRow((ZERO_SHOT, *LEVEL_WITH_ZERO_SHOT)), ("R@100",), "▼"),
        ),
    ),
    Claim(
        "all three ↑ against BiBERT at R@100 and on every ranking metric (+10.3, +7.9 and +7.7 points of "
        "R@100)",
        (
            Marked(LEVEL_WITH_ZERO_SHOT, ("R@100", *RANKING), "↑"),
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
            *_quotes("mural", HELD_OUT, ("0.645", "0.402", "0.023")),
            AtLeast(("mural",), _held_out("category"), 0.90, below=True),
            AtLeast(("mural",), _held_out("brand"), 0.90, below=True),
            AtLeast(("mural",), _held_out("color"), 0.75, below=True),
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
        "every MADRAL-family row and MtBERT meets them: category 0.905-0.938, brand 0.934-0.951, color "
        "0.945-0.971",
        (
            *_range(
                (*MADRAL_FAMILY, "mtbert"),
                _held_out("category"),
                Quote("madral-en-v2", _held_out("category"), "0.905"),
                Quote("madral", _held_out("category"), "0.938"),
            ),
            *_range(
                (*MADRAL_FAMILY, "mtbert"),
                _held_out("brand"),
                Quote("mtbert", _held_out("brand"), "0.934"),
                Quote("madral-en-v1", _held_out("brand"), "0.951"),
            ),
            *_range(
                (*MADRAL_FAMILY, "mtbert"),
                _held_out("color"),
                Quote("madral-en-v2", _held_out("color"), "0.945"),
                Quote("no-fusion", _held_out("color"), "0.971"),
            ),
        ),
    ),
)

ONE_SEED_CLAIMS: tuple[Claim, ...] = (
    Claim(
        "met by madral-en-v2 (0.942 / 0.933 / 0.921) and MtBERT (0.937 / 0.912 / 0.899)",
        (
            *_quotes("madral-en-v2", HELD_OUT, ("0.942", "0.933", "0.921")),
            *_quotes("mtbert", HELD_OUT, ("0.937", "0.912", "0.899")),
            AtLeast(("madral-en-v2", "mtbert"), _held_out("category"), 0.90),
            AtLeast(("madral-en-v2", "mtbert"), _held_out("brand"), 0.90),
            AtLeast(("madral-en-v2", "mtbert"), _held_out("color"), 0.75),
        ),
    ),
    Claim(
        "MADRAL, en-v1 and no-fusion (5 layers, §7.2) miss category by 2-4.5 points (0.855-0.881) and meet "
        "brand and color",
        (
            AtLeast(("madral", "madral-en-v1", "no-fusion"), _held_out("category"), 0.855),
            AtLeast(("madral", "madral-en-v1", "no-fusion"), _held_out("category"), 0.8815, below=True),
            AtLeast(("madral", "madral-en-v1", "no-fusion"), _held_out("brand"), 0.90),
            AtLeast(("madral", "madral-en-v1", "no-fusion"), _held_out("color"), 0.75),
        ),
    ),
    Claim(
        "Query category Acc@1 ≥ 0.80: every MADRAL-family variant and MtBERT (0.826-0.917); MURAL 0.785",
        (
            AtLeast((*MADRAL_FAMILY, "mtbert"), f"{QUERY_ACCURACY}:category", 0.80),
            Quote("mtbert", f"{QUERY_ACCURACY}:category", "0.917"),
            Quote("madral-en-v1", f"{QUERY_ACCURACY}:category", "0.826"),
            Quote("mural", f"{QUERY_ACCURACY}:category", "0.785"),
        ),
    ),
    Claim(
        "MURAL learns category and brand weakly and color not at all at this budget** (0.733 / 0.567 / 0.035",
        _quotes("mural", HELD_OUT, ("0.733", "0.567", "0.035")),
    ),
    Claim(
        "MtBERT (NDCG@5/10/50, AUC ↑), bibert-concat (NDCG ↑, AUC ↑) and madral-en-v2 (NDCG@5/10/50 ↑",
        (
            Marked(("mtbert", "bibert-concat"), RANKING, "↑"),
            Marked(("madral-en-v2",), RANKING[:3], "↑"),
        ),
    ),
    Claim(
        "On R@100 no aspect-aware variant is significantly ahead",
        (NotMarked(ASPECT_VARIANTS, ("R@100",), "↑"),),
    ),
    Claim(
        "MtBERT +3.3 points (p = 0.077), en-v2 -1.4",
        (Quote("mtbert", "R@100 Δ points", "+3.3"), Quote("madral-en-v2", "R@100 Δ points", "-1.4")),
    ),
    Claim(
        "MtBERT (CLS plus aspect heads) is the best aspect-aware variant on R@100, R@500 and every ranking "
        "metric",
        (Ahead("mtbert", tuple(v for v in ASPECT_VARIANTS if v != "mtbert"), ("R@100", "R@500", *RANKING)),),
    ),
    Claim(
        "brand / color: MADRAL 0.947 / 0.938 against 0.912 / 0.899; category: en-v2 0.942 against 0.937",
        (
            Ahead("madral", ("mtbert",), (_held_out("brand"), _held_out("color"))),
            Ahead("madral-en-v2", ("mtbert",), (_held_out("category"),)),
            Quote("madral", _held_out("brand"), "0.947"),
            Quote("madral", _held_out("color"), "0.938"),
        ),
    ),
    Claim(
        "the one variant significantly ahead on R@100 is UHD-BERT (+6.7 points",
        (
            Marked(("uhd",), ("R@100",), "↑"),
            Marked(("uhd",), ("NDCG@5",), "↓"),
            Quote("uhd", "R@100 Δ points", "+6.7"),
        ),
    ),
    Claim(
        "MADRAL-ori is below BiBERT (R@100 0.684 ↓) and first-k (en-v2) recovers (0.805",
        (
            Marked(("madral",), ("R@100",), "↓"),
            Quote("madral", "R@100", "0.684"),
            NotMarked(("madral-en-v2",), ("R@100",), "↓"),
            Quote("madral-en-v2", "R@100", "0.805"),
        ),
    ),
    Claim(
        "no-fusion, which embeds CLS alone, collapses (R@100 0.030)",
        (Quote("no-fusion", "R@100", "0.030"), Marked(("no-fusion",), ("R@100",), "↓")),
    ),
    Claim(
        "MURAL is ahead of MUR on R@100 (0.697 vs 0.633) and on every ranking metric",
        (Ahead("mural", ("mur",), ("R@100", *RANKING)), Quote("mural", "R@100", "0.697")),
    ),
    Claim(
        "but behind at the deeper cut-offs (R@500 0.892 vs 0.897, R@10k 0.990 vs 0.993",
        (Ahead("mural", ("mur",), ("R@500", "R@10k"), lower=True), Quote("mur", "R@500", "0.897")),
    ),
    Claim(
        "both are below BiBERT on R@100",
        (Ahead("bibert", ("mural", "mur"), ("R@100",)),),
    ),
    Claim(
        "**DSSM and MADR** are far behind (R@100 0.124 and 0.336)",
        (
            Quote("dssm", "R@100", "0.124"),
            Quote("madr", "R@100", "0.336"),
            Marked(("dssm", "madr"), ("R@100",), "↓"),
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
            print(f"  GONE  {_summary_line(says)}  (no longer in {args.doc}: update bench/results_claims.py)")
        total += len(claim_set.claims)
        gone += len(missing)
    print(f"{total - failed} of {total} claims hold; {gone} no longer in the document")
    return 1 if failed or gone else 0


if __name__ == "__main__":
    sys.exit(main())
