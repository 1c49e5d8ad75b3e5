"""Two variants of a run archive compared query by query: the differences RESULTS.md quotes that the
main table does not test (it tests every row against BiBERT and zero-shot only).

    python -m bench.archive_pairs bench/results/experiment-runs/default-60k madral-en-v1 madral
    python -m bench.archive_pairs DIR mtbert zero-shot --metrics recall@100,recall@500

Reads DIR/<seed>/<variant>.json.gz (`pipelines.experiment.runs.RunArchive`), pools each variant's seeds the
way the table does (`evaluation.experiment_stats.pool_seeds`: each query's metric averaged over the seeds),
and prints per metric both means, the difference in points and a paired t-test over the queries that
both define, not Holm-adjusted: one comparison chosen by the reader, not the table's family. A variant
trained once (zero-shot) is the same run for every seed.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from evaluation import paired_t_test
from evaluation.experiment_stats import paired_values, pool_seeds

DEFAULT_METRICS = ("recall@100", "recall@500", "recall@10000", "ndcg@10")


def archived_runs(folder: Path, variant: str) -> list[tuple[int, dict[str, Any]]]:
    """(seed, kept record) of every run of `variant` in the archive, in seed order."""
    runs = []
    for path in sorted(folder.glob(f"*/{variant}.json.gz"), key=lambda p: int(p.parent.name)):
        runs.append((int(path.parent.name), json.loads(gzip.decompress(path.read_bytes()))))
    if not runs:
        raise SystemExit(f"{folder}: no run of {variant!r} (expected {folder}/<seed>/{variant}.json.gz)")
    return runs


def compare(first: dict[str, Any], second: dict[str, Any], metric: str) -> dict[str, float]:
    """Means, difference (first − second) and paired p over the queries where both define `metric`."""
    a, b = paired_values(first["per_query"], second["per_query"], metric)
    return {
        "queries": len(a),
        "first": float(a.mean()),
        "second": float(b.mean()),
        "points": float((a - b).mean() * 100),
        "p": paired_t_test(a, b).pvalue,
    }


def _seed_means(runs: list[tuple[int, dict[str, Any]]], metric: str) -> str:
    means = [
        np.nanmean([row.get(metric, np.nan) for row in r["result"]["per_query"].values()]) for _, r in runs
    ]
    return " / ".join(f"{m:.4f}" for m in means)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("archive", type=Path, help="The --run_archive folder of `madr experiment`")
    parser.add_argument("first", help="A variant, e.g. madral-en-v1")
    parser.add_argument("second", help="The variant it is compared with, e.g. madral")
    parser.add_argument(
        "--metrics", default=",".join(DEFAULT_METRICS), help="Per-query metrics, comma-separated"
    )
    args = parser.parse_args(argv)
    runs = {name: archived_runs(args.archive, name) for name in (args.first, args.second)}
    digests = {record["data"] for kept in runs.values() for _, record in kept}
    if len(digests) > 1:
        raise SystemExit(f"{args.archive}: the runs were made over different data ({len(digests)} digests)")
    pooled = {name: pool_seeds([record["result"] for _, record in kept]) for name, kept in runs.items()}
    for name, kept in runs.items():
        print(f"{name}: seeds {', '.join(str(seed) for seed, _ in kept)}")
    for metric in args.metrics.split(","):
        figures = compare(pooled[args.first], pooled[args.second], metric)
        print(
            f"{metric}: {args.first} {figures['first']:.4f} ({_seed_means(runs[args.first], metric)}), "
            f"{args.second} {figures['second']:.4f} ({_seed_means(runs[args.second], metric)}); "
            f"{figures['points']:+.1f} points, p {figures['p']:.2g} over {figures['queries']} queries "
            "(paired t-test, not Holm-adjusted)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
