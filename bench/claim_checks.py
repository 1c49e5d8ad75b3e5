"""The checks a claim of docs/RESULTS.md is made of, read against a table of `bench.results_table`.

A claim is a sentence of the document (`Claim.says`, quoted word for word) and the checks that make it
true: a figure it quotes (`Quote`), a significance mark it reports or denies (`Marked`, `NotMarked`),
an order between variants (`Ahead`), a threshold (`AtLeast`), or a collapse (`Collapsed`). A
`ClaimSet` is the claims of one section and the section whose table they rest on
(`bench.results_claims` holds the document's sets). The names of the tables' rows and column groups, and
three builders of common checks (`held_out`, `aspect_quotes`, `quoted_range`), close the module.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from bench.claim_words import SIGNIFICANCE
from bench.results_table import DELTA, Table, main_table
from evaluation.experiment_report import COLUMNS
from schemas import ECOMMERCE_ASPECTS

METRIC_OF = {label: metric for metric, label in COLUMNS}  # "R@100" -> "recall@100"


@dataclass(frozen=True)
class EveryRow:
    """Every row of the table but `but`: a claim about "every other variant" then covers a row that a
    later run adds, instead of passing for the rows it happened to list."""

    but: tuple[str, ...] = ()

    def of(self, table: Table) -> tuple[str, ...]:
        return tuple(variant for variant in table.cells if variant not in self.but)


Variants = tuple[str, ...] | EveryRow


def _rows(variants: Variants, table: Table) -> tuple[str, ...]:
    return variants.of(table) if isinstance(variants, EveryRow) else variants


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

    variants: Variants
    columns: tuple[str, ...]
    mark: str

    def failure(self, table: Table) -> str | None:
        variants = _rows(self.variants, table)
        missing = [f"{v} {c}" for v in variants for c in self.columns if self.mark not in table.marks(v, c)]
        return f"not marked {self.mark}: {', '.join(missing)}" if missing else None


@dataclass(frozen=True)
class NotMarked:
    """No cell of these variants in these columns carries `mark`."""

    variants: Variants
    columns: tuple[str, ...]
    mark: str

    def failure(self, table: Table) -> str | None:
        variants = _rows(self.variants, table)
        missing = [f"{v} {c}" for v in variants for c in self.columns if table.value(v, c) is None]
        if missing:  # a row or column the claim speaks of is gone: not a vacuous pass
            return f"no value for {', '.join(missing)}"
        found = [f"{v} {c}" for v in variants for c in self.columns if self.mark in table.marks(v, c)]
        return f"marked {self.mark}: {', '.join(found)}" if found else None


@dataclass(frozen=True)
class Ahead:
    """`variant`'s value is above each of `others`' in every column (below where `lower` is set) and, on
    a table with its run archive behind it, the difference has a paired p under 0.01 (the threshold the
    claim's word needs, `bench.claim_words`), unless `tested` is off: the sentence says it is not."""

    variant: str
    others: Variants
    columns: tuple[str, ...]
    lower: bool = False
    tested: bool = True

    def failure(self, table: Table) -> str | None:
        wrong = []
        others = [other for other in _rows(self.others, table) if other != self.variant]
        for column in self.columns:
            mine = table.value(self.variant, column)
            for other in others:
                theirs = table.value(other, column)
                if mine is None or theirs is None:
                    wrong.append(f"{column}: no value for {self.variant if mine is None else other}")
                    continue
                if not (mine < theirs if self.lower else mine > theirs):
                    wrong.append(f"{column}: {self.variant} {mine:.4f} vs {other} {theirs:.4f}")
                elif self.tested and table.archive is not None and column in METRIC_OF:
                    if other not in table.archive.runs or self.variant not in table.archive.runs:
                        wrong.append(f"{column}: no archived runs to test {self.variant} against {other}")
                        continue
                    _, pvalue = table.archive.paired(self.variant, other, METRIC_OF[column])
                    if not pvalue < SIGNIFICANCE:
                        wrong.append(f"{column}: {self.variant} vs {other} at p {pvalue:.2g}, not under 0.01")
        side = "below" if self.lower else "ahead of"
        return f"not {side} on {'; '.join(wrong)}" if wrong else None


@dataclass(frozen=True)
class AtLeast:
    """Every listed cell is at least `threshold` (or below it, with `below`)."""

    variants: Variants
    column: str
    threshold: float
    below: bool = False

    def failure(self, table: Table) -> str | None:
        wrong = []
        for variant in _rows(self.variants, table):
            value = table.value(variant, self.column)
            holds = value is not None and (value < self.threshold if self.below else value >= self.threshold)
            if not holds:
                wrong.append(f"{variant} {value}")
        side = "below" if self.below else "at least"
        return f"{self.column} not {side} {self.threshold}: {', '.join(wrong)}" if wrong else None


@dataclass(frozen=True)
class Collapsed:
    """Each variant's row carries the collapse mark † (`evaluation.collapse`: documents at a mean pairwise
    cosine of 0.95 or above)."""

    variants: tuple[str, ...]

    def failure(self, table: Table) -> str | None:
        missing = [variant for variant in self.variants if variant not in table.collapsed]
        return f"not marked † (collapsed): {', '.join(missing)}" if missing else None


def _minus(text: str) -> str:
    return text.replace("−", "-")


def same_p(pvalue: float, text: str) -> bool:
    """`text` is `pvalue` to as many significant digits as it shows (`0.02`, `3e-9`, `0.0071`)."""
    mantissa = _minus(text).lower().split("e")[0].lstrip("0.").replace(".", "") or "0"
    digits = max(1, len(mantissa))
    return float(f"{pvalue:.{digits - 1}e}") == float(_minus(text))


def _no_archive(table: Table) -> str | None:
    return None if table.archive is not None else "needs the run archive; this table has none behind it"


@dataclass(frozen=True)
class Paired:
    """The claim quotes `first` − `second` in `metric` (points, `+1.8`) and its paired t-test p (`0.02`),
    per-query values pooled over the seeds, not Holm-adjusted: recomputed from the run archive."""

    first: str
    second: str
    metric: str
    points: str | None  # None: the sentence quotes only the p-value
    p: str | None = None

    def failure(self, table: Table) -> str | None:
        if table.archive is None:
            return _no_archive(table)
        points, pvalue = table.archive.paired(self.first, self.second, self.metric)
        wrong = []
        if self.points is not None:
            decimals = len(self.points.split(".")[1]) if "." in self.points else 0
            found = f"{points:+.{decimals}f}"
            if found != _minus(self.points) and not (float(found) == 0 == float(_minus(self.points))):
                wrong.append(f"{self.points} points (the archive gives {found})")
        if self.p is not None and not same_p(pvalue, self.p):
            wrong.append(f"p {self.p} (the archive gives {pvalue:.2g})")
        what = f"{self.first} vs {self.second} {self.metric}"
        return f"quotes {what} as {' and '.join(wrong)}" if wrong else None


@dataclass(frozen=True)
class SeedMeans:
    """The claim quotes each seed's mean of `metric` (`0.6771 / 0.6735 / 0.6566`), in seed order."""

    variant: str
    metric: str
    text: str

    def failure(self, table: Table) -> str | None:
        if table.archive is None:
            return _no_archive(table)
        decimals = len(self.text.split("/")[0].strip().split(".")[1])
        found = " / ".join(f"{m:.{decimals}f}" for m in table.archive.seed_means(self.variant, self.metric))
        return (
            None if found == self.text else f"quotes {self.variant}'s seeds as {self.text}; archived: {found}"
        )


@dataclass(frozen=True)
class SeedMinutes:
    """The claim quotes the range of the variant's per-seed archived stage minutes (`13.1-14.6`, `1.0`)."""

    variant: str
    text: str

    def failure(self, table: Table) -> str | None:
        if table.archive is None:
            return _no_archive(table)
        minutes = table.archive.seed_minutes(self.variant)
        low, high = f"{min(minutes):.1f}", f"{max(minutes):.1f}"
        found = low if low == high else f"{low}-{high}"
        return (
            None if found == self.text else f"quotes {self.variant} {self.text} min a seed; archived: {found}"
        )


Check = Quote | Marked | NotMarked | Ahead | AtLeast | Collapsed | Paired | SeedMeans | SeedMinutes


@dataclass(frozen=True)
class Claim:
    """One sentence of the section (`says`, quoted exactly) and what makes it true."""

    says: str
    checks: tuple[Check, ...]


@dataclass(frozen=True)
class ClaimSet:
    """The claims said in the section headed `said_in`, checked against the first main-style table
    (`| variant | R@100 | ...`) of the section headed `table_in` (headings matched by their start)."""

    said_in: str
    table_in: str
    claims: tuple[Claim, ...]

    def table(self, markdown: str) -> Table:
        return main_table(section(markdown, self.table_in))

    def unquoted(self, markdown: str) -> list[str]:
        """The claims whose sentence the section no longer says word for word."""
        said = _words(section(markdown, self.said_in))
        return [claim.says for claim in self.claims if _words(claim.says) not in said]


def section(markdown: str, heading: str) -> str:
    """The text under the first heading that starts with `heading`, up to the next heading of its level
    or above (`## A` ends at the next `## ` or `# `; `### B` also at the next `### `)."""
    lines = markdown.splitlines()
    level = len(heading) - len(heading.lstrip("#"))
    start = next((i for i, line in enumerate(lines) if line.startswith(heading)), None)
    if start is None:
        raise ValueError(f"no heading starting {heading!r} in the document")
    end = start + 1
    while end < len(lines):
        hashes = len(lines[end]) - len(lines[end].lstrip("#"))
        if 0 < hashes <= level and lines[end][hashes : hashes + 1] == " ":
            break
        end += 1
    return "\n".join(lines[start:end])


def check_claims(table: Table, claims: Iterable[Claim]) -> list[tuple[Claim, list[str]]]:
    """Each claim with its failures (empty: it holds on `table`)."""
    results = []
    for claim in claims:
        failures = [failure for check in claim.checks if (failure := check.failure(table))]
        results.append((claim, failures))
    return results


def _words(text: str) -> str:
    """Text with its line breaks and runs of spaces as single spaces: a re-wrapped sentence still matches."""
    return " ".join(text.split())


# The rows and columns of the experiment's tables (`evaluation.experiment_report`) that claims speak of.
ASPECT_VARIANTS = ("mtbert", "madr", "madral", "madral-en-v1", "madral-en-v2", "no-fusion", "mural")
MADRAL_FAMILY = ("madral", "madral-en-v1", "madral-en-v2", "no-fusion")
RETRIEVAL = ("R@100", "R@500", "R@10k")
RANKING = ("NDCG@5", "NDCG@10", "NDCG@50", "AUC")
HELD_OUT = "Acc@1 held-out products"
QUERY_ACCURACY = "Acc@1 queries"
ZERO_SHOT = "zero-shot"


def held_out(aspect: str) -> str:
    return f"{HELD_OUT}:{aspect}"


def aspect_quotes(variant: str, column: str, texts: Iterable[str]) -> tuple[Quote, ...]:
    """Quotes of one variant's per-aspect cells (category / brand / color)."""
    return tuple(Quote(variant, f"{column}:{a}", t) for a, t in zip(ECOMMERCE_ASPECTS, texts, strict=True))


def quoted_range(variants: Variants, column: str, low: Quote, high: Quote) -> tuple[AtLeast | Quote, ...]:
    """The claim quotes `low`-`high` as the range of `variants`' cells in `column`."""
    # A cell that rounds to `low` or `high` at the quotes' decimals is inside the range.
    slack = 0.5 * 10 ** -len(high.text.split(".")[1])
    return (
        low,
        high,
        AtLeast(variants, column, float(low.text) - slack),
        AtLeast(variants, column, float(high.text) + slack, below=True),
    )
