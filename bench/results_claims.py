"""Every claim of docs/RESULTS.md's "What the figures say", recomputed from the table it rests on.

    python -m bench.results_claims                                   # the table in docs/RESULTS.md
    python -m bench.results_claims --results runs/experiment/results.json

A claim is a sentence of that section (`Claim.says`, quoted word for word) and the checks that make it
true: a figure it quotes (`Quote`), a significance mark it reports or denies (`Marked`, `NotMarked`),
an order between variants (`Ahead`), or a threshold (`AtLeast`, `Below`). The checks read the main
table of `madr experiment` (the Markdown its `results.md` holds and RESULTS.md copies, or its
`results.json` rendered the same way), so a re-run that changes the table makes every claim it no
longer supports fail here, and `tests/test_results_claims.py` fails with it. Prints one line per claim
and exits 1 when any fails.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from bench.results_table import DELTA, Table, main_table, table_of_results
from schemas import ECOMMERCE_ASPECTS

SECTION = "## What the figures say"
ASPECT_VARIANTS = ("mtbert", "madr", "madral", "madral-en-v1", "madral-en-v2", "no-fusion", "mural")
MADRAL_FAMILY = ("madral", "madral-en-v1", "madral-en-v2", "no-fusion")
RANKING = ("NDCG@5", "NDCG@10", "NDCG@50", "AUC")
HELD_OUT = "Acc@1 held-out products"
QUERY_ACCURACY = "Acc@1 queries"


@dataclass(frozen=True)
class Quote:
    """The claim quotes `text` for a cell: the cell, rounded to as many decimals, reads the same."""

    variant: str
    column: str
    text: str

    def failure(self, table: Table) -> str | None:
        value = table.value(self.variant, self.column)
        decimals = len(self.text.split(".")[1]) if "." in self.text else 0
        scale = 100.0 if self.column.endswith(DELTA) else 1.0
        if value is None:
            return f"{self.variant} has no {self.column}"
        if f"{value * scale:.{decimals}f}" != self.text.lstrip("+"):
            return f"quotes {self.variant} {self.column} as {self.text}; the table has {value:.4f}"
        return None


@dataclass(frozen=True)
class Marked:
    """The cell of each variant in each column carries `mark` (↑ / ↓: Holm-adjusted p < 0.01)."""

    variants: tuple[str, ...]
    columns: tuple[str, ...]
    mark: str

    def failure(self, table: Table) -> str | None:
        missing = [
            f"{v} {c}" for v in self.variants for c in self.columns if self.mark not in table.marks(v, c)
        ]
        return f"not marked {self.mark}: {', '.join(missing)}" if missing else None


@dataclass(frozen=True)
class NotMarked:
    """No cell of these variants in these columns carries `mark`."""

    variants: tuple[str, ...]
    columns: tuple[str, ...]
    mark: str

    def failure(self, table: Table) -> str | None:
        missing = [f"{v} {c}" for v in self.variants for c in self.columns if table.value(v, c) is None]
        if missing:  # a row or column the claim speaks of is gone: not a vacuous pass
            return f"no value for {', '.join(missing)}"
        found = [f"{v} {c}" for v in self.variants for c in self.columns if self.mark in table.marks(v, c)]
        return f"marked {self.mark}: {', '.join(found)}" if found else None


@dataclass(frozen=True)
class Ahead:
    """`variant`'s value is above each of `others`' in every column (below where `lower` is set)."""

    variant: str
    others: tuple[str, ...]
    columns: tuple[str, ...]
    lower: bool = False

    def failure(self, table: Table) -> str | None:
        wrong = []
        for column in self.columns:
            mine = table.value(self.variant, column)
            for other in self.others:
                theirs = table.value(other, column)
                if mine is None or theirs is None:
                    wrong.append(f"{column}: no value for {self.variant if mine is None else other}")
                    continue
                if mine < theirs if self.lower else mine > theirs:
                    continue
                wrong.append(f"{column}: {self.variant} {mine:.4f} vs {other} {theirs:.4f}")
        side = "below" if self.lower else "ahead of"
        return f"not {side} on {'; '.join(wrong)}" if wrong else None


@dataclass(frozen=True)
class AtLeast:
    """Every listed cell is at least `threshold` (or below it, with `below`)."""

    variants: tuple[str, ...]
    column: str
    threshold: float
    below: bool = False

    def failure(self, table: Table) -> str | None:
        wrong = []
        for variant in self.variants:
            value = table.value(variant, self.column)
            holds = value is not None and (value < self.threshold if self.below else value >= self.threshold)
            if not holds:
                wrong.append(f"{variant} {value}")
        side = "below" if self.below else "at least"
        return f"{self.column} not {side} {self.threshold}: {', '.join(wrong)}" if wrong else None


Check = Quote | Marked | NotMarked | Ahead | AtLeast


@dataclass(frozen=True)
class Claim:
    """One sentence of the section (`says`, quoted exactly) and what makes it true."""

    says: str
    checks: tuple[Check, ...]


def _held_out(aspect: str) -> str:
    return f"{HELD_OUT}:{aspect}"


def _quotes(variant: str, column: str, texts: Iterable[str]) -> tuple[Quote, ...]:
    """Quotes of one variant's per-aspect cells (category / brand / color)."""
    return tuple(Quote(variant, f"{column}:{a}", t) for a, t in zip(ECOMMERCE_ASPECTS, texts, strict=True))


