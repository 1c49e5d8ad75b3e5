"""The figures docs/RESULTS.md quotes for store catalogs, recomputed from the committed per-query rows.

`python -m bench.store_bench` writes every system's per-query Recall@100 and NDCG@10 for each store
(bench/results/store/<store>.parquet: query_id, system, metrics). Each `StoreFigure` here is a figure a
sentence of the document quotes (the sentence quoted word for word): a system's mean, the paired
difference of two systems in points, or its two-sided paired t-test p-value, recomputed from those rows
as quoted (same decimals; p-values to two significant digits). A changed per-query row, or a changed
sentence, fails the check (`bench.results_claims` runs these with the document's other claims).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq

from evaluation import paired_t_test

STORE_RESULTS = Path("bench/results/store")
NOT_IN_DOCUMENT = "the sentence is no longer in the document"
SECTION = "## A store's own catalog: BM25, zero-shot, and madr adapt fused with BM25"  # its heading starts so


Rows = dict[str, dict[str, dict[str, float]]]  # system -> query_id -> metrics


@dataclass(frozen=True)
class StoreFigure:
    """A figure quoted by a sentence: `mean` of system `a`, or `delta` (points, a − b) or `p` of a vs b."""

    says: str
    store: str
    kind: str  # "mean", "delta" or "p"
    metric: str
    text: str
    a: str
    b: str | None = None


def per_query_rows(folder: Path, store: str) -> Rows:
    """system -> query_id -> metrics, from FOLDER/<store>.parquet."""
    table = pq.read_table(folder / f"{store}.parquet").to_pylist()
    found: Rows = {}
    for row in table:
        found.setdefault(row["system"], {})[row["query_id"]] = row
    return found


def value(rows: Rows, figure: StoreFigure) -> float:
    """The figure recomputed from the per-query rows (paired over the queries both systems scored)."""
    a = rows[figure.a]
    if figure.kind == "mean":
        values = [row[figure.metric] for row in a.values()]
        return sum(values) / len(values)
    assert figure.b is not None, "a difference or a p-value needs two systems"
    b = rows[figure.b]
    common = sorted(a.keys() & b.keys())
    first = [a[q][figure.metric] for q in common]
    second = [b[q][figure.metric] for q in common]
    if figure.kind == "delta":
        return 100 * (sum(first) - sum(second)) / len(common)
    return paired_t_test(first, second).pvalue


def formatted(number: float, figure: StoreFigure) -> str:
    if figure.kind == "p":
        return f"{number:.2g}"
    decimals = len(figure.text.split(".")[1]) if "." in figure.text else 0
    return f"{number:+.{decimals}f}" if figure.kind == "delta" else f"{number:.{decimals}f}"


def check_store_figures(
    markdown: str,
    figures: Iterable[StoreFigure],
    folder: Path = STORE_RESULTS,
    rows_of: Callable[[Path, str], Rows] = per_query_rows,
) -> list[tuple[StoreFigure, str | None]]:
    """Each figure with its failure (None: the sentence is in the document and the rows give its text);
    `rows_of(folder, figure.store)` reads a figure's per-query rows."""
    text = " ".join(markdown.split())
    cache: dict[str, Rows] = {}
    results = []
    for figure in figures:
        if " ".join(figure.says.split()) not in text:
            results.append((figure, NOT_IN_DOCUMENT))
            continue
        if figure.store not in cache:  # read once per store (setdefault would read it for every figure)
            cache[figure.store] = rows_of(folder, figure.store)
        rows = cache[figure.store]
        found = formatted(value(rows, figure), figure)
        ok = found == figure.text
        results.append((figure, None if ok else f"quotes {figure.text}; the per-query rows give {found}"))
    return results


def paired_figures(
    says: str, store: str, a: str, b: str, quoted: dict[str, tuple[str | None, str | None]]
) -> list[StoreFigure]:
    """a − b in points and its paired p, per metric, as one sentence quotes them ({metric: (delta, p)};
    None: not quoted)."""
    return [
        StoreFigure(says, store, kind, metric, text, a, b)
        for metric, texts in quoted.items()
        for kind, text in zip(("delta", "p"), texts, strict=True)
        if text is not None
    ]


def _system_figures(says: str, store: str, means: dict[str, tuple[str, str]]) -> list[StoreFigure]:
    """Means of several systems quoted by one sentence: {system: (Recall@100 text, NDCG@10 text)}."""
    return [
        StoreFigure(says, store, "mean", metric, text, system)
        for system, texts in means.items()
        for metric, text in zip(("recall@100", "ndcg@10"), texts, strict=True)
    ]


SYSTEMS = ("bm25", "zero-shot", "bm25+zero-shot", "model", "bm25+model")  # the table's columns, in order
ROWS = {
    "store_export": "| store_export (40 queries) | 0.826 / 0.776 | 0.958 / 0.795 | 0.958 / 0.818 "
    "| 0.995 / 0.829 | 0.995 / 0.854 |",
    "second_store": "| second_store (240 queries) | 0.832 / 0.621 | 0.791 / 0.538 | 0.864 / 0.632 "
    "| 0.885 / 0.637 | 0.891 / 0.659 |",
}


