"""`madr explain` and `madr neighbours`: their flags; the views are `pipelines.explain`'s."""

from __future__ import annotations

import argparse

from pipelines.options import VerifyOptions, add_stage_arguments


def add_explain_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", required=True, help="Trained model directory")
    parser.add_argument("--query", required=True, help="Query text, e.g. 'breville juicer'")
    product = parser.add_mutually_exclusive_group(required=True)
    product.add_argument("--product", help="Product title, or a product record as JSON in madr's field names")
    product.add_argument("--product_id", help="A product of the catalog --products, by its id")
    parser.add_argument("--products", help="Catalog Parquet file, folder or glob that holds --product_id")
    add_stage_arguments(parser, VerifyOptions)


def add_neighbours_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--model", required=True, help="Trained model directory of a variant with aspect heads"
    )
    parser.add_argument("--aspect", required=True, help="Aspect name, e.g. category")
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--value", help="Aspect value, e.g. Bedding")
    which.add_argument(
        "--list", action="store_true", help="List the aspect's values, most frequent first, with counts"
    )
    parser.add_argument("--top", type=int, default=5, help="How many neighbours to list (5)")
    add_stage_arguments(parser, VerifyOptions)
