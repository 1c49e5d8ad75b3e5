"""`make bench` / `make bench-quick`: run every benchmark, then write docs/PERFORMANCE.md from the results.

Quick mode runs each benchmark at small sizes (about 2 minutes in all on an idle 2-core machine) and
saves its results as ``bench/results/<name>_quick.json``, so it never overwrites a full run's figures.
A benchmark that fails is reported and the others still run; the exit status says whether any failed.
"""

from __future__ import annotations

import argparse
import sys
import time
import traceback
from collections.abc import Callable

from bench import (
    bucketing_bench,
    embed_peer_bench,
    embed_throughput,
    eval_join_bench,
    exact_search_bench,
    index_bench,
    performance_doc,
    recall10k_bench,
    scaling_bench,
)


def plan(quick: bool) -> list[tuple[str, Callable[[list[str]], object], list[str]]]:
    """(name, main, argv) of every benchmark; full mode uses each script's own full-size defaults."""
    flag = ["--quick"] if quick else []
    return [
        ("embed_peer", embed_peer_bench.main, flag),
        ("embed_throughput", embed_throughput.main, flag or ["--products", "3000"]),
        ("bucketing", bucketing_bench.main, flag),
        ("index", index_bench.main, flag),
        ("recall10k", recall10k_bench.main, flag),
        ("exact_search", exact_search_bench.main, flag),
        ("scaling", scaling_bench.main, flag),
        ("eval_join", eval_join_bench.main, flag),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="Small sizes, about 2 minutes in all")
    parser.add_argument("--only", default="", help="Comma-separated benchmark names (all by default)")
    args = parser.parse_args(argv)
    wanted = {name.strip() for name in args.only.split(",") if name.strip()}
    failed, timings = [], {}
    for name, run, bench_argv in plan(args.quick):
        if wanted and name not in wanted:
            continue
        print(f"==== {name} {' '.join(bench_argv)}", flush=True)
        started = time.perf_counter()
        try:
            run(bench_argv)
        except Exception:
            traceback.print_exc()
            failed.append(name)
        timings[name] = round(time.perf_counter() - started, 1)
    path = performance_doc.main([])
    print(f"seconds per benchmark: {timings}; wrote {path}")
    if failed:
        print(f"FAILED: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
