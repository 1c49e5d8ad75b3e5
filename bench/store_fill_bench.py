"""Category gaps on a foreign taxonomy: does `madr adapt` learn the store's leaves well enough to fill them?

    python -m bench.store_fill_bench                       # examples/second_store, seed 7, 30 % hidden

A seeded share of the products of a store export loses its category (the "Product Category" column
blanked in the CSV) before `madr ingest folder`, as a shop's gaps are; `madr adapt` then learns the
store's categories from the rest (no judgments used); `madr embed` annotates every product with the
adapted model and `madr enrich` fills each gap at several min_confidence levels. Each fill is counted
as the leaf (the hidden value), an ancestor of it (coarser: right, but not what the store asked for,
never counted as a leaf), or wrong. Leaf precision = leaf fills / fills; leaf coverage = leaf fills /
gaps. Saves bench/results/store_fill.json.
"""

from __future__ import annotations

import argparse
import csv
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from bench.common import report
from jobs.cli import parse_command
from pipelines.embed.enrich import EnrichConfig, enrich_catalog
from pipelines.embed.stage import embed_catalog
from pipelines.layout import DatasetLayout
from pipelines.settings.options import PredictionThreshold
from pipelines.train.adapt import AdaptJob, run_adapt
from pipelines.train.shipped_recipe import adapt_loop
from product_data.ingest.export_folder import ingest_export_folder

LEVELS = (0.0, 0.5, 0.7, 0.8, 0.9)
SCRIPT = Path("examples/second_store/make_export.py")


def hide_categories(
    export: Path, target: Path, share: float, seed: int, id_column: str, category_column: str
) -> dict[str, list[str]]:
    """Copy the export to `target` with `share` of the products' categories blanked; the hidden paths."""
    shutil.copytree(export, target, dirs_exist_ok=True)
    source = export / "products.csv"
    with source.open(newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        fields, rows = list(reader.fieldnames or []), list(reader)
    rng = np.random.default_rng(seed)
    hidden: dict[str, list[str]] = {}
    for row in rows:
        if row[category_column] and rng.random() < share:
            hidden[row[id_column]] = [part.strip() for part in row[category_column].split(">")]
            row[category_column] = ""
    with (target / "products.csv").open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)
    return hidden


def count_fills(enriched: pa.Table, hidden: dict[str, list[str]]) -> dict[str, Any]:
    """Category fills of the hidden products: at the leaf, at an ancestor, or wrong."""
    filled: dict[str, str] = {}
    for row in enriched.select(["product_id", "aspects"]).to_pylist():
        for aspect in row["aspects"] or []:
            if aspect["aspect"] == "category" and aspect["provenance"] == "predicted":
                filled[row["product_id"]] = aspect["values"][0].casefold()
    leaf = ancestor = wrong = 0
    for product_id, path in hidden.items():
        value = filled.get(product_id)
        if value is None:
            continue
        if value == path[-1].casefold():
            leaf += 1
        elif value in {part.casefold() for part in path[:-1]}:
            ancestor += 1
        else:
            wrong += 1
    fills = leaf + ancestor + wrong
    return {
        "gaps": len(hidden),
        "filled": fills,
        "leaf": leaf,
        "ancestor": ancestor,
        "wrong": wrong,
        "leaf_precision": round(leaf / fills, 4) if fills else None,
        "leaf_coverage": round(leaf / len(hidden), 4) if hidden else None,
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--store_seed", type=int, default=7, help="Seed of examples/second_store's script")
    parser.add_argument("--hide", type=float, default=0.3, help="Share of the products' categories blanked")
    parser.add_argument("--seed", type=int, default=13, help="Seed of the hiding and of adapt's training")
    parser.add_argument("--min_steps", type=int, default=None, help="Adapt's --min_steps (default: its own)")
    parser.add_argument("--tag", default="", help="Suffix of the result file")
    parser.add_argument("--output", default="runs/bench-store-fill", help="Work folder")
    args = parser.parse_args(argv)
    root = Path(args.output)
    started = time.perf_counter()
    export = root / f"export-{args.store_seed}"
    if not (export / "products.csv").is_file():
        subprocess.run(
            [sys.executable, str(SCRIPT), "--output", str(export), "--seed", str(args.store_seed)], check=True
        )
    fields = json.loads((export / "mapping.json").read_text())["products"]["fields"]
    hidden = hide_categories(
        export, root / "hidden-export", args.hide, args.seed, fields["product_id"], fields["category_path"]
    )
    data = DatasetLayout(str(root / "data"))
    ingest_export_folder(root / "hidden-export", data.root, overwrite=True)
    changes = {} if args.min_steps is None else {"min_steps": args.min_steps}
    job = AdaptJob(dataset=data.root, output=str(root / "model"), overwrite=True, **changes)
    adapted = run_adapt(job, adapt_loop(args.seed))
    embeddings = root / "embeddings"
    shutil.rmtree(embeddings, ignore_errors=True)
    argv_embed = ["--products", data.products, "--model", str(adapted.model_dir), "--output", str(embeddings)]
    embed_catalog(*parse_command("embed", argv_embed))
    levels: dict[str, Any] = {}
    for level in LEVELS:
        output = root / f"enriched-{level}"
        shutil.rmtree(output, ignore_errors=True)
        enrich_catalog(
            EnrichConfig(
                products=data.products,
                embeddings=str(embeddings),
                output=str(output),
                threshold=PredictionThreshold(min_confidence=level),
            )
        )
        enriched = pa.concat_tables(pq.read_table(f) for f in sorted(output.glob("enriched-*.parquet")))
        levels[f"{level:.1f}"] = count_fills(enriched, hidden)
    print(f"\n{len(hidden)} category gaps of {args.hide:.0%} hidden; adapted in {adapted.steps} steps")
    print(
        f"{'min_confidence':<15}{'filled':>8}{'leaf':>7}{'ancestor':>10}{'wrong':>7}"
        f"{'leaf precision':>16}{'leaf coverage':>15}"
    )
    for level, row in levels.items():
        print(
            f"{level:<15}{row['filled']:>8}{row['leaf']:>7}{row['ancestor']:>10}{row['wrong']:>7}"
            f"{row['leaf_precision'] if row['leaf_precision'] is not None else 'n/a':>16}"
            f"{row['leaf_coverage'] if row['leaf_coverage'] is not None else 'n/a':>15}"
        )
    config = {
        "store_seed": args.store_seed,
        "hide": args.hide,
        "seed": args.seed,
        "min_steps": args.min_steps,
    }
    figures = {"levels": levels, "steps": adapted.steps, "total_seconds": time.perf_counter() - started}
    report(f"store_fill{'_' + args.tag if args.tag else ''}", config, figures)
    return figures


if __name__ == "__main__":
    main()
