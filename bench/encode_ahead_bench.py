"""`madr embed --encode_ahead true` against `false` (RunInference's path), side by side in one run.

With the model in a thread of its own a batch ahead (`pipelines.embed.ahead`), Beam's thread reads,
plans, builds rows and writes while the model tokenizes and runs. The gain is made for a GPU, idle while
the CPU does that work; on a CPU both threads share the cores with the model's own threads. This
bench measures it where it runs: the negligible model of `bench.embed_stage_cost` (one layer, hidden 32,
the MiniLM tokenizer: the stage's own work is then most of the time) and, with `--model`, a real one.
Each contender runs in its own process, alternating, `--repeats` times on a small and a full slice:
steady µs a product of wall time = (full_s - small_s) / (full - small), the worst and best of the runs.

    python -m bench.encode_ahead_bench                           # 40,000 products, negligible model
    python -m bench.encode_ahead_bench --model runs/demo/model   # the demo's MiniLM MtBERT
    python -m bench.encode_ahead_bench --device cuda --products 200000   # on a lent GPU
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from bench.common import report
from bench.embed_stage_cost import catalog_model, embed_command, negligible_backbone
from bench.precision_quality import timed
from bench.support import command_line, shared_machine_note
from product_data.synthetic import SyntheticConfig, generate_benchmark

CONTENDERS = ("false", "true")


def main(argv: list[str] | None = None) -> dict[str, Any]:
    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=formatter)
    parser.add_argument(
        "--products", type=int, default=40_000, help="Products of the full slice (%(default)s)"
    )
    parser.add_argument("--small", type=int, default=5_000, help="Products of the small slice (%(default)s)")
    parser.add_argument(
        "--repeats", type=int, default=2, help="Runs of each contender per slice (%(default)s)"
    )
    parser.add_argument("--threads", type=int, default=2, help="Threads of every process (%(default)s)")
    parser.add_argument("--model", type=Path, help="A trained model (default: the negligible one)")
    parser.add_argument("--device", help="--device of madr embed (default: madr's own choice)")
    args = parser.parse_args(argv)
    rows: dict[str, Any] = {ahead: {"small_s": [], "full_s": []} for ahead in CONTENDERS}
    with tempfile.TemporaryDirectory() as scratch_name:
        scratch = Path(scratch_name)
        os.environ["MADR_CACHE"] = str(scratch / "cache")
        generate_benchmark(SyntheticConfig(num_products=args.products, num_queries=20), str(scratch / "data"))
        catalog = pq.read_table(str(scratch / "data" / "products"))
        for name, size in (("small", args.small), ("full", args.products)):
            pq.write_table(catalog.slice(0, size), str(scratch / f"{name}.parquet"))
        model = args.model or catalog_model(
            scratch / "model", scratch / "full.parquet", negligible_backbone()
        )

        def command(name: str, ahead: str) -> list[str]:
            flags = ["--encode_ahead", ahead, *(["--device", args.device] if args.device else [])]
            return [*embed_command(scratch / f"{name}.parquet", model, scratch / f"out-{ahead}", 1), *flags]

        timed(command("small", "false"), args.threads)  # warm: the ONNX graph into the cache
        for _ in range(args.repeats):
            for name in ("small", "full"):
                for ahead in CONTENDERS:
                    rows[ahead][f"{name}_s"].append(round(timed(command(name, ahead), args.threads), 2))
    figures: dict[str, Any] = {"machine_load": shared_machine_note()}
    for ahead, times in rows.items():
        pairs = list(zip(times["small_s"], times["full_s"], strict=True))
        steady = [1e6 * (full - small) / (args.products - args.small) for small, full in pairs]
        figures[f"encode_ahead_{ahead}"] = {
            **times,
            "steady_us_per_product": [round(us, 1) for us in steady],
            "worst_us": round(max(steady), 1),
            "best_us": round(min(steady), 1),
        }
    off, on = figures["encode_ahead_false"], figures["encode_ahead_true"]
    # > 1: ahead is faster; the worst of ahead's runs against the best of the plain path's, and the reverse.
    figures["speedup_worst_case"] = round(off["best_us"] / on["worst_us"], 3)
    figures["speedup_best_case"] = round(off["worst_us"] / on["best_us"], 3)
    config = {
        "products": args.products,
        "small": args.small,
        "repeats": args.repeats,
        "threads": args.threads,
        "model": str(args.model) if args.model else "negligible (1 layer, hidden 32, MiniLM tokenizer)",
        "device": args.device,
        "command": command_line("bench.encode_ahead_bench", argv),
    }
    report(
        "encode_ahead" if args.model is None and args.device is None else "encode_ahead_model",
        config,
        figures,
    )
    return figures


if __name__ == "__main__":
    main()
