"""What BM25 in every shard costs the index build: a 16-shard build of the same vectors with and without
the catalog (`--products`), each in its own subprocess (wall seconds, peak RSS from VmHWM); then the
next night's pair, each over its own first build (`--previous_index`), with `--change` of the titles
edited, where the build with BM25 analyzes only the edited products and keeps the others' term counts.

The vectors are `bench.sharded_eval_bench`'s (run it first for the size); the catalog is the synthetic
generator's at the same size, its ids renamed to the vectors' ("SP00000001" -> "p00000001"), written
once under runs/bench/lexical_build/<size>/ and reused. Both builds are untuned (`--target_recall 0`),
as the 10M build of `bench.sharded_eval_bench` is, so the difference is BM25's: analysing the catalog,
combining its statistics, grouping each shard's words with its vectors and scoring each shard's BM25.

    python -m bench.lexical_build_bench --size 1000000              # --change 0.05: the 5 % night
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

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


def _edited(products: Path, change: float) -> Path:
    """The catalog a night later: `change` of the titles edited (every k-th product's, k = 1 / change)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    target = products.parent / f"products-edited-{change:g}"
    if target.is_dir() and any(target.glob("*.parquet")):
        return target
    target.mkdir(parents=True, exist_ok=True)
    step, seen = round(1 / change), 0
    for path in sorted(products.glob("*.parquet")):
        table = pq.read_table(path)
        edit = pa.array((np.arange(table.num_rows) + seen) % step == 0)
        seen += table.num_rows
        titles = pc.if_else(
            edit, pc.binary_join_element_wise(table["title"], "renewed edition", " "), table["title"]
        )
        pq.write_table(
            table.set_column(table.schema.get_field_index("title"), "title", titles), target / path.name
        )
    return target


def _build(embeddings: str, output: str, products: str, previous: str, shards: int) -> None:
    """Child: one untuned build of `shards` shards; prints its summary and its own peak RSS."""
    import shutil

    from pipelines.index.config import IndexBuildConfig
    from pipelines.index.partitioned import build_partitioned
    from pipelines.settings.options import IndexSettings

    shutil.rmtree(output, ignore_errors=True)
    settings = IndexSettings(num_index_shards=shards, depth=10_000, target_recall=0.0)
    started = time.perf_counter()
    built = build_partitioned(
        IndexBuildConfig(
            embeddings=embeddings,
            output=output,
            index=settings,
            products=products or None,
            previous_index=previous or None,
        )
    )
    seconds = time.perf_counter() - started
    status = Path("/proc/self/status").read_text().splitlines()
    hwm_kb = int(next(line for line in status if line.startswith("VmHWM")).split()[1])
    result = {"seconds": round(seconds, 1), "count": built.count, "peak_rss_mb": round(hwm_kb / 1024, 1)}
    print(f"{TAG} {json.dumps(result)}", flush=True)


def _child(
    embeddings: str, output: str, products: str, log: Path, previous: str, shards: int
) -> dict[str, Any]:
    command = [sys.executable, "-m", "bench.lexical_build_bench", "--child", embeddings, output, products]
    command += [previous, str(shards)]
    with log.open("w") as handle:
        subprocess.run(command, stdout=handle, stderr=subprocess.STDOUT, check=True)
    line = next(line for line in reversed(log.read_text().splitlines()) if line.startswith(TAG))
    return json.loads(line.split(None, 1)[1])


def main(argv: list[str] | None = None) -> dict[str, Any]:
    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=formatter)
    parser.add_argument("--size", type=int, default=1_000_000, help="Vectors, as sharded_eval_bench wrote")
    parser.add_argument("--change", type=float, default=0.05, help="Titles edited on the second night")
    parser.add_argument("--shards", type=int, default=16, help="Index shards (1: built in this process)")
    parser.add_argument("--child", nargs=5, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        _build(*args.child[:4], int(args.child[4]))
        return {}
    embeddings = ROOT / "sharded_eval" / str(args.size) / "embeddings"
    if not (embeddings / "manifest.json").is_file():
        raise SystemExit(f"{embeddings} is missing: python -m bench.sharded_eval_bench --sizes {args.size}")
    folder = ROOT / "lexical_build" / str(args.size)
    folder.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    products = _catalog(folder, args.size)
    catalog_seconds = round(time.perf_counter() - started, 1)
    edited = _edited(products, args.change)
    builds = {}
    nights = (
        ("without BM25", "", ""),
        ("with BM25", str(products), ""),
        ("next night without BM25", "", "without BM25"),
        ("next night with BM25", str(edited), "with BM25"),
    )
    for name, catalog, previous in nights:
        log = folder / f"build-{args.shards}-{name.replace(' ', '-')}.log"
        output = folder / f"index-{args.shards}-{name.replace(' ', '-')}"
        before = str(folder / f"index-{args.shards}-{previous.replace(' ', '-')}") if previous else ""
        builds[name] = _child(str(embeddings), str(output), catalog, log, before, args.shards)
        print(f"  {name}: {builds[name]}", flush=True)

    def difference(night: str, figure: str) -> float:
        return round(builds[f"{night}with BM25"][figure] - builds[f"{night}without BM25"][figure], 1)

    figures = {
        "builds": builds,
        "bm25_seconds": difference("", "seconds"),
        "bm25_peak_rss_mb": difference("", "peak_rss_mb"),
        "next_night_bm25_seconds": difference("next night ", "seconds"),
        "next_night_bm25_peak_rss_mb": difference("next night ", "peak_rss_mb"),
        "catalog_seconds": catalog_seconds,
    }
    config = {
        "command": command_line("bench.lexical_build_bench", argv),
        "size": args.size,
        "shards": args.shards,
        "depth": 10_000,
        "change": args.change,
        **shared_machine_note(),
    }
    report("lexical_build" if args.shards == 16 else f"lexical_build_{args.shards}_shard", config, figures)
    return figures


if __name__ == "__main__":
    main()
