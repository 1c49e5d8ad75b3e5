"""The nightly's index stage alone, over an embed output: a night that trains and times a tree, then a
night handed that night's index (`--previous_index`), which may ship exact scoring again untimed.

Both builds are `pipelines.index.partitioned.build_partitioned` with one shard, in this process as the
nightly runs it, each preceded by a reset of the peak-RSS counter so that each reports its own peak.

    python -m bench.index_stage_bench --embeddings runs/nightly-scale/root-500000/night-2/embeddings
"""

from __future__ import annotations

import argparse
import json
import resource
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import report, table
from bench.support import command_line
from pipelines.index.config import IndexBuildConfig
from pipelines.index.partitioned import build_partitioned
from pipelines.settings.options import IndexSettings
from pipelines.stage_runs import peak_rss_mb, reset_peak_rss


def timed_build(embeddings: str, output: Path, max_k: int, previous: Path | None) -> dict[str, Any]:
    """One index stage: wall and CPU seconds, its own peak RSS, and what it shipped and why."""
    reset_peak_rss()
    started, before = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF)
    config = IndexBuildConfig(
        embeddings=embeddings,
        output=str(output),
        index=IndexSettings(depth=max_k),
        previous_index=str(previous) if previous else None,
    )
    built = build_partitioned(config)
    after = resource.getrusage(resource.RUSAGE_SELF)
    recall = json.loads((output / "shard-00000-of-00001" / "manifest.json").read_text())["recall"]
    return {
        "seconds": round(time.perf_counter() - started, 1),
        "cpu_seconds": round(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, 1),
        "peak_rss_mb": peak_rss_mb(),
        "vectors": built.count,
        "dimension": built.dimension,
        "choice": recall.get("choice"),
        "reason": recall.get("reason"),
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--embeddings", required=True, help="An embed output folder (`madr embed`)")
    parser.add_argument("--max_k", type=int, default=10_000, help="The index's depth (%(default)s)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        first = timed_build(args.embeddings, Path(scratch) / "night-a", args.max_k, None)
        print(f"without a previous index: {first}", flush=True)
        second = timed_build(
            args.embeddings, Path(scratch) / "night-b", args.max_k, Path(scratch) / "night-a"
        )
        print(f"with the previous index: {second}", flush=True)
    figures = {"without_previous": first, "with_previous": second}
    report("index_stage", {"command": command_line("bench.index_stage_bench", argv), **vars(args)}, figures)
    return figures


def index_stage_section(r: dict[str, Any]) -> str:
    """This benchmark's section of docs/PERFORMANCE.md (`bench.performance_doc` renders it)."""
    f = r["figures"]
    rows = [
        [name, v["seconds"], v["cpu_seconds"], v["peak_rss_mb"], v["choice"], v["reason"]]
        for name, v in (
            ("no previous index", f["without_previous"]),
            ("last night's index", f["with_previous"]),
        )
    ]
    first = f["without_previous"]
    return table(["build", "wall s", "CPU-s", "peak RSS MB", "shipped", "why"], rows) + (
        f"\n\n{first['vectors']:,} vectors of {first['dimension']} dimensions, "
        f"max_k {r['config']['max_k']:,}; "
        "`build_partitioned` with one shard, as the nightly's index stage runs it."
    )


if __name__ == "__main__":
    main()
