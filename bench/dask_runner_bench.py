"""`madr embed` on `--runner dask` with 1 and 2 worker processes, against the local runner, in one run.

Each row is the whole command as a user types it (`madr embed ...` in a fresh process), on one catalog
from the demo's generator: products/s including start-up (the cluster's included), and the ratio to the
local runner's. The marginal rate (full minus small slice) cancels start-up, as `embed_peer_bench` does.

    python -m bench.dask_runner_bench                  # 1,000 and 4,000 products, the demo's model
    python -m bench.dask_runner_bench --quick          # 200 and 800, a tiny random model
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow.parquet as pq

from bench.common import report, table
from bench.support import tiny_model

RUNNERS = {
    "local": [],
    "dask, 1 worker": ["--runner", "dask", "--dask_workers", "1"],
    "dask, 2 workers": ["--runner", "dask", "--dask_workers", "2"],
}


def _embed_seconds(products: str, model: str, output: Path, flags: list[str]) -> float:
    argv = [sys.executable, "-m", "jobs.cli", "--log_level", "WARNING", "embed", "--products", products]
    argv += ["--model", model, "--output", str(output), *flags]
    started = time.perf_counter()
    subprocess.run(argv, check=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="200 and 800 products, a tiny random model")
    parser.add_argument("--model", default="runs/demo/model", help="Model folder (default: the demo's)")
    args = parser.parse_args()
    small, full = (200, 800) if args.quick else (1_000, 4_000)
    with tempfile.TemporaryDirectory(prefix="madr-dask-bench-") as work:
        root = Path(work)
        model = str(tiny_model(root / "model", 16, "dask-bench")) if args.quick else args.model
        generate = ["generate", "--num_products", str(full), "--num_queries", "10", "--seed", "13"]
        cli = [sys.executable, "-m", "jobs.cli", "--log_level", "WARNING"]
        subprocess.run([*cli, *generate, "--output", str(root / "data")], check=True)
        catalog = pq.read_table(str(root / "data" / "products"))
        slices = {}
        for size in (small, full):
            slices[size] = str(root / f"products-{size}.parquet")
            pq.write_table(catalog.slice(0, size), slices[size])
        rows, figures = [], {}
        for name, flags in RUNNERS.items():
            seconds = {size: _embed_seconds(path, model, root / f"{name}-{size}".replace(" ", ""), flags)
                       for size, path in slices.items()}  # fmt: skip
            whole = full / seconds[full]
            marginal = (full - small) / max(seconds[full] - seconds[small], 1e-9)
            figures[name] = {
                "seconds": seconds,
                "whole_products_per_s": whole,
                "marginal_products_per_s": marginal,
            }
        local = figures["local"]
        for name, figure in figures.items():
            figure["whole_ratio_to_local"] = figure["whole_products_per_s"] / local["whole_products_per_s"]
            figure["marginal_ratio_to_local"] = (
                figure["marginal_products_per_s"] / local["marginal_products_per_s"]
            )
            keys = (
                "whole_products_per_s",
                "whole_ratio_to_local",
                "marginal_products_per_s",
                "marginal_ratio_to_local",
            )
            rows.append([name, figure["seconds"][full], *(figure[key] for key in keys)])
    print(
        table(["runner", f"s ({full:,})", "products/s", "x local", "marginal /s", "marginal x local"], rows)
    )
    report(
        "dask_runner",
        {
            "products": [small, full],
            "model": "tiny random" if args.quick else args.model,
            "cores": os.cpu_count(),
        },
        figures,
    )


if __name__ == "__main__":
    main()
