"""Does the shipped model beat the backbone used zero-shot, on the benchmark and a store export, over seeds?

    python -m bench.zero_shot_bench            # 10,000 products, 1,000 queries (600 test), 3 seeds
    python -m bench.zero_shot_bench --quick    # 1,000 products, 100 queries, 1 seed, few steps

Per seed, through the production path (`madr embed` + exact search + `madr evaluate`, whose zero-shot
row embeds the same catalog with the untrained MiniLM, mean pooling, as sentence-transformers does):

1. the synthetic benchmark: the shipped recipe (pipelines/train/shipped_recipe.py) trained on its train
   queries, scored on its test queries against zero-shot (paired t-test), with held-out annotation Accuracy@1;
2. the hand-written store export (examples/store_export: brands, languages and a style the generator
   never made): the benchmark's model as it is, and `madr adapt` (no judgments used) from the
   zero-shot start, each against zero-shot on the store's judged queries.

Prints mean ± sd over seeds of every model's Recall@100 and NDCG@10 and its difference from zero-shot,
with each seed's p-value; saves bench/results/zero_shot[_quick].json.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import time
from pathlib import Path
from typing import Any

from bench.common import report
from jobs.adapt import evaluate_model
from pipelines.layout import DatasetLayout
from pipelines.train.adapt import AdaptJob, run_adapt
from pipelines.train.shipped_recipe import (
    ADAPT_TRAINING_DEFAULTS,
    ShippedRecipe,
    adapt_loop,
    train_shipped_model,
)
from product_data.ingest.export_folder import ingest_export_folder
from product_data.synthetic import SyntheticConfig, generate_benchmark

METRICS = ("recall@100", "ndcg@10")


def _figures(result: dict[str, Any]) -> dict[str, Any]:
    """A model's means, zero-shot's, the differences and p-values, and the annotation accuracy."""
    compared = result["zero_shot"]["metrics"]
    quality = (result.get("annotation_quality") or {}).get("products") or {}
    return {
        **{name: compared[name]["mean_b"] for name in METRICS},
        **{f"zero_shot_{name}": compared[name]["mean_a"] for name in METRICS},
        **{f"delta_{name}": compared[name]["delta"] for name in METRICS},
        **{f"p_{name}": compared[name]["pvalue"] for name in METRICS},
        "queries": compared[METRICS[0]]["queries"],
        "accuracy@1": quality.get("accuracy"),
    }


def _summary(rows: list[dict[str, Any]], key: str) -> str:
    values = [row[key] for row in rows if row.get(key) is not None]
    if not values:
        return "n/a"
    if len(values) == 1:
        return f"{values[0]:+.4f}" if key.startswith("delta") else f"{values[0]:.4f}"
    spec = "+.4f" if key.startswith("delta") else ".4f"
    return f"{statistics.mean(values):{spec}} ± {statistics.stdev(values):.4f}"


def add_benchmark_arguments(parser: argparse.ArgumentParser) -> None:
    """The benchmark's size flags (`benchmark_dataset`); its generator seed is fixed at 13."""
    parser.add_argument("--num_products", type=int, default=10_000)
    parser.add_argument("--num_queries", type=int, default=1_000, help="Over all splits (≤ products / 10)")
    parser.add_argument("--test_fraction", type=float, default=0.6, help="Share of queries in the test split")


