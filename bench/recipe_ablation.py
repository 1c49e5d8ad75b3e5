"""Why the trained models fell behind the backbone used zero-shot, and the recipe that does not: the ablation.

    python -m bench.recipe_ablation            # 10,000 products, 1,000 queries (600 test), seed 13
    python -m bench.recipe_ablation --quick    # 1,000 products, 100 queries, 20 pre-training steps
    python -m bench.recipe_ablation --rows pretrained,shipped   # only these rows (the others kept)

One benchmark (the generator's, seed 13), one training seed, every model through the production path
(`madr embed` + exact search + `madr evaluate`, whose zero-shot row embeds the same catalog with the
untrained MiniLM, mean pooling; `jobs.adapt.evaluate_model`). The rows (`ROWS`), each one setting of the
shipped recipe (pipelines/train/shipped_recipe.py) away from the next:

- old: the recipe before issue 22 as today's code expresses it: CLS pooling, a random 128-wide projection,
  MLM + aspect pre-training, fine-tuning, no weight averaging and no head refit (`OldRecipe`);
- pretrained: mean pooling + identity projection, aspect pre-training without MLM, no fine-tuning;
- fine-tuned: that pre-trained model fine-tuned (one epoch, 5e-5), not averaged;
- averaged: the same fine-tuning, then averaged half way back to the backbone (WiSE-FT, α 0.5);
- shipped: the same, then its aspect heads refitted on the averaged encoder (the shipped recipe);
- frozen: the shipped recipe with the word embeddings and the lowest 3 of 6 layers frozen.

pretrained, fine-tuned, averaged and shipped share one pre-training (`pretrain_shipped`); each of the
last three fine-tunes it again under its own recipe (`finetune_shipped`: same seed, same batches, so the
same fine-tuned weights before the averaging and the refit), rather than editing a copy of a model,
which its manifest's checksums would refuse.

Resumable: each finished row is saved at once (FOLDER/rows/<row>.json and .parquet), and a finished
pre-training or model folder is not trained again, so an interrupted run keeps its rows; `--fresh`
starts over. After every row, bench/results/recipe_ablation[_quick].json (figures, config, timings) and
recipe_ablation[_quick].parquet (per test query: query_id, system, recall@10, recall@100, ndcg@10 of
every finished row and of zero-shot) are written again from the finished rows: the paired t-tests of the
table (`bench.ablation_claims`) are recomputed from that file.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from bench.ablation_claims import METRICS, TESTED, ZERO_SHOT, recomputed, row_cells
from bench.common import RESULTS, report
from bench.store_claims import per_query_rows
from bench.zero_shot_bench import add_benchmark_arguments, benchmark_dataset
from jobs.adapt import evaluate_model
from pipelines.layout import ZERO_SHOT_FOLDER, DatasetLayout
from pipelines.train.shipped_recipe import (
    ShippedRecipe,
    finetune_shipped,
    pretrain_shipped,
    train_shipped_model,
)
from schemas.manifest import MANIFEST_FILE

# The papers' MtBERT as the recipe read it before issue 22: the CLS encoding, a new 128-wide projection.
OLD_VARIANT_OPTIONS: tuple[tuple[str, Any], ...] = (
    ("pooling", "cls"),
    ("projection_init", "random"),
    ("projection_dim", 128),
)


@dataclass(frozen=True)
class OldRecipe(ShippedRecipe):
    """The shipped recipe's loop on the old architecture; averaging needs an identity start, so α is 1."""

    def variant_options(self) -> tuple[tuple[str, Any], ...]:
        return OLD_VARIANT_OPTIONS


def recipes(seed: int, quick: bool) -> dict[str, ShippedRecipe]:
    """Each trained row's recipe (the pre-trained row is `shipped`'s pre-training alone)."""
    shipped = ShippedRecipe(seed=seed, **({"pretrain_steps": 20} if quick else {}))
    return {
        "old": OldRecipe(
            **{**dataclasses.asdict(shipped), "mlm_weight": 1.0, "wise_ft_alpha": 1.0, "head_refit_epochs": 0}
        ),
        "pretrained": shipped,
        "fine-tuned": dataclasses.replace(shipped, wise_ft_alpha=1.0, head_refit_epochs=0),
        "averaged": dataclasses.replace(shipped, head_refit_epochs=0),
        "shipped": shipped,
        "frozen": dataclasses.replace(shipped, frozen_layers=3),
    }


