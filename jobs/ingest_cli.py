"""`madr ingest`: turn ESCI, WANDS or your own catalog files into a madr dataset folder.

The folder has the layout every other command reads (products/, queries.parquet,
judgments.parquet), a manifest with the counts and the relevance rule, and
dead_letters.jsonl with every rejected row and why.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from pipelines.stage_config import add_output_argument
from product_data.ingest import (
    ColumnMapping,
    EsciConfig,
    IngestResult,
    combine_results,
    drop_dangling_judgments,
    load_esci,
    load_generic,
    load_wands,
    write_dataset,
)
from product_data.ingest.export_folder import load_export_folder


def add_ingest_arguments(parser: argparse.ArgumentParser) -> None:
    sources = parser.add_subparsers(dest="source", required=True, metavar="SOURCE")
    esci = sources.add_parser("esci", help="Amazon Shopping Queries (ESCI) Parquet files")
    esci.add_argument("--products", required=True, help="shopping_queries_dataset_products.parquet")
    esci.add_argument("--examples", required=True, help="shopping_queries_dataset_examples.parquet")
    esci.add_argument("--locale", default="us", help="us, es or jp (default: us)")
    esci.add_argument("--version", choices=("small", "large"), default="small", help="Task version (small)")
    esci.add_argument(
        "--catalog",
        choices=("all", "judged"),
        default="all",
        help="Keep all products of the locale or judged only",
    )

    wands = sources.add_parser("wands", help="Wayfair WANDS tab-separated files")
    wands.add_argument("--queries", required=True, help="query.csv")
    wands.add_argument("--products", default=None, help="product.csv")
    wands.add_argument("--labels", default=None, help="label.csv")

    generic = sources.add_parser("generic", help="Your own JSONL, CSV/TSV or Parquet files")
    generic.add_argument("--products", default=None, help="Product file")
    generic.add_argument("--queries", default=None, help="Query file")
    generic.add_argument("--judgments", default=None, help="Judgment file")
    generic.add_argument(
        "--mapping",
        default=None,
        help='JSON file: {"fields": {"product_id": "sku", "title": "name"}, "aspects": {"brand": '
        '"manufacturer"}, "separators": {"category_path": " > "}, "label_grades": {"Exact": 2}}',
    )
    generic.add_argument("--delimiter", default=None, help="CSV delimiter, e.g. a tab for TSV")
    generic.add_argument(
        "--positive_min_grade", type=int, default=None, help="Grade from which a judgment counts"
    )

    folder = sources.add_parser(
        "folder",
        help="A store export folder: products.jsonl|csv|parquet (+ queries, judgments), each with its "
        "mapping_<kind>.json (examples/store_export)",
    )
    folder.add_argument("folder", help="The export folder")
    folder.add_argument(
        "--positive_min_grade", type=int, default=2, help="Grade from which a judgment counts"
    )

    for source in (esci, wands, generic, folder):
        add_output_argument(source, required=True, help="Dataset folder to write")
        source.add_argument("--overwrite", action="store_true", help="Replace an existing dataset folder")


def _mapping(path: str | None) -> ColumnMapping:
    if path is None:
        return ColumnMapping()
    data = json.loads(Path(path).read_text())
    unknown = set(data) - {"fields", "aspects", "separators", "label_grades"}
    if unknown:
        raise ValueError(f"{path}: unknown mapping keys {sorted(unknown)}")
    return ColumnMapping(**data)


def run_ingest(args: argparse.Namespace) -> tuple[IngestResult, Path]:
    if args.source == "esci":
        config = EsciConfig(locale=args.locale, version=args.version, catalog=args.catalog)
        result = load_esci(args.products, args.examples, config)
    elif args.source == "wands":
        result = load_wands(args.queries, args.products, args.labels)
    elif args.source == "folder":
        result = load_export_folder(args.folder, args.positive_min_grade)
    else:
        mapping = _mapping(args.mapping)
        parts = [
            load_generic(
                path, mapping, kind, delimiter=args.delimiter, positive_min_grade=args.positive_min_grade
            )
            for kind, path in (
                ("products", args.products),
                ("queries", args.queries),
                ("judgments", args.judgments),
            )
            if path
        ]
        if not parts:
            raise ValueError("give at least one of --products, --queries, --judgments")
        result = drop_dangling_judgments(combine_results(*parts, source="generic"))
    return result, write_dataset(result, args.out, overwrite=args.overwrite)
