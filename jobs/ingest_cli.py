"""`madr ingest`: turn ESCI, WANDS or your own catalog files into a madr dataset folder.

The folder has the layout every other command reads (products/, queries.parquet,
judgments.parquet), a manifest with the counts and the relevance rule, and
dead_letters.jsonl with every rejected row and why.
"""

from __future__ import annotations

import argparse
import dataclasses
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
from product_data.ingest.common import DEFAULT_MAX_DEAD_LETTER_FRACTION, check_dead_letter_share
from product_data.ingest.export_folder import load_export_folder
from product_data.ingest.generic import MAPPING_KEYS
from product_data.ingest.mapping_file import SECTIONS, read_mapping_file


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
        help='JSON file with a section per file: {"products": {"fields": {"product_id": "sku", "title": '
        '"name", "category_path": "breadcrumbs"}, "aspects": {"brand": "manufacturer"}, "separators": '
        '{"category_path": " > "}}, "queries": {...}, "judgments": {...}}. Section keys: '
        + ", ".join(MAPPING_KEYS)
        + " (README, 'Your own catalog'). Without one, the columns carry madr's names",
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

    for source in (generic, folder):
        source.add_argument(
            "--encoding",
            default="utf-8",
            help="Character set of CSV and JSONL files, e.g. cp1252",
        )
        source.add_argument(
            "--keep_html",
            action="store_true",
            help="Keep HTML tags and entities in descriptions and bullets (default: read as plain text)",
        )
        source.add_argument(
            "--max_dead_letter_fraction",
            type=float,
            default=DEFAULT_MAX_DEAD_LETTER_FRACTION,
            help="Refuse to write the dataset when more than this share of a file's rows are dead-lettered "
            "(a wrong mapping or encoding) (default 0.5)",
        )
    for source in (esci, wands, generic, folder):
        add_output_argument(source, required=True, help="Dataset folder to write")
        source.add_argument("--overwrite", action="store_true", help="Replace an existing dataset folder")


def _mappings(args: argparse.Namespace) -> dict[str, ColumnMapping]:
    mappings = read_mapping_file(args.mapping) if args.mapping else dict.fromkeys(SECTIONS, ColumnMapping())
    if args.keep_html:
        return {kind: dataclasses.replace(mapping, strip_html=False) for kind, mapping in mappings.items()}
    return dict(mappings)


def run_ingest(args: argparse.Namespace) -> tuple[IngestResult, Path]:
    if args.source == "esci":
        config = EsciConfig(locale=args.locale, version=args.version, catalog=args.catalog)
        result = load_esci(args.products, args.examples, config)
    elif args.source == "wands":
        result = load_wands(args.queries, args.products, args.labels)
    elif args.source == "folder":
        result = load_export_folder(
            args.folder,
            args.positive_min_grade,
            encoding=args.encoding,
            keep_html=args.keep_html,
            max_dead_letter_fraction=args.max_dead_letter_fraction,
        )
    else:
        mappings = _mappings(args)
        files = {"products": args.products, "queries": args.queries, "judgments": args.judgments}
        if not any(files.values()):
            raise ValueError("give at least one of --products, --queries, --judgments")
        missing = [kind for kind, path in files.items() if path and kind not in mappings]
        if missing:
            raise ValueError(f"{args.mapping} has no section for {missing}; its sections: {sorted(mappings)}")
        grade = {"positive_min_grade": args.positive_min_grade}
        parts = [
            load_generic(
                path,
                mappings[kind],
                kind,  # type: ignore[arg-type]
                delimiter=args.delimiter,
                encoding=args.encoding,
                **(grade if kind == "judgments" else {}),
            )
            for kind, path in files.items()
            if path
        ]
        result = drop_dangling_judgments(combine_results(*parts, source="generic"))
        check_dead_letter_share(result, args.max_dead_letter_fraction)
    return result, write_dataset(result, args.out, overwrite=args.overwrite)
