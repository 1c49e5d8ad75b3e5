"""The main table of `madr experiment`, read back from its Markdown, for `bench.results_claims`.

The experiment writes results.md (`evaluation.experiment_report.write_report`) and RESULTS.md copies its
table. Reading the Markdown rather than the numbers behind it means a claim is checked against what a
reader sees: the rounded figure, the ↑ / ↓ the table prints. A results.json is rendered with the same
writer first, so both sources read alike.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evaluation.experiment_report import COLLAPSED, write_report
from schemas import ECOMMERCE_ASPECTS

_NUMBER = re.compile(r"^-?\d+(\.\d+)?")
_SPREAD = re.compile(r"± (\d+(\.\d+)?)")
DELTA = " Δ points"  # a column suffix: the difference from the baseline's cell, in points
SPREAD = " sd"  # a column suffix: the cell's sd over training seeds (`0.5666 ± 0.0237`)


@dataclass(frozen=True)
class Cell:
    value: float | None
    marks: str = ""
    sd: float | None = None  # over training seeds, where the table prints one


@dataclass
class Table:
    """Cells by variant and column label (`R@100`, `Acc@1 held-out products:brand`, ...)."""

    baseline: str
    cells: dict[str, dict[str, Cell]] = field(default_factory=dict)
    collapsed: set[str] = field(default_factory=set)  # rows marked † (`evaluation.collapse`)
    # The runs the table was recomputed from (a `bench.archive_runs.ArchivedExperiment`, which builds its
    # tables with this module: typed loosely so that this one does not import it back); None for a table
    # read from a document.
    archive: Any = None

    def value(self, variant: str, column: str) -> float | None:
        """The cell's mean; `R@100 Δ points` and the like: its difference from the baseline's, in points
        divided by 100 (a fraction, as the cells are); `R@100 sd`: its sd over seeds."""
        if column.endswith(SPREAD):
            cell = self.cells.get(variant, {}).get(column.removesuffix(SPREAD))
            return cell.sd if cell else None
        if column.endswith(DELTA):
            column = column.removesuffix(DELTA)
            mine, base = self.value(variant, column), self.value(self.baseline, column)
            return None if mine is None or base is None else mine - base
        cell = self.cells.get(variant, {}).get(column)
        return cell.value if cell else None

    def marks(self, variant: str, column: str) -> str:
        cell = self.cells.get(variant, {}).get(column)
        return cell.marks if cell else ""


def parse_cell(text: str) -> Cell:
    """`0.8187 ± 0.0100 ↑ ▲` -> Cell(0.8187, "↑▲", 0.01); `–` -> Cell(None)."""
    text = text.strip()
    number = _NUMBER.match(text)
    if not number:
        return Cell(None)
    marks = "".join(ch for ch in text if ch in "↑↓▲▼")
    spread = _SPREAD.search(text)
    return Cell(float(number.group(0)), marks, float(spread.group(1)) if spread else None)


def table_body(markdown: str, header: str) -> list[list[str]] | None:
    """The body rows (cells stripped) of the first Markdown table whose header line starts with `header`,
    or None when the document has no such table."""
    lines = markdown.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith(header)), None)
    if start is None:
        return None
    body = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        body.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    return body


def _rows(lines: list[str]) -> tuple[list[str], list[list[str]]]:
    """The header and body cells of the Markdown table that `lines` starts with."""
    split = [[cell.strip() for cell in line.strip().strip("|").split("|")] for line in lines]
    return split[0], [row for row in split[2:]]


def main_table(markdown: str) -> Table:
    """The first table whose header starts `| variant | R@100 |`; per-aspect accuracy cells are split
    into one column per aspect (`Acc@1 held-out products:category`)."""
    lines = markdown.splitlines()
    start = next(
        (i for i, line in enumerate(lines) if re.match(r"^\|\s*variant\s*\|\s*R@100\s*\|", line)), None
    )
    if start is None:
        raise ValueError("no table with a header starting '| variant | R@100 |' found")
    end = start
    while end < len(lines) and lines[end].startswith("|"):
        end += 1
    header, body = _rows(lines[start:end])
    table = Table(baseline=_baseline(markdown, body))
    for row in body:
        cells: dict[str, Cell] = {}
        for label, text in zip(header[1:], row[1:], strict=True):
            label = re.sub(r"\s*\(.*\)$", "", label)  # `Acc@1 queries (category/brand/color)`
            if " / " in text:
                for aspect, part in zip(ECOMMERCE_ASPECTS, text.split(" / "), strict=True):
                    cells[f"{label}:{aspect}"] = parse_cell(part)
            else:
                cells[label] = parse_cell(text)
        variant = row[0].removesuffix(f" {COLLAPSED}")
        if variant != row[0]:
            table.collapsed.add(variant)
        table.cells[variant] = cells
    return table


def _baseline(markdown: str, body: list[list[str]]) -> str:
    """The variant the marks compare against: named in the caption ("than bibert"), else bibert."""
    named = re.search(r"(?:better|worse) than (\S+?) with p", markdown)
    variants = {row[0] for row in body}
    if named and named.group(1) in variants:
        return named.group(1)
    return "bibert"


def table_of_results(report: dict[str, Any], path: Path) -> Table:
    """A results.json's table, rendered by the experiment's own writer to `path` and read back."""
    return main_table(write_report(report, path))