def benchmark_dataset(root: Path, args: argparse.Namespace) -> DatasetLayout:
    """ROOT/data: the generator's benchmark at `add_benchmark_arguments`' sizes, generated once."""
    data = DatasetLayout(str(root / "data"))
    synthetic = SyntheticConfig(
        num_products=args.num_products,
        num_queries=args.num_queries,
        seed=13,
        valid_fraction=0.1,
        test_fraction=args.test_fraction,
    )
    if not (Path(data.root) / "manifest.json").is_file():
        generate_benchmark(synthetic, data.root)
    return data


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="Small sizes, one seed")
    add_benchmark_arguments(parser)
    parser.add_argument("--seeds", default="13,14,15", help="Training seeds (the benchmark's is fixed: 13)")
    parser.add_argument("--store", default="examples/store_export", help="Hand-written store export folder")
    parser.add_argument("--output", default="runs/bench-zero-shot", help="Work folder")
    args = parser.parse_args(argv)
    if args.quick:
        args.num_products, args.num_queries, args.seeds = 1_000, 100, "13"
    seeds = [int(seed) for seed in args.seeds.split(",") if seed.strip()]
    root = Path(args.output) / ("quick" if args.quick else "full")
    started = time.perf_counter()

    data = benchmark_dataset(root, args)
    store = DatasetLayout(str(root / "store"))
    if not (Path(store.root) / "manifest.json").is_file():
        ingest_export_folder(args.store, store.root, overwrite=True)

    rows: dict[str, list[dict[str, Any]]] = {
        "benchmark": [],
        "store, shipped model": [],
        "store, adapted": [],
    }
    timings: dict[str, float] = {}
    for seed in seeds:
        folder = root / f"seed-{seed}"
        shutil.rmtree(folder, ignore_errors=True)  # a rerun trains afresh
        recipe = ShippedRecipe(seed=seed, **({"pretrain_steps": 20} if args.quick else {}))
        began = time.perf_counter()
        train_shipped_model(data.root, folder, recipe)
        timings[f"train seed {seed}"] = time.perf_counter() - began
        model = str(folder / "model")
        rows["benchmark"].append(_figures(evaluate_model(model, data, folder / "benchmark", overwrite=True)))
        rows["store, shipped model"].append(
            _figures(evaluate_model(model, store, folder / "store-shipped", overwrite=True))
        )
        loop = adapt_loop(seed)
        adapt = AdaptJob(dataset=store.root, output=str(folder / "store-adapted"), overwrite=True)
        began = time.perf_counter()
        adapted = run_adapt(adapt, loop)
        timings[f"adapt seed {seed}"] = time.perf_counter() - began
        figures = _figures(evaluate_model(str(adapted.model_dir), store, folder / "store-adapted-eval", True))
        figures["accuracy@1"] = adapted.held_out_accuracy.accuracy if adapted.held_out_accuracy else None
        rows["store, adapted"].append(figures)

    print(f"\nZero-shot = the bundled MiniLM, mean pooling, untrained; {len(seeds)} seed(s): {seeds}")
    header = (
        f"{'catalog, model':<24} {'R@100':>17} {'ΔR@100 vs zero-shot':>20} {'NDCG@10':>17} {'ΔNDCG@10':>17}"
    )
    print(header)
    for name, found in rows.items():
        print(
            f"{name:<24} {_summary(found, 'recall@100'):>17} {_summary(found, 'delta_recall@100'):>20} "
            f"{_summary(found, 'ndcg@10'):>17} {_summary(found, 'delta_ndcg@10'):>17}"
        )
        print(
            f"{'':<24} zero-shot R@100 {found[0]['zero_shot_recall@100']:.4f}, NDCG@10 "
            f"{found[0]['zero_shot_ndcg@10']:.4f}; p per seed: R@100 "
            + ", ".join(f"{row['p_recall@100']:.2g}" for row in found)
            + "; NDCG@10 "
            + ", ".join(f"{row['p_ndcg@10']:.2g}" for row in found)
        )
    config = {
        "num_products": args.num_products,
        "num_queries": args.num_queries,
        "test_fraction": args.test_fraction,
        "seeds": seeds,
        "store": args.store,
        "recipe": ShippedRecipe().__dict__,
        "adapt_training": ADAPT_TRAINING_DEFAULTS,
    }
    figures = {"rows": rows, "timings_seconds": timings, "total_seconds": time.perf_counter() - started}
    report("zero_shot_quick" if args.quick else "zero_shot", config, figures)
    return figures


if __name__ == "__main__":
    main()