CLAIMS: tuple[Claim, ...] = (
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


def claims_section(markdown: str) -> str:
    """The text of RESULTS.md's claims section (up to the next heading of its level)."""
    start = markdown.index(SECTION)
    end = markdown.find("\n## ", start + len(SECTION))
    return markdown[start : end if end > 0 else len(markdown)]


def check_claims(table: Table, claims: Iterable[Claim] = CLAIMS) -> list[tuple[Claim, list[str]]]:
    """Each claim with its failures (empty: it holds on `table`)."""
    results = []
    for claim in claims:
        failures = [failure for check in claim.checks if (failure := check.failure(table))]
        results.append((claim, failures))
    return results


def unquoted(section: str, claims: Iterable[Claim] = CLAIMS) -> list[str]:
    """The claims whose sentence the section no longer says word for word."""
    said = _words(section)
    return [claim.says for claim in claims if _words(claim.says) not in said]


def _words(text: str) -> str:
    """Text with its line breaks and runs of spaces as single spaces: a re-wrapped sentence still matches."""
    return " ".join(text.split())


def _summary_line(says: str) -> str:
    return _words(says).replace("*", "")[:90]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--doc", default="docs/RESULTS.md", help="The document whose claims section is checked"
    )
    parser.add_argument(
        "--results",
        help="A `madr experiment` results.json to check the claims against (default: the doc's own table)",
    )
    args = parser.parse_args(argv)
    markdown = Path(args.doc).read_text()
    if args.results:
        report = json.loads(Path(args.results).read_text())
        with tempfile.TemporaryDirectory() as folder:
            table = table_of_results(report, Path(folder) / "results.md")
    else:
        table = main_table(markdown)
    failed = 0
    for claim, failures in check_claims(table):
        failed += bool(failures)
        print(f"{'FAIL' if failures else 'ok  '}  {_summary_line(claim.says)}")
        for failure in failures:
            print(f"        {failure}")
    missing = unquoted(claims_section(markdown))
    for says in missing:
        print(f"GONE  {_summary_line(says)}  (no longer in {args.doc}: update CLAIMS)")
    print(f"{len(CLAIMS) - failed} of {len(CLAIMS)} claims hold; {len(missing)} no longer in the document")
    return 1 if failed or missing else 0


if __name__ == "__main__":
    sys.exit(main())
