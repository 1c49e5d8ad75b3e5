"""`madr generate` and `madr ingest`: a dataset folder, from the generator or from a source's files."""

from __future__ import annotations

import argparse
import json

from jobs.command_table import command
from jobs.ingest_cli import add_ingest_arguments, run_ingest
from pipelines.stage_config import add_output_argument
from product_data.synthetic import SyntheticConfig, generate_benchmark


def _generate_arguments(parser: argparse.ArgumentParser) -> None:
    add_output_argument(parser, required=True, help="Dataset folder to write")
    parser.add_argument("--num_products", type=int, default=SyntheticConfig.num_products, help="Catalog size")
    parser.add_argument(
        "--num_queries", type=int, default=SyntheticConfig.num_queries, help="Queries, all splits"
    )
    parser.add_argument("--seed", type=int, default=SyntheticConfig.seed, help="Random seed")


@command("generate", _generate_arguments, show_defaults=True)
def _generate(args: argparse.Namespace, beam_args: list[str], stage_argv: list[str]) -> None:
    """Write a seeded synthetic e-commerce retrieval benchmark as Parquet."""
    config = SyntheticConfig(num_products=args.num_products, num_queries=args.num_queries, seed=args.seed)
    print(generate_benchmark(config, args.out, progress=print).format())


@command("ingest", add_ingest_arguments)
def _ingest(args: argparse.Namespace, beam_args: list[str], stage_argv: list[str]) -> None:
    """Map a source's files onto madr's schemas; bad rows go to dead_letters.jsonl."""
    result, manifest = run_ingest(args)
    counts = {stream: counts.to_json() for stream, counts in result.counts.items()}
    print(json.dumps(counts, indent=2))
    print(f"dataset written; manifest {manifest}")
