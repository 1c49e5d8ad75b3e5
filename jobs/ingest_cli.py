"""`madr ingest`: turn ESCI, WANDS, a Shopify or WooCommerce export, or your own catalog files into a
madr dataset folder.

The folder has the layout every other command reads (products/, queries.parquet,
judgments.parquet), a manifest with the counts and the relevance rule, and
dead_letters.jsonl with every rejected row and why.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from pipelines.settings.stage_config import output_setting, overwrite_setting, setting, subcommands
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
from product_data.ingest.platform_export import BRAND_NAMES, COLOR_NAMES, PER_CHOICES, PlatformReading
from product_data.ingest.shopify import load_shopify
from product_data.ingest.woocommerce import load_woocommerce


@dataclass(frozen=True)
class EsciSource:
    """Amazon Shopping Queries (ESCI) Parquet files."""

    products: str = setting("", "shopping_queries_dataset_products.parquet", required=True)
    examples: str = setting("", "shopping_queries_dataset_examples.parquet", required=True)
    locale: str = setting("us", "us, es or jp (default: us)")
    version: str = setting("small", "Task version (small)", choices=("small", "large"))
    catalog: str = setting("all", "Keep all products of the locale or judged only", choices=("all", "judged"))


@dataclass(frozen=True)
class WandsSource:
    """Wayfair WANDS tab-separated files."""

    queries: str = setting("", "query.csv", required=True)
    products: str | None = setting(None, "product.csv")
    labels: str | None = setting(None, "label.csv")


@dataclass(frozen=True)
class FileReading:
    """How the text files of a generic source or a store export are read."""

    encoding: str = setting("utf-8", "Character set of CSV and JSONL files, e.g. cp1252")
    delimiter: str | None = setting(
        None, "CSV delimiter (default: a tab for .tsv, else a comma), e.g. ';' for a Dutch or German Excel"
    )
    keep_html: bool = setting(
        False, "Keep HTML tags and entities in descriptions and bullets (default: read as plain text)"
    )
    max_dead_letter_fraction: float = setting(
        DEFAULT_MAX_DEAD_LETTER_FRACTION,
        "Refuse to write the dataset when more than this share of a file's rows are dead-lettered "
        "(a wrong mapping or encoding) (default 0.5)",
    )


@dataclass(frozen=True)
class GenericSource(FileReading):
    """Your own JSONL, CSV/TSV or Parquet files."""

    products: str | None = setting(None, "Product file")
    queries: str | None = setting(None, "Query file")
    judgments: str | None = setting(None, "Judgment file")
    mapping: str | None = setting(
        None,
        'JSON file with a section per file: {"products": {"fields": {"product_id": "sku", "title": '
        '"name", "category_path": "breadcrumbs"}, "aspects": {"brand": "manufacturer"}, "separators": '
        '{"category_path": " > "}}, "queries": {...}, "judgments": {...}}. Section keys: '
        + ", ".join(MAPPING_KEYS)
        + " (README, 'Your own catalog'). Without one, the columns carry madr's names",
    )
    positive_min_grade: int | None = setting(None, "Grade from which a judgment counts")

    def __post_init__(self) -> None:
        if not (self.products or self.queries or self.judgments):
            raise ValueError("give at least one of --products, --queries, --judgments")


@dataclass(frozen=True)
class FolderSource(FileReading):
    """A store export folder: products.jsonl|csv|parquet (+ queries, judgments) and one mapping.json
    with a section per file (examples/store_export)."""

    folder: str = setting("", "The export folder", positional=True)
    positive_min_grade: int = setting(2, "Grade from which a judgment counts")


@dataclass(frozen=True)
class PlatformSource(FileReading):
    """A Shopify or WooCommerce product CSV export, as the platform writes it: variants grouped under
    their product, brand and colour read from whichever option or attribute slot holds them."""

    export: str = setting("", "The platform's product export (CSV)", positional=True)
    per: str = setting(
        "product",
        "One record per product (default) or per sellable variant ('variant': a Shopify variant row, a "
        "WooCommerce variation, each with its product's text)",
        choices=PER_CHOICES,
    )
    brand_attribute: str | None = setting(
        None,
        "Option or attribute name(s) that hold the brand, comma-separated, e.g. Merk (besides the common "
        "names in several languages: " + ", ".join(BRAND_NAMES[:6]) + ", ...)",
    )
    color_attribute: str | None = setting(
        None,
        "Option or attribute name(s) that hold the colour, e.g. Kleur (besides "
        + ", ".join(COLOR_NAMES[:6])
        + ", ...)",
    )
    locale: str | None = setting(None, "The catalog's language and country, e.g. nl_NL (exports carry none)")

    # The platform's reader of its export (`product_data.ingest.shopify`, `.woocommerce`): each subclass's.
    loader: ClassVar[Callable[..., IngestResult]]

    def load(self) -> IngestResult:
        """The export read as its platform writes it."""
        delimiter = self.delimiter or ","
        return type(self).loader(self.export, self.reading(), encoding=self.encoding, delimiter=delimiter)

    def reading(self) -> PlatformReading:
        return PlatformReading(
            per=self.per,  # type: ignore[arg-type]
            brand_attribute=self.brand_attribute,
            color_attribute=self.color_attribute,
            locale=self.locale,
            keep_html=self.keep_html,
        )


@dataclass(frozen=True)
class ShopifySource(PlatformSource):
    """A Shopify product export (Products > Export): one row per variant under a shared Handle; drafts,
    archived and unpublished products left out and counted."""

    loader = staticmethod(load_shopify)


@dataclass(frozen=True)
class WoocommerceSource(PlatformSource):
    """A WooCommerce product export (Products > Export): simple and variable products, variations under
    their Parent; drafts, private and grouped products left out and counted."""

    loader = staticmethod(load_woocommerce)


Source = EsciSource | WandsSource | GenericSource | FolderSource | ShopifySource | WoocommerceSource
SOURCES: dict[str, type[Source]] = {
    "esci": EsciSource,
    "wands": WandsSource,
    "generic": GenericSource,
    "folder": FolderSource,
    "shopify": ShopifySource,
    "woocommerce": WoocommerceSource,
}


@dataclass(frozen=True)
class IngestConfig:
    """`madr ingest SOURCE ...`: the source's files and settings, and the dataset folder written."""

    source: Source = subcommands(SOURCES, metavar="SOURCE")
    output: str = output_setting("Dataset folder to write")
    overwrite: bool = overwrite_setting()


