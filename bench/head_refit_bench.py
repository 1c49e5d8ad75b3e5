"""What refitting the aspect heads on the averaged encoder does to held-out annotation accuracy.

    python -m bench.head_refit_bench --models runs/bench-zero-shot/full/seed-{13,14,15}/model

For each model trained without the refit (`ShippedRecipe(head_refit_epochs=0)`, or a model of
`bench.zero_shot_bench` from before the refit was part of the recipe): copy it, refit its heads
(`pipelines.train.head_refit`, the recipe's epochs, the model's seed), and score both on the held-out
products of the benchmark (`madr evaluate --products`'s annotation quality). The refit never touches
the encoder under the heads, so retrieval is unchanged by construction (tests/test_pretrain.py checks
it); this measures only the annotations. Saves bench/results/head_refit.json.
"""

from __future__ import annotations

import argparse
import shutil
import time
from pathlib import Path
from typing import Any

from bench.common import report
from pipelines.evaluate.annotation_quality import measure_annotation_quality
from pipelines.layout import DatasetLayout
from pipelines.train.head_refit import refit_aspect_heads
from pipelines.train.shipped_recipe import ShippedRecipe
from schemas.splits import HeldOutProducts


def _accuracy(model: str, data: DatasetLayout) -> dict[str, Any]:
    quality = measure_annotation_quality(model, data.products, data.queries, data.judgments)
    if quality is None:
        raise ValueError(f"{model} predicts no aspects")
    return {"accuracy": quality.products.accuracy, "confident_coverage": quality.products.confident_coverage}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--models", nargs="+", required=True, help="Model folders named .../seed-N/model")
    parser.add_argument("--data", default="runs/bench-zero-shot/full/data", help="The benchmark's dataset")
    parser.add_argument(
        "--output", default="runs/bench-head-refit", help="Work folder for the refitted copies"
    )
    args = parser.parse_args(argv)
    data = DatasetLayout(args.data)
    recipe = ShippedRecipe()
    rows: dict[str, Any] = {}
    for model in args.models:
        seed = int(Path(model).parent.name.removeprefix("seed-"))
        copy = Path(args.output) / f"seed-{seed}"
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(model, copy)
        began = time.perf_counter()
        refit = refit_aspect_heads(
            copy, data.root, HeldOutProducts(recipe.held_out_fraction), recipe.head_refit_epochs, seed
        )
        seconds = time.perf_counter() - began
        rows[str(seed)] = {
            "before": _accuracy(model, data),
            "after": _accuracy(str(copy), data),
            "refit_seconds": seconds,
            "refit": vars(refit) if refit else None,
        }
        print(
            f"seed {seed}: {rows[str(seed)]['before']['accuracy']} -> {rows[str(seed)]['after']['accuracy']}"
        )
    config = {"models": args.models, "data": args.data, "epochs": recipe.head_refit_epochs}
    report("head_refit", config, rows)
    return rows


if __name__ == "__main__":
    main()
