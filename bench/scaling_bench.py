"""Scaling: generate, then embed → build-index → evaluate at growing catalog sizes; time and peak RSS.

Each stage runs in a subprocess of its own (``python -m bench.scaling_bench --stage NAME ...``) calling
the real stage function (`pipelines.embed.stage.embed_catalog`,
`pipelines.index.partitioned.build_partitioned`, `pipelines.evaluate.stage.evaluate_retrieval`, each with
its command line parsed as `madr` parses it), so its peak RSS is its own: the parent reads it from the child's
own VmHWM, which the child prints last (rusage would count the parent's RSS at fork, see
`_HIGH_WATER_TAG`). The encoder is a tiny random BiBERT (2 layers, hidden 32, the real
MiniLM wordpiece vocabulary, projection 128) at every size, and the catalog is the synthetic
generator's at every size, 1M included, so the figures are about the pipeline, not the transformer
or the data; the number of queries is fixed, so evaluate grows with the corpus only.

The embed stage runs with one torch thread (--torch_threads): on the 2 shared cores of the
reference machine, two intra-op threads made the tiny model 5-10x slower (each op is too short to
split, and a thread waiting for a busy core stalls it).

    python -m bench.scaling_bench --sizes 10000,100000
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import report
from bench.support import TINY_BACKBONE, command_line, shared_machine_note, tiny_model
from jobs.cli import parse_command
from pipelines.embed.stage import embed_catalog
from pipelines.evaluate.stage import evaluate_retrieval


def _stage(stage: str, arguments: list[str]) -> None:
    """Child process: run one real stage with the given flags."""
    if stage == "embed":
        print(json.dumps(embed_catalog(*parse_command("embed", arguments))))
    elif stage == "index":
        from pipelines.index.config import IndexBuildConfig
        from pipelines.index.partitioned import build_partitioned

        embeddings, out = arguments
        print(build_partitioned(IndexBuildConfig(embeddings=embeddings, output=out)).config)
    elif stage == "evaluate":
        print(evaluate_retrieval(*parse_command("evaluate", arguments))["table"])
    else:
        raise ValueError(f"unknown stage {stage!r}")


PLOT = Path(__file__).resolve().parent.parent / "docs" / "performance_scaling.png"

# The child prints its own peak RSS under this tag. The rusage figure os.wait4 returns is not enough on
# Linux: exec() folds the forked parent's RSS into the child's ru_maxrss, so a child started from a big
# process (bench.run_all after the index benchmarks) reports at least the parent's size. VmHWM belongs to
# the memory map exec() creates and starts from zero.
_HIGH_WATER_TAG = "madr-bench-peak-rss-kb"


def _own_high_water_kb() -> int:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return -1  # not Linux: the parent falls back to rusage


def _reported_high_water_kb(log: Path) -> int:
    for line in reversed(log.read_text().splitlines()):
        if line.startswith(_HIGH_WATER_TAG):
            return int(line.split()[1])
    return -1


def run_stage(stage: str, arguments: list[str], log: Path) -> dict[str, float]:
    """Wall seconds and the child's own peak RSS (MB) of one stage run in a fresh interpreter."""
    command = [sys.executable, "-m", "bench.scaling_bench", "--stage", stage, "--", *arguments]
    started = time.perf_counter()
    with log.open("w") as handle:
        child = subprocess.Popen(command, stdout=handle, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(child.pid, 0)
    seconds = time.perf_counter() - started
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        raise RuntimeError(
            f"stage {stage} failed ({child.returncode}); see {log}:\n{log.read_text()[-3000:]}"
        )
    peak_kb = _reported_high_water_kb(log)
    if peak_kb < 0:
        peak_kb = usage.ru_maxrss
    return {"seconds": round(seconds, 2), "peak_rss_mb": round(peak_kb / 1024, 1)}


def one_size(
    products: int, queries: int, root: Path, model_dir: str, extra: list[str], embed_extra: list[str]
) -> dict[str, Any]:
    from product_data.synthetic import SyntheticConfig, generate_benchmark

    data, runs = root / f"data-{products}", root / f"run-{products}"
    runs.mkdir(parents=True)
    started = time.perf_counter()
    generate_benchmark(SyntheticConfig(num_products=products, num_queries=queries), str(data))
    row: dict[str, Any] = {"generate_s": round(time.perf_counter() - started, 2)}
    print(f"  {products}: generated in {row['generate_s']} s", flush=True)
    row["embed"] = run_stage(
        "embed",
        [
            "--products",
            str(data / "products" / "*.parquet"),
            "--model",
            model_dir,
            "--output",
            str(runs / "embeddings"),
            *extra,
            *embed_extra,
        ],
        runs / "embed.log",
    )
    print(f"  {products}: embed {row['embed']}", flush=True)
    row["index"] = run_stage("index", [str(runs / "embeddings"), str(runs / "index")], runs / "index.log")
    # What the build measured against exact search on held-out vectors, at the depth it serves.
    measured = json.loads((runs / "index" / "manifest.json").read_text()).get("recall") or {}
    row["index"]["recall"] = {key: measured.get(key) for key in ("k", "queries", "recall_at_k", "exact")}
    print(f"  {products}: index {row['index']}", flush=True)
    row["evaluate"] = run_stage(
        "evaluate",
        [
            "--queries",
            str(data / "queries.parquet"),
            "--judgments",
            str(data / "judgments.parquet"),
            "--model",
            model_dir,
            "--index",
            str(runs / "index"),
            "--output",
            str(runs / "eval"),
            *extra,
        ],
        runs / "evaluate.log",
    )
    print(f"  {products}: evaluate {row['evaluate']}", flush=True)
    row["products_per_s_embed"] = round(products / row["embed"]["seconds"], 1)
    return row


def plot(per_size: dict[str, dict[str, Any]], path: Path) -> None:
    """Seconds and peak RSS of each stage against the catalog size, log-log."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = sorted(int(size) for size in per_size)
    figure, (times, memory) = plt.subplots(1, 2, figsize=(10, 4))
    for stage in ("embed", "index", "evaluate"):
        rows = [per_size[str(size)][stage] for size in sizes]
        times.plot(sizes, [row["seconds"] for row in rows], marker="o", label=stage)
        memory.plot(sizes, [row["peak_rss_mb"] for row in rows], marker="o", label=stage)
    times.plot(
        sizes,
        [per_size[str(sizes[0])]["embed"]["seconds"] * size / sizes[0] for size in sizes],
        linestyle=":",
        color="grey",
        label="linear from the smallest embed",
    )
    for axis, label in ((times, "seconds"), (memory, "peak RSS, MB")):
        axis.set_xscale("log")
        axis.set_yscale("log")
        axis.set_xlabel("products")
        axis.set_ylabel(label)
        axis.grid(True, which="both", alpha=0.3)
        axis.legend()
    figure.suptitle("madr stages against catalog size (bench.scaling_bench)")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def growth(rows: dict[int, dict[str, Any]]) -> dict[str, Any]:
    """How each stage's time and peak RSS grow from the smallest size to each larger one."""
    sizes = sorted(rows)
    first = rows[sizes[0]]
    out: dict[str, Any] = {}
    for size in sizes[1:]:
        row = rows[size]
        out[f"{sizes[0]}->{size} ({size // sizes[0]}x products)"] = {
            stage: {
                "time_x": round(row[stage]["seconds"] / first[stage]["seconds"], 2),
                "peak_rss_x": round(row[stage]["peak_rss_mb"] / first[stage]["peak_rss_mb"], 2),
            }
            for stage in ("embed", "index", "evaluate")
        }
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="10000,100000,1000000", help="Catalog sizes (%(default)s)")
    parser.add_argument(
        "--queries", type=int, default=200, help="Queries per catalog, all splits (%(default)s)"
    )
    parser.add_argument("--keep", default=None, help="Keep the work folders here (default: a temp dir)")
    parser.add_argument(
        "--torch_threads",
        type=int,
        default=1,
        help="torch intra-op threads of the embed stage (%(default)s; 0: torch's default, one per core)",
    )
    parser.add_argument("--quick", action="store_true", help="Sizes 1,000 and 5,000, 100 queries")
    parser.add_argument("--stage", help=argparse.SUPPRESS)
    args, rest = parser.parse_known_args(argv)
    if args.stage:
        _stage(args.stage, [a for a in rest if a != "--"])
        print(f"{_HIGH_WATER_TAG} {_own_high_water_kb()}", flush=True)
        return {}
    if args.quick:
        args.sizes, args.queries = "1000,5000", 100
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    extra = ["--batch_size", "256", "--chunk_size", "32"]
    embed_extra = ["--torch_threads", str(args.torch_threads)]
    config = {
        "command": command_line("bench.scaling_bench", argv),
        **vars(args),
        "model": "tiny random BiBERT: " + json.dumps(TINY_BACKBONE) + ", projection 128",
        "runner": "FnApiRunner in_memory (madr's local default)",
        "data": "product_data.synthetic.generate_benchmark at every size (the 1M catalog too; shards of "
        "50k products, row groups of 8,192)",
        "stage_flags": extra,
        "embed_flags": embed_extra,
        "index": "build_partitioned (one shard, max_k 10,000)",
        "evaluate": "searcher ann, depth 10,000 (capped at the corpus), test split",
        "plot": None if args.quick else str(PLOT.relative_to(PLOT.parent.parent)),
        **shared_machine_note(),
    }
    del config["stage"]
    print(f"scaling_bench: {config}", flush=True)
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(args.keep) if args.keep else Path(scratch)
        root.mkdir(parents=True, exist_ok=True)
        model_dir = str(tiny_model(root / "model", 128, "bench"))
        rows = {size: one_size(size, args.queries, root, model_dir, extra, embed_extra) for size in sizes}
    figures = {
        "per_size": {str(size): row for size, row in rows.items()},
        "growth": growth(rows),
        "load_average_1min_at_end": shared_machine_note()["load_average_1min_at_start"],
    }
    report("scaling_quick" if args.quick else "scaling", config, figures)
    if not args.quick:
        plot(figures["per_size"], PLOT)
    return figures


if __name__ == "__main__":
    main()