def _mappings(args: GenericSource) -> dict[str, ColumnMapping]:
    mappings = read_mapping_file(args.mapping) if args.mapping else dict.fromkeys(SECTIONS, ColumnMapping())
    if args.keep_html:
        return {kind: dataclasses.replace(mapping, strip_html=False) for kind, mapping in mappings.items()}
    return dict(mappings)


def run_ingest(config: IngestConfig) -> tuple[IngestResult, Path]:
    args = config.source
    if isinstance(args, EsciSource):
        esci = EsciConfig(locale=args.locale, version=args.version, catalog=args.catalog)
        result = load_esci(args.products, args.examples, esci)
    elif isinstance(args, WandsSource):
        result = load_wands(args.queries, args.products, args.labels)
    elif isinstance(args, PlatformSource):
        result = args.load()
        check_dead_letter_share(result, args.max_dead_letter_fraction)
    elif isinstance(args, FolderSource):
        result = load_export_folder(
            args.folder,
            args.positive_min_grade,
            encoding=args.encoding,
            delimiter=args.delimiter,
            keep_html=args.keep_html,
            max_dead_letter_fraction=args.max_dead_letter_fraction,
        )
    else:
        mappings = _mappings(args)
        files = {"products": args.products, "queries": args.queries, "judgments": args.judgments}
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
    return result, write_dataset(result, config.output, overwrite=config.overwrite)
