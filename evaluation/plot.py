"""Recall against k, as numbers and as a PNG: how recall grows with depth, one line per searcher.

The evaluation stage emits, per scored query, how many judged products are relevant and the ranks at
which the retrieved ones were found (`relevant_ranks`). That is all a recall@k curve needs, for any k
up to the retrieval depth, so the curve is computed on the driver without reading the run file again.

Recall@k here is the same quantity as the `recall@k` metric (metrics.py): the mean, over queries with at
least one relevant judged product, of |relevant ∩ top-k| / |relevant|.

The figure is drawn on matplotlib's Agg canvas directly (no pyplot): no display is needed, and no global
backend state is changed for whatever else runs in the same process.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import NullFormatter

PLOT_FILE = "recall_at_k.png"
_STEPS = (1, 2, 5)


def k_grid(depth: int) -> list[int]:
    """k = 1, 2, 5, 10, 20, 50, ... up to ``depth``, and ``depth`` itself last (120 for 120 products)."""
    if isinstance(depth, bool) or not isinstance(depth, int) or depth < 1:
        raise ValueError(f"depth must be a positive int, got {depth!r}")
    grid: list[int] = []
    scale = 1
    while scale <= depth:
        grid.extend(step * scale for step in _STEPS if step * scale <= depth)
        scale *= 10
    if grid[-1] != depth:
        grid.append(depth)
    return grid


def recall_curve(rows: Iterable[Mapping[str, object]], ks: Sequence[int]) -> tuple[list[float], int]:
    """Mean recall at each k, over the rows (queries) with relevant products; and how many queries that is.

    A row is ``{"num_relevant": n, "ranks": [rank of each retrieved relevant product]}``. A query without
    relevant judged products has no recall (as in metrics.py) and is left out; no query at all gives nan.
    """
    cutoffs = np.asarray(ks, dtype=np.int64)
    total = np.zeros(cutoffs.size, dtype=np.float64)
    queries = 0
    for row in rows:
        relevant = int(row["num_relevant"])  # type: ignore[call-overload]
        ranks = np.asarray(row["ranks"] or [], dtype=np.int64)
        if ranks.size > relevant:
            raise ValueError(f"query {row.get('query_id')!r}: {ranks.size} ranks for {relevant} relevant")
        if relevant == 0:
            continue
        queries += 1
        found = np.searchsorted(np.sort(ranks), cutoffs, side="right")
        total += found / relevant
    if queries == 0:
        return [math.nan] * cutoffs.size, 0
    return (total / queries).tolist(), queries


def write_recall_plot(
    path: str | Path, ks: Sequence[int], curves: Mapping[str, Sequence[float]], title: str
) -> Path:
    """Draw recall@k against k (log axis), one line per searcher, and save a PNG at ``path``."""
    if not curves:
        raise ValueError("no recall curve to plot")
    figure = Figure(figsize=(7.0, 4.5), dpi=120, layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    styles = {"exact": ("tab:gray", "--", "s"), "ann": ("tab:blue", "-", "o")}
    for name, values in curves.items():
        if len(values) != len(ks):
            raise ValueError(f"curve {name!r} has {len(values)} values for {len(ks)} cutoffs")
        color, line, marker = styles.get(name, (None, "-", "o"))
        axes.plot(ks, values, label=name, color=color, linestyle=line, marker=marker, markersize=4)
    axes.set_xscale("log")
    axes.set_xlim(0.8, max(ks) * 1.25)
    # Plain numbers at the 1-2-5 grid read better than 10^n; a depth just past a grid point (60 after 50)
    # keeps its point on the line but not a label of its own, which would overlap.
    ticks = [k for i, k in enumerate(ks) if i == 0 or k >= 1.5 * ks[i - 1]]
    axes.set_xticks(
        ticks, labels=[f"{k // 1000}k" if k >= 1000 and k % 1000 == 0 else f"{k:,}" for k in ticks]
    )
    axes.xaxis.set_minor_formatter(NullFormatter())
    axes.set_ylim(0.0, 1.02)
    axes.set_xlabel("k (retrieved products, log scale)")
    axes.set_ylabel("recall@k")
    axes.set_title(title)
    axes.grid(True, which="major", alpha=0.4)
    axes.grid(True, which="minor", alpha=0.15)
    axes.legend(title="searcher", loc="lower right")
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(target, format="png")
    return target


__all__ = ["PLOT_FILE", "k_grid", "recall_curve", "write_recall_plot"]
