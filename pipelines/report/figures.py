"""The report's plots: PNGs drawn on matplotlib's Agg canvas (no pyplot, no display, no global state),
embedded in the page as data URIs, each with alt text that says what it shows.

Each system keeps one colour on every plot (`COLOURS`), so tonight's model is the same blue in the
recall curves and in the trends.
"""

from __future__ import annotations

import base64
import io
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

TONIGHT, LAST_NIGHT, ZERO_SHOT = "tonight", "last night", "zero-shot backbone"
# Colour-blind-safe (Okabe-Ito): one colour per system on every plot.
COLOURS = {TONIGHT: "#0072B2", LAST_NIGHT: "#999999", ZERO_SHOT: "#E69F00"}
STAGE_COLOURS = ("#0072B2", "#009E73", "#D55E00", "#CC79A7", "#56B4E9")


@dataclass(frozen=True)
class Picture:
    """A PNG and what it shows, in words (the image's alt text)."""

    png: bytes
    alt: str

    def data_uri(self) -> str:
        return "data:image/png;base64," + base64.b64encode(self.png).decode("ascii")


def _png(figure: Figure) -> bytes:
    buffer = io.BytesIO()
    FigureCanvasAgg(figure).print_png(buffer)
    return buffer.getvalue()


def recall_curves(series: Mapping[str, Mapping[int, float]]) -> Picture | None:
    """Recall@k against k (log scale) for each system that has at least one point."""
    drawn = {name: points for name, points in series.items() if points}
    if not drawn:
        return None
    figure = Figure(figsize=(6.4, 3.6), dpi=100)
    axes = figure.add_subplot()
    for name, points in drawn.items():
        ks = sorted(points)
        axes.plot(ks, [points[k] for k in ks], marker="o", label=name, color=COLOURS.get(name))
    axes.set_xscale("log")
    axes.set_xlabel("k (products retrieved per query, log scale)")
    axes.set_ylabel("Recall@k (mean over test queries)")
    axes.set_ylim(0, 1.02)
    axes.grid(True, alpha=0.3)
    axes.legend(loc="lower right")
    figure.tight_layout()
    words = "; ".join(
        f"{name}: " + ", ".join(f"R@{k} {points[k]:.3f}" for k in sorted(points))
        for name, points in drawn.items()
    )
    return Picture(_png(figure), f"Recall at k for {', '.join(drawn)}. {words}")


def reliability(points: Mapping[str, Sequence[Mapping[str, float]]]) -> Picture | None:
    """Observed Accuracy@1 against mean predicted confidence per confidence bin, one line per aspect,
    and the diagonal a calibrated model follows."""
    drawn = {aspect: bins for aspect, bins in points.items() if bins}
    if not drawn:
        return None
    figure = Figure(figsize=(4.2, 3.6), dpi=100)
    axes = figure.add_subplot()
    axes.plot([0, 1], [0, 1], linestyle="--", color="#777777", label="calibrated")
    for index, (aspect, bins) in enumerate(drawn.items()):
        colour = STAGE_COLOURS[index % len(STAGE_COLOURS)]
        x = [b["mean_confidence"] for b in bins]
        y = [b["accuracy"] for b in bins]
        axes.plot(x, y, marker="o", color=colour, label=aspect)
    axes.set_xlabel("predicted confidence (bin mean)")
    axes.set_ylabel("observed Accuracy@1")
    axes.set_xlim(0, 1.02)
    axes.set_ylim(0, 1.02)
    axes.grid(True, alpha=0.3)
    axes.legend(fontsize=7, loc="upper left")
    figure.tight_layout()
    words = "; ".join(
        f"{aspect}: "
        + ", ".join(f"{b['mean_confidence']:.2f} -> {b['accuracy']:.2f} ({b['count']:.0f})" for b in bins)
        for aspect, bins in drawn.items()
    )
    return Picture(_png(figure), f"Reliability diagram, confidence against observed accuracy. {words}")


def trend(
    title: str, series: Mapping[str, Sequence[float | None]], unit: str, *, runs: Sequence[str]
) -> Picture | None:
    """One small line plot of `series` (one value or None per run in `runs`), oldest run on the left."""
    drawn = {name: values for name, values in series.items() if any(_number(v) for v in values)}
    if not drawn or not runs:
        return None
    figure = Figure(figsize=(3.4, 2.2), dpi=100)
    axes = figure.add_subplot()
    positions = list(range(len(runs)))
    for index, (name, values) in enumerate(drawn.items()):
        colour = COLOURS.get(name, STAGE_COLOURS[index % len(STAGE_COLOURS)])
        points = [(x, v) for x, v in zip(positions, values, strict=True) if _number(v)]
        axes.plot([x for x, _ in points], [v for _, v in points], marker="o", label=name, color=colour)
    axes.set_title(title, fontsize=9)
    axes.set_ylabel(unit, fontsize=8)
    step = max(1, math.ceil(len(runs) / 6))
    axes.set_xticks(positions[::step], [runs[i] for i in positions[::step]], fontsize=7, rotation=30)
    axes.tick_params(axis="y", labelsize=7)
    axes.grid(True, alpha=0.3)
    if len(drawn) > 1:
        axes.legend(fontsize=6)
    figure.tight_layout()
    last = "; ".join(
        f"{name} {_last(values):.3g} {unit} on {runs[-1]}" for name, values in drawn.items() if _last(values)
    )
    return Picture(_png(figure), f"{title} over the last {len(runs)} runs ({runs[0]} to {runs[-1]}): {last}")


def _number(value: float | None) -> bool:
    return value is not None and not math.isnan(value)


def _last(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if _number(v)]
    return present[-1] if present else None


__all__ = [
    "COLOURS",
    "LAST_NIGHT",
    "TONIGHT",
    "ZERO_SHOT",
    "Picture",
    "recall_curves",
    "reliability",
    "trend",
]
