"""Two variants of a run archive compared query by query: the differences RESULTS.md quotes that the
main table does not test (it tests every row against BiBERT and zero-shot only).

    python -m bench.archive_pairs bench/results/experiment-runs/default-60k madral-en-v1 madral
    python -m bench.archive_pairs DIR mtbert zero-shot --metrics recall@100,recall@500

Reads DIR/<seed>/<variant>.json.gz (`pipelines.experiment.runs.RunArchive`, through
`bench.archive_runs`), pools each variant's seeds the
way the table does (`evaluation.experiment_stats.pool_seeds`: each query's metric averaged over the seeds),
and prints per metric both means, the difference in points and a paired t-test over the queries that
both define, not Holm-adjusted: one comparison chosen by the reader, not the table's family. A variant
trained once (zero-shot) is the same run for every seed.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from bench.archive_runs import ArchivedExperiment, compare

DEFAULT_METRICS = ("recall@100", "recall@500", "recall@10000", "ndcg@10")


def archived_runs(folder: Path, variant: str) -> list[tuple[int, dict[str, Any]]]:
    """(seed, kept record) of every run of `variant` in the archive, in seed order."""
    try:
        return ArchivedExperiment.load(folder).variant_runs(variant)
    except (KeyError, FileNotFoundError):
        raise SystemExit(
            f"{folder}: no run of {variant!r} (expected {folder}/<seed>/{variant}.json.gz)"
        ) from None


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
    try:
        archive = ArchivedExperiment.load(args.archive)
    except ValueError as error:  # runs made over different data
        raise SystemExit(str(error)) from None
    for name, kept in runs.items():
        print(f"{name}: seeds {', '.join(str(seed) for seed, _ in kept)}")
    for metric in args.metrics.split(","):
        figures = compare(archive.pooled(args.first), archive.pooled(args.second), metric)
        seeds = {name: " / ".join(f"{m:.4f}" for m in archive.seed_means(name, metric)) for name in runs}
        print(
            f"{metric}: {args.first} {figures['first']:.4f} ({seeds[args.first]}), "
            f"{args.second} {figures['second']:.4f} ({seeds[args.second]}); "
            f"{figures['points']:+.1f} points, p {figures['p']:.2g} over {figures['queries']} queries "
            "(paired t-test, not Holm-adjusted)"
        )
    return 0


__all__ = ["archived_runs", "compare", "main"]


if __name__ == "__main__":
    sys.exit(main())
