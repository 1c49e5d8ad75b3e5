"""The build's union recall of a 16-shard index, measured two ways on the same index in one run.

A partitioned build ends by measuring the recall of its shards searched as one (`madr build-index`
writes it into the top-level manifest). Before, the driver opened the whole index and read every
embedding (`index_builder.recall.measure_recall` over `open_index`): at 10M × 128 that killed the build
after every shard was written. Now `pipelines.index.union_recall.measure_union_recall` holds one shard at
a time. Each way, at each depth, runs in its own subprocess (its own peak RSS, VmHWM) on the same
untuned 16-shard index of `bench.sharded_eval_bench`'s synthetic 128-d vectors (written once under
runs/bench/union_recall/):

    python -m bench.union_recall_bench                   # 1,000,000 vectors
    python -m bench.union_recall_bench --size 50000      # a quick look

Figures: seconds, peak RSS, the recall each reports (they must be equal); bench/results/union_recall.json.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.common import report
from bench.support import command_line, shared_machine_note

ROOT = Path(__file__).resolve().parent.parent / "runs" / "bench" / "union_recall"
SHARDS, DEPTH = 16, 10_000
TAG = "madr-bench-union-recall"
WAYS = ("whole_index", "by_shard")


def _prepare(folder: Path, size: int) -> None:
    """The embeddings (`bench.sharded_eval_bench.write_data`) and an untuned 16-shard index of them."""
    from bench.sharded_eval_bench import write_data
    from jobs.cli import parse_command
    from pipelines.index.partitioned import build_partitioned

    if not (folder / "embeddings" / "manifest.json").is_file():
        write_data(folder, size, 200, 0)
    if not (folder / "index" / "manifest.json").is_file():
        flags = ["--embeddings", str(folder / "embeddings"), "--output", str(folder / "index")]
        flags += ["--num_index_shards", str(SHARDS), "--depth", str(DEPTH), "--target_recall", "0"]
        build_partitioned(*parse_command("build-index", flags))


def _measure(way: str, folder: Path, depth: int) -> dict[str, Any]:
    """One way's recall at `depth` (child process)."""
    started = time.perf_counter()
    if way == "whole_index":
        from index_builder import open_index
        from index_builder.recall import measure_recall
        from pipelines.io.parquet_reading import read_embeddings

        searcher = open_index(folder / "index")
        ids, matrix, _ = read_embeddings(str(folder / "embeddings"))
        row_of = {product_id: row for row, product_id in enumerate(ids)}
        found = measure_recall(searcher, matrix[[row_of[i] for i in searcher.ids]], depth)
    else:
        from pipelines.index.union_recall import measure_union_recall

        found = measure_union_recall(str(folder / "index"), str(folder / "embeddings"), depth)
    seconds = time.perf_counter() - started
    with open("/proc/self/status", encoding="ascii") as status:
        peak_kb = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
    return {
        "seconds": round(seconds, 1),
        "peak_rss_mb": round(peak_kb / 1024, 1),
        "recall_at_k": found.recall_at_k,
        "k": found.k,
        "queries": found.queries,
    }


def _child(way: str, folder: Path, depth: int) -> dict[str, Any]:
    command = [sys.executable, "-m", "bench.union_recall_bench", "--stage", way, "--root", str(folder)]
    command += ["--depths", str(depth)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    lines = [line for line in done.stdout.splitlines() if line.startswith(TAG)]
    if done.returncode or not lines:
        raise RuntimeError(f"{way} failed (rc {done.returncode}):\n{done.stderr[-3000:]}")
    return json.loads(lines[-1][len(TAG) + 1 :])


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--size", type=int, default=1_000_000, help="Vectors (%(default)s)")
    parser.add_argument("--root", type=Path, default=ROOT, help="Data and index folder (%(default)s)")
    parser.add_argument(
        "--depths", default="10000,100", help="Depths measured (%(default)s; the build's is 10000)"
    )
    parser.add_argument("--stage", choices=WAYS, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    depths = [int(depth) for depth in args.depths.split(",")]
    if args.stage:
        print(TAG, json.dumps(_measure(args.stage, args.root, depths[0])), flush=True)
        return {}
    folder = args.root / str(args.size)
    _prepare(folder, args.size)
    figures: dict[str, Any] = {"machine_load": shared_machine_note()}
    for depth in depths:
        row = {way: _child(way, folder, depth) for way in WAYS}
        whole, by_shard = row["whole_index"], row["by_shard"]
        row["equal_recall"] = whole["recall_at_k"] == by_shard["recall_at_k"]
        row["peak_ratio_whole_over_by_shard"] = round(whole["peak_rss_mb"] / by_shard["peak_rss_mb"], 2)
        figures[f"depth_{depth}"] = row
        print(f"depth {depth}: {json.dumps(row)}", flush=True)
    config = {
        "size": args.size,
        "shards": SHARDS,
        "build_depth": DEPTH,
        "command": command_line("bench.union_recall_bench", argv),
    }
    report(f"union_recall_{args.size}" if args.size != 1_000_000 else "union_recall", config, figures)
    return figures


if __name__ == "__main__":
    main()
