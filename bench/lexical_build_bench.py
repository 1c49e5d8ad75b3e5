"""What BM25 in every shard costs the index build: a 16-shard build of the same vectors with and without
the catalog (`--products`), each in its own subprocess (wall seconds, peak RSS from VmHWM).

The vectors are `bench.sharded_eval_bench`'s (run it first for the size); the catalog is the synthetic
generator's at the same size, its ids renamed to the vectors' ("SP00000001" -> "p00000001"), written
once under runs/bench/lexical_build/<size>/ and reused. Both builds are untuned (`--target_recall 0`),
as the 10M build of `bench.sharded_eval_bench` is, so the difference is BM25's: analysing the catalog,
combining its statistics, grouping each shard's words with its vectors and scoring each shard's BM25.

    python -m bench.lexical_build_bench --size 1000000
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

ROOT = Path(__file__).resolve().parent.parent / "runs" / "bench"
TAG = "madr-bench-lexical-build"


def _catalog(folder: Path, size: int) -> Path:
    """The generator's catalog of `size` products with the vectors' ids, written once."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from product_data.synthetic import SyntheticConfig, generate_benchmark

    target = folder / "products"
    if target.is_dir() and any(target.glob("*.parquet")):
        return target
    generated = folder / "generated"
    generate_benchmark(SyntheticConfig(num_products=size, num_queries=300), str(generated))
    target.mkdir(parents=True, exist_ok=True)
    for path in sorted((generated / "products").glob("products-*.parquet")):
        table = pq.read_table(path)
        ids = pc.replace_substring_regex(table.column("product_id"), "^SP", "p")
        pq.write_table(table.set_column(table.schema.get_field_index("product_id"), "product_id", ids),
                       target / path.name)  # fmt: skip
    return target


def _build(embeddings: str, output: str, products: str) -> None:
    """Child: one untuned 16-shard build; prints its summary and its own peak RSS."""
    import shutil

    from pipelines.index.config import IndexBuildConfig
    from pipelines.index.partitioned import build_partitioned
    from pipelines.options import IndexSettings

    shutil.rmtree(output, ignore_errors=True)
    settings = IndexSettings(num_index_shards=16, depth=10_000, target_recall=0.0)
    started = time.perf_counter()
    built = build_partitioned(
        IndexBuildConfig(embeddings=embeddings, output=output, index=settings, products=products or None)
    )
    seconds = time.perf_counter() - started
    status = Path("/proc/self/status").read_text().splitlines()
    hwm_kb = int(next(line for line in status if line.startswith("VmHWM")).split()[1])
    result = {"seconds": round(seconds, 1), "count": built.count, "peak_rss_mb": round(hwm_kb / 1024, 1)}
    print(f"{TAG} {json.dumps(result)}", flush=True)


def _child(embeddings: str, output: str, products: str, log: Path) -> dict[str, Any]:
    command = [sys.executable, "-m", "bench.lexical_build_bench", "--child", embeddings, output, products]
    with log.open("w") as handle:
        subprocess.run(command, stdout=handle, stderr=subprocess.STDOUT, check=True)
    line = next(line for line in reversed(log.read_text().splitlines()) if line.startswith(TAG))
    return json.loads(line.split(None, 1)[1])


def main(argv: list[str] | None = None) -> dict[str, Any]:
    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=formatter)
    parser.add_argument("--size", type=int, default=1_000_000, help="Vectors, as sharded_eval_bench wrote")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        _build(*args.child)
        return {}
    embeddings = ROOT / "sharded_eval" / str(args.size) / "embeddings"
    if not (embeddings / "manifest.json").is_file():
        raise SystemExit(f"{embeddings} is missing: python -m bench.sharded_eval_bench --sizes {args.size}")
    folder = ROOT / "lexical_build" / str(args.size)
    folder.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    products = _catalog(folder, args.size)
    catalog_seconds = round(time.perf_counter() - started, 1)
    builds = {}
    for name, catalog in (("without BM25", ""), ("with BM25", str(products))):
        log = folder / f"build-{name.replace(' ', '-')}.log"
        builds[name] = _child(str(embeddings), str(folder / f"index-{name.replace(' ', '-')}"), catalog, log)
        print(f"  {name}: {builds[name]}", flush=True)
    figures = {
        "builds": builds,
        "bm25_seconds": round(builds["with BM25"]["seconds"] - builds["without BM25"]["seconds"], 1),
        "bm25_peak_rss_mb": round(
            builds["with BM25"]["peak_rss_mb"] - builds["without BM25"]["peak_rss_mb"], 1
        ),
        "catalog_seconds": catalog_seconds,
    }
    config = {"command": command_line("bench.lexical_build_bench", argv), "size": args.size, "shards": 16,
              "depth": 10_000, **shared_machine_note()}  # fmt: skip
    report("lexical_build", config, figures)
    return figures


if __name__ == "__main__":
    main()
