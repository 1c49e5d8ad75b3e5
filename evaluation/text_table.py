"""The plain-text table of every report printed to a terminal (Markdown tables are written elsewhere)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence


def format_text_table(header: Sequence[str], rows: Iterable[Sequence[str]], separator: str = "  ") -> str:
    """Aligned columns, each as wide as its widest cell (header included): the first column is
    left-aligned, the others right-aligned; no line ends in spaces.

    Every row must have as many cells as the header (ValueError otherwise).
    """
    lines = [tuple(header), *(tuple(row) for row in rows)]
    for line in lines[1:]:
        if len(line) != len(header):
            raise ValueError(f"a row of {len(line)} cells in a table of {len(header)} columns: {line}")
    widths = [max(len(line[column]) for line in lines) for column in range(len(header))]
    return "\n".join(
        separator.join(
            cell.ljust(width) if column == 0 else cell.rjust(width)
            for column, (cell, width) in enumerate(zip(line, widths, strict=True))
        ).rstrip()
        for line in lines
    )
