"""`madr explain`, `neighbours` and `search`: a model or an index, one query at a time."""

from __future__ import annotations

import argparse

from jobs import explain as explain_cli
from jobs.command_table import command
from jobs.search import add_search_arguments, run_search_command
from pipelines import explain as views


@command("explain", explain_cli.add_explain_arguments)
def _explain(args: argparse.Namespace, beam_args: list[str], stage_argv: list[str]) -> None:
    """Per aspect: predicted value, confidence, presence and fusion weight; then the score."""
    product = args.product or views.catalog_product(args.products, args.product_id)
    print(views.explain(args.model, args.query, product, verify=not args.no_verify).format())


@command("neighbours", explain_cli.add_neighbours_arguments)
def _neighbours(args: argparse.Namespace, beam_args: list[str], stage_argv: list[str]) -> None:
    """Print the aspect values nearest to one value in the model's learned value table U_a (or, with
    --list, every value the model predicts for the aspect)."""
    if args.list:
        for value, count in views.vocabulary_listing(args.model, args.aspect, verify=not args.no_verify):
            print(f"{count:>8}  {value}")
        return
    nearest = views.neighbours(args.model, args.aspect, args.value, args.top, verify=not args.no_verify)
    for value, similarity in nearest:
        print(f"({similarity:.3f}) {value}")


@command("search", add_search_arguments)
def _search(args: argparse.Namespace, beam_args: list[str], stage_argv: list[str]) -> None:
    """Encode a query as the pipeline does, search the index artifact at the settings its schedule tuned for
    --k, and print rank, score, product id, title and each aspect's catalog value or prediction (with its
    confidence), optionally keeping only products with given aspect values."""
    run_search_command(args)
