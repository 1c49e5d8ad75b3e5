"""`madr demo`: the whole job, end to end, on the embedded default data.

generate -> train BiBERT from the bundled MiniLM -> embed (Beam) -> build the ScaNN
index -> evaluate (Beam) with the index and with exact search, into one run folder.
"""

from __future__ import annotations

import argparse
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from apache_beam.options.pipeline_options import PipelineOptions

from model.training import TrainingConfig
from pipelines.build_index import build_index
from pipelines.embed import run_embed
from pipelines.evaluate import run_evaluate
from pipelines.layout import DatasetLayout, RunLayout
from pipelines.synthetic import SyntheticConfig, generate_benchmark
from pipelines.train import TrainJob, run_training

T = TypeVar("T")


def _searcher_name(result: dict[str, Any]) -> str:
    """Which searcher produced the printed metrics: `--searcher auto` records its choice."""
    choice = (result.get("searcher_choice") or {}).get("choice")
    names = {"ann": "ScaNN index, chosen by measurement", "exact": "exact search, chosen by measurement"}
    return names.get(choice, "ScaNN index")


def add_demo_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--out", default="runs/demo", help="Run folder (data/, model/, embeddings/, index/, eval/)"
    )
    parser.add_argument("--num_products", type=int, default=10_000, help="Synthetic catalog size")
    parser.add_argument("--num_queries", type=int, default=600, help="Synthetic queries over all splits")
    parser.add_argument("--epochs", type=int, default=1, help="Fine-tuning epochs over the training queries")
    parser.add_argument("--batch_size", type=int, default=16, help="Training queries per step")
    parser.add_argument(
        "--max_document_length",
        type=int,
        default=64,
        help="Product truncation in wordpieces; 64 keeps the demo within minutes on 2 cores (papers: 128)",
    )
    parser.add_argument("--seed", type=int, default=13, help="Seed for data and training")
    parser.add_argument("--depth", type=int, default=10_000, help="Products retrieved per test query")


def _timed(name: str, timings: dict[str, float], step: Callable[[], T]) -> T:
    print(f"\n== {name}", flush=True)
    started = time.perf_counter()
    value = step()
    timings[name] = time.perf_counter() - started
    print(f"   {name}: {timings[name]:.1f}s", flush=True)
    return value


def run_demo(args: argparse.Namespace) -> dict[str, Any]:
    run = RunLayout(args.out)
    data = DatasetLayout(str(Path(args.out) / "data"))
    for stale in ("data", "model", "embeddings", "index", "eval"):
        shutil.rmtree(Path(args.out) / stale, ignore_errors=True)
    timings: dict[str, float] = {}
    started = time.perf_counter()

    synthetic = SyntheticConfig(num_products=args.num_products, num_queries=args.num_queries, seed=args.seed)
    summary = _timed("generate", timings, lambda: generate_benchmark(synthetic, data.root))
    print(summary.format())

    job = TrainJob(
        dataset=data.root, output=run.model, variant="bibert", max_document_length=args.max_document_length
    )
    loop = TrainingConfig(epochs=args.epochs, batch_size=args.batch_size, seed=args.seed, learning_rate=5e-5)
    report = _timed("train", timings, lambda: run_training(job, loop))
    print(
        f"   {report.steps} steps, final train loss {report.final_train_loss:.4f}, "
        f"best validation MRR@10 {report.best_valid_metric}"
    )

    embed_flags = ["--products", data.products, "--model", run.model, "--output", run.embeddings]
    counts = _timed("embed", timings, lambda: run_embed(PipelineOptions(embed_flags)))
    print("   " + "  ".join(f"{name}={value}" for name, value in counts.items()))

    built = _timed("build-index", timings, lambda: build_index(run.embeddings, run.index, args.depth))
    print(f"   {built.count} x {built.dimension} vectors; {built.config}")

    flags = [
        "--queries",
        data.queries,
        "--judgments",
        data.judgments,
        "--model",
        run.model,
        "--depth",
        str(args.depth),
        # auto: time the index and exact search on a sample at this depth and keep the faster one
        # whose recall is within 1 % of exact; both are still run and reported.
        "--searcher",
        "auto",
        "--index",
        run.index,
        "--embeddings",
        run.embeddings,
        "--output",
        run.evaluation,
    ]
    # With both the index and the embeddings, the stage also reports the recall the index loses.
    result = _timed("evaluate", timings, lambda: run_evaluate(PipelineOptions(flags)))
    total = time.perf_counter() - started

    print(
        f"\n== Results on {result['counts']['queries_scored']} test queries "
        f"({_searcher_name(result)}, depth {args.depth} capped at {built.count} products)\n"
    )
    print(result["table"])
    print("\nTimings: " + ", ".join(f"{name} {seconds:.0f}s" for name, seconds in timings.items()))
    print(f"Total wall time: {total:.0f}s. Outputs in {args.out}/ (metrics: {run.evaluation}/metrics.json)")
    return {"evaluation": result, "timings": timings, "total_seconds": total}