ROWS = tuple(recipes(13, False))  # the table's order
# The order they are run in: the shipped recipe's chain first, the two variations of it last.
RUN_ORDER = ("pretrained", "shipped", "averaged", "fine-tuned", "old", "frozen")
ZERO_SHOT_EMBEDDINGS = Path(ZERO_SHOT_FOLDER) / "embeddings"  # under an evaluation's folder
SHARED_PRETRAINING = ("pretrained", "fine-tuned", "averaged", "shipped")


def _finished(folder: Path) -> bool:
    return (folder / MANIFEST_FILE).is_file()


class Trainer:
    """Trains each row's model once, into WORK/<row>/ (the shared pre-training into WORK/pretrained)."""

    def __init__(self, data: str, work: Path, recipes: dict[str, ShippedRecipe]) -> None:
        self.data, self.work, self.recipes = data, work, recipes
        self.seconds: dict[str, dict[str, float]] = {}  # row -> stage -> seconds of this call

    def _timed(self, row: str, stage: str, step: Callable[[], Any]) -> Any:
        began = time.perf_counter()
        result = step()
        self.seconds.setdefault(row, {})[stage] = time.perf_counter() - began
        return result

    def pretrained(self) -> Path:
        folder = self.work / "pretrained"
        if not _finished(folder):
            shutil.rmtree(folder, ignore_errors=True)
            recipe = self.recipes["shipped"]
            self._timed("pretrained", "pretrain", lambda: pretrain_shipped(self.data, folder, recipe))
        return folder

    def model(self, row: str) -> Path:
        """The row's model directory, trained now unless a finished one is there."""
        if row == "pretrained":
            return self.pretrained()
        recipe = self.recipes[row]
        if row in SHARED_PRETRAINING:
            folder = self.work / row / "model"
            init = self.pretrained()
            if not _finished(folder):
                shutil.rmtree(folder, ignore_errors=True)
                self._timed(row, "fine-tune", lambda: finetune_shipped(self.data, folder, recipe, init))
            return folder
        folder = self.work / row
        if not _finished(folder / "model"):
            shutil.rmtree(folder, ignore_errors=True)
            train_shipped_model(self.data, folder, recipe, lambda stage, work: self._timed(row, stage, work))
        return folder / "model"


def _per_query(folder: Path, system: str) -> pa.Table:
    table = pq.read_table(folder / "per_query.parquet", columns=["query_id", *METRICS])
    return table.append_column("system", pa.array([system] * table.num_rows)).sort_by("query_id")


def _row_figures(result: dict[str, Any], seconds: dict[str, float]) -> dict[str, Any]:
    """What the production evaluation reported for one row: the comparison with zero-shot, accuracies."""
    compared = result["zero_shot"]["metrics"]
    quality = (result.get("annotation_quality") or {}).get("products") or {}
    return {
        # As `madr evaluate` reported them; the table's come from the per-query rows (`recomputed`).
        "reported": {m: {"delta": compared[m]["delta"], "p": compared[m]["pvalue"]} for m in TESTED},
        "queries": compared[TESTED[0]]["queries"],
        "accuracy@1": quality.get("accuracy"),
        "confident_coverage": quality.get("confident_coverage"),
        "seconds": seconds,
    }


def run_row(row: str, trainer: Trainer, data: DatasetLayout, rows: Path) -> None:
    """Train (or find) the row's model, evaluate it, and save its figures and per-query rows at once."""
    model = trainer.model(row)
    began = time.perf_counter()
    evaluations = trainer.work / "evaluations"  # beside the models: a model folder holds only its files
    folder = evaluations / row
    # The zero-shot model and catalog are the same for every row: embed them once, reuse those rows after.
    earlier = [
        evaluations / r / "eval" / ZERO_SHOT_EMBEDDINGS for r in ROWS if (rows / f"{r}.json").is_file()
    ]
    previous = str(earlier[0]) if earlier else None
    result = evaluate_model(str(model), data, folder, overwrite=True, zero_shot_previous=previous)
    evaluated = folder / "eval"
    seconds = dict(trainer.seconds.get(row, {}))
    seconds["evaluate"] = time.perf_counter() - began
    figures = _row_figures(result, seconds)
    zero_shot = _per_query(evaluated / "zero_shot" / "eval", ZERO_SHOT)
    previous = rows / f"{ZERO_SHOT}.parquet"
    if previous.is_file():  # the same untrained model on the same catalog: the same figures every row
        figures["zero_shot_as_before"] = pq.read_table(previous).equals(zero_shot)
    else:
        pq.write_table(zero_shot, previous)
    pq.write_table(_per_query(evaluated, row), rows / f"{row}.parquet")
    (rows / f"{row}.json").write_text(json.dumps(figures, indent=2) + "\n")


