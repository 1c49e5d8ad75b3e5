"""Each inference precision's retrieval and annotation quality against fp32, on one judged dataset.

A dataset folder (products, queries, judgments) and the model that serves it: the catalog is embedded at
each precision by `madr embed` as a user types it, and `madr evaluate` scores it with the queries
encoded at the same precision (exact search, so the index plays no part). Measured on the demo
benchmark and on the store export (examples/store_export, through `madr demo`'s store run), because
`--precision auto` may pick a precision only when it loses at most `MAX_LOSS_POINTS` of Recall@100 and
NDCG@10 on both (issue 49).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pipelines.evaluate.annotation_quality import written_annotation_accuracy
from pipelines.layout import DatasetLayout

MAX_LOSS_POINTS = 0.5
METRICS = ("recall@100", "ndcg@10")


def timed(command: list[str], threads: int) -> float:
    """Seconds `command` took, run with `threads` threads and no network; its stderr on a failure."""
    environment = {**os.environ, "OMP_NUM_THREADS": str(threads), "HF_HUB_OFFLINE": "1"}
    started = time.perf_counter()
    done = subprocess.run(command, env=environment, capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if done.returncode:
        raise RuntimeError(f"{' '.join(command)} failed:\n{done.stderr[-3000:]}")
    return elapsed


def madr(*arguments: str) -> list[str]:
    return [sys.executable, "-m", "jobs.cli", "--log_level", "WARNING", *arguments]


def embed_command(products: Path | str, model: Path, precision: str, output: Path, threads: int) -> list[str]:
    """`madr embed` of `products` at `precision` into `output`, as a user types it."""
    flags = ["--products", str(products), "--model", str(model), "--precision", precision]
    return madr("embed", *flags, "--output", str(output), "--overwrite", "--torch_threads", str(threads))


def scored(
    data: DatasetLayout, model: Path, embeddings: Path, output: Path, precision: str, threads: int
) -> dict[str, Any]:
    """Recall@100 and NDCG@10 by `madr evaluate` (queries at the same precision), and the held-out
    Accuracy@1 of the aspect values the embed run wrote."""
    flags = [
        "evaluate",
        *("--queries", data.queries, "--judgments", data.judgments),
        *("--model", str(model), "--embeddings", str(embeddings), "--output", str(output)),
        *("--searcher", "exact", "--depth", "100", "--metrics", ",".join(METRICS)),
        *("--precision", precision, "--compare_exact", "false"),
    ]
    timed(madr(*flags), threads)
    metrics = json.loads((output / "metrics.json").read_text())["metrics"]
    written = written_annotation_accuracy(
        str(model), str(embeddings), data.products, data.queries, data.judgments
    )
    return {
        **{name: round(value["mean"], 4) for name, value in metrics.items()},
        "held_out_accuracy@1": {aspect: round(accuracy, 3) for aspect, (accuracy, _) in written.items()},
        "held_out_products": max((count for _, count in written.values()), default=0),
    }


def precision_quality(
    data: DatasetLayout, model: Path, precisions: Sequence[str], work: Path, threads: int
) -> dict[str, Any]:
    """Each of `precisions` (fp32 first) embedded and scored on `data`, and each other one's change against
    fp32 in points: {precision: scores, "<precision>_<metric>_change_points": change}."""
    if precisions[0] != "fp32":
        raise ValueError(f"fp32 comes first, the reference: got {list(precisions)}")
    result: dict[str, Any] = {}
    for precision in precisions:
        embeddings = work / f"embeddings-{precision}"
        timed(embed_command(data.products, model, precision, embeddings, threads), threads)
        result[precision] = scored(data, model, embeddings, work / f"eval-{precision}", precision, threads)
    for precision in precisions[1:]:
        for metric in METRICS:
            result[f"{precision}_{metric}_change_points"] = change_points(result, precision, metric)
    return result


def change_points(quality: dict[str, Any], precision: str, metric: str) -> float:
    """`precision`'s change of `metric` against fp32 on one dataset, in points, from its scores (results
    files of every date hold those; the stored changes had other key names before 29 Nov 2026)."""
    return round(100 * (quality[precision][metric] - quality["fp32"][metric]), 2)


def within_loss(quality: dict[str, Any], precision: str) -> bool:
    """Whether `precision` lost at most `MAX_LOSS_POINTS` of every metric against fp32 on this dataset."""
    return all(change_points(quality, precision, metric) >= -MAX_LOSS_POINTS for metric in METRICS)


__all__ = [
    "MAX_LOSS_POINTS",
    "METRICS",
    "change_points",
    "embed_command",
    "madr",
    "precision_quality",
    "scored",
    "timed",
    "within_loss",
]
