"""docs/SCALING.md's measured figures, each recomputed from the bench/results/<name>.json it quotes
(`bench.results_claims` checks them with the other documents' `JsonFigure`s).

The evaluation-at-scale table from `sharded_eval.json`, the BM25 build costs from `lexical_build.json`,
the union recall's two ways from `union_recall.json`. Figures the document quotes from elsewhere (a test
run, a Dataflow estimate) say so beside them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.json_claims import RESULTS, JsonFigure, _result
from bench.store_claims import NOT_IN_DOCUMENT

DOCUMENT = "docs/SCALING.md"
MODES = {"whole": "whole index in the worker", "by_shard": "shard by shard"}


def _evaluation_row(size: str, mode: str) -> Callable[[dict[str, Any]], str]:
    """One row of the evaluation table, from the untuned 16-shard index's evaluation at `size`."""

    def render(figures: dict[str, Any]) -> str:
        run = figures["per_size"][size]["indexes"]["index-target0"]["evaluate"][mode]
        label = f"{int(size) // 1_000_000}M"
        return (
            f"| {label} | {MODES[mode]} | {run['seconds']:.1f} | {run['recall_at_10k']:.4f} | "
            f"{run['peak_rss_mb']:,.1f} MB |"
        )

    return render


@dataclass(frozen=True)
class TableRowFigure(JsonFigure):
    """A table row, found by its first cells (`says`), that must read `render(figures)` whole."""

    def failure(self, markdown: str, folder: Path = RESULTS) -> str | None:
        rows = [line.strip() for line in markdown.splitlines() if line.strip().startswith(self.says)]
        if not rows:
            return NOT_IN_DOCUMENT
        found = self.render(_result(folder, self.result)["figures"])
        return None if rows[0] == found else f"reads {rows[0]}; {self.result}.json gives {found}"


_EVALUATION_ROWS = (
    ("1000000", "whole"),
    ("1000000", "by_shard"),
    ("10000000", "whole"),
    ("10000000", "by_shard"),
)


BM25_COSTS = (
    "In an untuned 16-shard build of 1M products BM25 added 110.5 s and 1.8 GB of peak memory on a first "
    "build, and 61.5 s and 1.7 GB on the next night with 5 % of the titles edited"
)


def _bm25(seconds: str, peak: str) -> Callable[[dict[str, Any]], str]:
    def render(figures: dict[str, Any]) -> str:
        return f"{figures[seconds]:.1f} s and {figures[peak] / 1000:.1f} GB"

    return render


UNION_RECALL = (
    "at 1M × 128 in 16 shards its peak was 2,405 MB against 4,490 MB the whole-index way at depth 10,000 "
    "(1,486 MB against 3,127 MB at depth 100), in 97.7 s against 91.0 s, the same recall both ways (1.0000 "
    "at both depths on this corpus"
)


def _union(depth: str, part: str) -> Callable[[dict[str, Any]], str]:
    def render(figures: dict[str, Any]) -> str:
        row = figures[f"depth_{depth}"]
        by_shard, whole = row["by_shard"], row["whole_index"]
        if part == "peak":
            return f"{by_shard['peak_rss_mb']:,.0f} MB against {whole['peak_rss_mb']:,.0f} MB"
        if part == "seconds":
            return f"{by_shard['seconds']:.1f} s against {whole['seconds']:.1f} s"
        rows = [figures[f"depth_{d}"] for d in ("10000", "100")]
        recalls = {found["by_shard"]["recall_at_k"] for found in rows}
        if not all(found["equal_recall"] for found in rows) or len(recalls) != 1:
            return "recalls that differ between the two ways or the two depths"
        return f"the same recall both ways ({recalls.pop():.4f} at both depths"

    return render


SCALING_FIGURES: tuple[JsonFigure, ...] = (
    *(
        TableRowFigure(
            DOCUMENT,
            f"| {int(size) // 1_000_000}M | {MODES[mode]} |",
            "sharded_eval",
            f"the table's row {int(size) // 1_000_000}M, {MODES[mode]}",
            _evaluation_row(size, mode),
        )
        for size, mode in _EVALUATION_ROWS
    ),
    JsonFigure(
        DOCUMENT, BM25_COSTS, "lexical_build", "110.5 s and 1.8 GB", _bm25("bm25_seconds", "bm25_peak_rss_mb")
    ),
    JsonFigure(
        DOCUMENT,
        BM25_COSTS,
        "lexical_build",
        "61.5 s and 1.7 GB",
        _bm25("next_night_bm25_seconds", "next_night_bm25_peak_rss_mb"),
    ),
    JsonFigure(DOCUMENT, UNION_RECALL, "union_recall", "2,405 MB against 4,490 MB", _union("10000", "peak")),
    JsonFigure(DOCUMENT, UNION_RECALL, "union_recall", "1,486 MB against 3,127 MB", _union("100", "peak")),
    JsonFigure(DOCUMENT, UNION_RECALL, "union_recall", "97.7 s against 91.0 s", _union("10000", "seconds")),
    JsonFigure(
        DOCUMENT,
        UNION_RECALL,
        "union_recall",
        "the same recall both ways (1.0000 at both depths",
        _union("10000", "recall"),
    ),
)

__all__ = ["SCALING_FIGURES"]
