"""How long `madr adapt` takes at its defaults on catalogs of several sizes (issue 65, the README's times).

For each size, `madr generate --num_products N` (at most N / 10 queries) writes a generator catalog, then
`madr adapt` trains on it exactly as the README's own-catalog section types it (no flags but `--data` and
`--output`: the default step budget, evaluation included where the catalog has judged queries). Each
command runs in its own process; its wall time and peak resident memory (from the kernel's accounting of
that child) are recorded with what the model's manifest says it trained on, and the adapted model's NDCG@10
and Recall@100 beside the backbone used zero-shot and BM25 + zero-shot over the same products, so a time
comes with what it bought.

    python -m bench.adapt_catalog_times --sizes 1000,10000,100000

Run it on a quiet machine: the times are the figure. A size already measured under `--output` is read back
(delete its folder to measure it again). Saves bench/results/adapt_catalog_times.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

from bench.common import report
from bench.embed_peer_bench import cpu_summary
from bench.precision_quality import madr
from bench.store_bench import per_query_rows, system_means


def _timed(command: list[str], log: Path) -> tuple[float, float]:
    """Run `command`; its wall seconds and its peak resident memory in MB (the child's own ru_maxrss)."""
    started = time.perf_counter()
    with log.open("w") as out:
        child = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(child.pid, 0)
    seconds = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status):
        raise RuntimeError(f"{' '.join(command)} failed; its output is in {log}")
    return seconds, usage.ru_maxrss / 1024


def measure(size: int, root: Path) -> dict[str, Any]:
    """Generate a `size`-product catalog, adapt on it at the defaults; the figures of both commands."""
    folder = root / str(size)
    done = folder / "figures.json"  # resumable: a size already measured is read back, not run again
    if done.is_file():
        print(f"{size:,} products: read back from {done}", flush=True)
        return json.loads(done.read_text())
    folder.mkdir(parents=True, exist_ok=True)
    data, model = folder / "data", folder / "model"
    # generate plants up to 10 products per query: a small catalog gets fewer queries than the default 600
    queries = min(600, size // 10)
    generate = madr(
        "generate", "--output", str(data), "--num_products", str(size), "--num_queries", str(queries)
    )
    generate_s, _ = _timed(generate, folder / "generate.log")
    adapt = madr("adapt", "--data", str(data), "--output", str(model), "--overwrite")
    adapt_s, adapt_rss = _timed(adapt, folder / "adapt.log")
    manifest = json.loads((model / "manifest.json").read_text())
    figures = {
        "queries": queries,
        "generate_wall_s": round(generate_s, 1),
        "adapt_wall_s": round(adapt_s, 1),
        "adapt_wall_minutes": round(adapt_s / 60, 1),
        "adapt_peak_rss_mb": round(adapt_rss, 1),
        "steps": manifest["steps"],
        "pseudo_queries": manifest["pseudo_queries"],
        "held_out_accuracy@1": manifest["held_out_accuracy"]["accuracy"],
    }
    evaluation = folder / "model-evaluation" / "adapted" / "eval"
    if evaluation.is_dir():
        rows = per_query_rows(evaluation)
        figures["retrieval"] = {s: system_means(rows, s) for s in ("model", "zero-shot", "bm25+zero-shot")}
    print(f"{size:,} products: {json.dumps(figures)}", flush=True)
    done.write_text(json.dumps(figures))
    return figures


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sizes = "1000,10000,100000"
    parser.add_argument("--sizes", default=sizes, help="Catalog sizes, comma-separated (%(default)s)")
    parser.add_argument("--output", default="runs/bench-adapt-times", help="Work folder (%(default)s)")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    figures = {f"{size}": measure(size, Path(args.output)) for size in sizes}
    config = {
        "commands": (
            "madr generate --output DATA --num_products N --num_queries min(600, N/10) && "
            "madr adapt --data DATA --output MODEL --overwrite"
        ),
        "sizes": sizes,
        "cores": os.cpu_count(),
        "cpu": cpu_summary(),  # adapt's training_precision auto trains in bf16 only where the CPU has it
    }
    report("adapt_catalog_times", config, figures)
    return figures


if __name__ == "__main__":
    main()