def _held_out_counts(evaluated: Path) -> dict[str, Any]:
    """The held-out products each aspect's Acc@1 is over: a calibrated model is scored on the half of the
    held-out products that did not calibrate it (its `held_out` says so), a pre-trained one on all of them."""
    path = evaluated / "annotation_quality.json"
    if not path.is_file():
        return {}
    quality = json.loads(path.read_text())
    return {"accuracy_counts": quality["products"]["counts"], "held_out": quality.get("held_out")}


def save_results(rows: Path, name: str, config: dict[str, Any], started: float) -> dict[str, Any]:
    """bench/results/<name>.json and .parquet, from every row finished so far."""
    done = [row for row in ROWS if (rows / f"{row}.json").is_file()]
    if not done:
        return {}
    table = pa.concat_tables(pq.read_table(rows / f"{s}.parquet") for s in (ZERO_SHOT, *done))
    RESULTS.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, RESULTS / f"{name}.parquet", compression="zstd")
    # Means, differences and p-values from the rows just written, as the claims check recomputes them.
    per_query = per_query_rows(RESULTS, name)
    figures: dict[str, Any] = {"rows": {ZERO_SHOT: recomputed(per_query, ZERO_SHOT)}}
    for row in done:
        figures["rows"][row] = {
            **json.loads((rows / f"{row}.json").read_text()),
            **_held_out_counts(rows.parent / "evaluations" / row / "eval"),
            **recomputed(per_query, row),
        }
    figures["not_run"] = [row for row in ROWS if row not in done]
    figures["total_seconds_this_call"] = time.perf_counter() - started
    report(name, config, figures)
    return figures


def _print(figures: dict[str, Any]) -> None:
    """The table as the document prints it (`bench.ablation_claims.row_cells`)."""
    print("\n" + " | ".join(("row", "R@10", "R@100", "ΔR@100 (p)", "NDCG@10", "ΔNDCG@10 (p)", "Acc@1")))
    for row, found in figures["rows"].items():
        print(" | ".join((row, *row_cells(found, row))))


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="Small sizes and few steps: a smoke test")
    add_benchmark_arguments(parser)
    parser.add_argument("--seed", type=int, default=13, help="Training seed (the benchmark's is fixed: 13)")
    parser.add_argument("--rows", default=",".join(RUN_ORDER), help=f"Rows to run, of {', '.join(ROWS)}")
    parser.add_argument("--fresh", action="store_true", help="Forget finished rows and models")
    parser.add_argument("--output", default="runs/ablation", help="Work folder")
    args = parser.parse_args(argv)
    if args.quick:
        args.num_products, args.num_queries = 1_000, 100
    root = Path(args.output) / ("quick" if args.quick else "full")
    if args.fresh:
        shutil.rmtree(root, ignore_errors=True)
    started = time.perf_counter()
    data = benchmark_dataset(root, args)
    trained = recipes(args.seed, args.quick)
    config = {
        **{k: v for k, v in vars(args).items() if k not in ("rows", "fresh", "output")},
        "recipes": {
            row: {**dataclasses.asdict(r), "variant_options": r.variant_options()}
            for row, r in trained.items()
        },
    }
    trainer = Trainer(data.root, root / f"seed-{args.seed}", trained)
    rows = trainer.work / "rows"
    rows.mkdir(parents=True, exist_ok=True)
    name = "recipe_ablation_quick" if args.quick else "recipe_ablation"
    figures: dict[str, Any] = {}
    for row in [r.strip() for r in args.rows.split(",") if r.strip()]:
        if row not in ROWS:
            parser.error(f"unknown row {row!r}: one of {', '.join(ROWS)}")
        if not (rows / f"{row}.json").is_file():
            run_row(row, trainer, data, rows)
            figures = save_results(rows, name, config, started)
            _print(figures)
    return figures or save_results(rows, name, config, started)


if __name__ == "__main__":
    main()
