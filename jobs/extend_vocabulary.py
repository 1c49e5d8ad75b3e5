"""`madr extend-vocabulary`: flags and command; `pipelines.train.extend_vocabulary` makes the copy."""

from __future__ import annotations

import argparse

from jobs.commands import command
from pipelines.stage_config import add_output_argument
from pipelines.train.extend_vocabulary import extend_vocabulary
from schemas.manifest import MANIFEST_FILE


def add_extend_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", required=True, help="Trained model directory with aspect heads")
    parser.add_argument(
        "--products", default=None, help="Catalog Parquet file, folder or glob: its aspects' values"
    )
    parser.add_argument(
        "--values", default=None, help='JSON file of values per aspect: {"brand": ["Fellow"]}'
    )
    parser.add_argument("--aspects", default=None, help="Comma-separated aspects to extend (default: all)")
    add_output_argument(parser, required=True, help="Model directory to write (a new one)")
    parser.add_argument("--overwrite", action="store_true", help="Replace an existing model directory")


@command("extend-vocabulary", "add your catalog's aspect values to a model", add_extend_arguments)
def _extend(args: argparse.Namespace, beam_args: list[str], stage_argv: list[str]) -> None:
    """Copy a trained model, giving its aspect heads a row for each value of your catalog (or of a JSON
    file) it does not know, made from its own states for the value's name: no training, seconds. Brand
    and colour values are then written only where a product's text names them (--stated_aspects)."""
    aspects = tuple(a.strip() for a in args.aspects.split(",") if a.strip()) if args.aspects else None
    summary = extend_vocabulary(args.model, args.out, args.products, args.values, aspects, args.overwrite)
    for aspect, sizes in summary.items():
        print(f"{aspect:<10} {sizes['before']:>6} values + {sizes['added']} new")
    print(f"model written: {args.out} ({MANIFEST_FILE} lists its files)")