def _row_figures(rows: dict[str, str], systems: tuple[str, ...]) -> list[StoreFigure]:
    """Every cell of a table's rows ({store: row as written}): each column's system's R@100 / NDCG@10
    mean on that store; the first column names the row."""
    figures = []
    for store, row in rows.items():
        cells = [cell.strip() for cell in row.strip("|").split("|")[1:]]
        means = dict(zip(systems, (tuple(cell.split(" / ")) for cell in cells), strict=True))
        figures += _system_figures(row, store, means)
    return figures


def _pair(says: str, store: str, a: str, b: str, quoted: dict[str, tuple[str, str]]) -> list[StoreFigure]:
    """A difference a − b in points and its p-value, per metric: {metric: (delta text, p text)}."""
    return [
        figure
        for metric, (delta, pvalue) in quoted.items()
        for figure in (
            StoreFigure(says, store, "delta", metric, delta, a, b),
            StoreFigure(says, store, "p", metric, pvalue, a, b),
        )
    ]


HYBRID = "bm25+zero-shot"
ALPHA_03, ALPHA_07 = "second_store-wise_ft_alpha-0.3", "second_store-wise_ft_alpha-0.7"
ABLATION_ROWS = {
    ALPHA_03: "| WiSE-FT α 0.3 (closer to the backbone) | 0.869 / 0.627 | 0.885 / 0.660 |",
    ALPHA_07: "| WiSE-FT α 0.7 (closer to the adapted weights) | 0.886 / 0.622 | 0.890 / 0.655 |",
    "second_store": "| defaults (WiSE-FT α 0.5) | 0.885 / 0.637 | 0.891 / 0.659 |",
}
ALONE = "NDCG@10 +0.5 (p 0.71), −0.5 (p 0.69) and −1.0 (p 0.5) points for α 0.5, 0.3 and 0.7"
FUSED = "NDCG@10 +2.7 (p 0.0025), +2.9 (p 0.00011) and +2.3 (p 0.019) points"


STORE_FIGURES: tuple[StoreFigure, ...] = (
    *_row_figures(ROWS, SYSTEMS),
    *_row_figures(ABLATION_ROWS, ("model", "bm25+model")),
    *_pair(
        "NDCG@10 +9.9 points (p 3.7e-11) and R@100 +9.4 (p 1.8e-11)",
        "second_store",
        "model",
        "zero-shot",
        {"ndcg@10": ("+9.9", "3.7e-11"), "recall@100": ("+9.4", "1.8e-11")},
    ),
    *_pair(
        "Zero-shot is below BM25 there at NDCG@10 (−8.3 points, p 2.2e-05) and lower at R@100 (−4.1, p 0.014",
        "second_store",
        "zero-shot",
        "bm25",
        {"ndcg@10": ("-8.3", "2.2e-05"), "recall@100": ("-4.1", "0.014")},
    ),
    *_pair(
        "lifts it above BM25 at R@100 (+5.3 points, p 0.0004) and to BM25's level at NDCG@10 (+1.6, p 0.38)",
        "second_store",
        "model",
        "bm25",
        {"recall@100": ("+5.3", "0.0004"), "ndcg@10": ("+1.6", "0.38")},
    ),
    *_pair(
        "NDCG@10 +0.5 points (p 0.71) on the second store",
        "second_store",
        "model",
        HYBRID,
        {"ndcg@10": ("+0.5", "0.71")},
    ),
    *_pair(
        "and +1.0 (p 0.67) on store_export", "store_export", "model", HYBRID, {"ndcg@10": ("+1.0", "0.67")}
    ),
    *_pair(
        "NDCG@10 +2.7 points (p 0.0025) and R@100 +2.8 (p 9.9e-05) on the second store",
        "second_store",
        "bm25+model",
        HYBRID,
        {"ndcg@10": ("+2.7", "0.0025"), "recall@100": ("+2.8", "9.9e-05")},
    ),
    *_pair(
        "NDCG@10 +3.6 (p 0.0087) on store_export",
        "store_export",
        "bm25+model",
        HYBRID,
        {"ndcg@10": ("+3.6", "0.0087")},
    ),
    *_pair(ALONE, "second_store", "model", HYBRID, {"ndcg@10": ("+0.5", "0.71")}),
    *_pair(ALONE, ALPHA_03, "model", HYBRID, {"ndcg@10": ("-0.5", "0.69")}),
    *_pair(ALONE, ALPHA_07, "model", HYBRID, {"ndcg@10": ("-1.0", "0.5")}),
    *_pair(FUSED, "second_store", "bm25+model", HYBRID, {"ndcg@10": ("+2.7", "0.0025")}),
    *_pair(FUSED, ALPHA_03, "bm25+model", HYBRID, {"ndcg@10": ("+2.9", "0.00011")}),
    *_pair(FUSED, ALPHA_07, "bm25+model", HYBRID, {"ndcg@10": ("+2.3", "0.019")}),
    *_pair(
        "R@100 +3.7 (p 0.076), NDCG@10 +3.4 (p 0.047)",
        "store_export",
        "model",
        "zero-shot",
        {"recall@100": ("+3.7", "0.076"), "ndcg@10": ("+3.4", "0.047")},
    ),
)


__all__ = [
    "NOT_IN_DOCUMENT",
    "SECTION",
    "STORE_FIGURES",
    "STORE_RESULTS",
    "StoreFigure",
    "check_store_figures",
    "formatted",
    "per_query_rows",
    "value",
]
