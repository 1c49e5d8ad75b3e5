"""A Shopify product export (Admin → Products → Export, "CSV for Excel or other spreadsheet programs")
→ madr product records.

Shopify's layout (help.shopify.com, "Using CSV files to import and export products"): one row per variant,
the rows of a product sharing its ``Handle``; the first carries the product's ``Title``, ``Body (HTML)``,
``Vendor``, ``Product Category`` / ``Type``, ``Published``, ``Status`` and ``Option1 Name`` .. ``Option3
Name``, and every variant row its ``Option1 Value`` .. ``Option3 Value`` and ``Variant SKU``. A row with
only ``Image Src`` adds an image. ``Status`` draft or archived, or ``Published`` false, leaves the product
out (counted). The brand is the option named as one (`PlatformReading.brand_names`) or else ``Vendor``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from product_data.ingest.common import FirstWins, IngestResult, Record, Skip
from product_data.ingest.platform_export import (
    Option,
    PlatformReading,
    category_path,
    distinct,
    option_values,
    other_options,
    platform_result,
    product_record,
    value,
    variant_title,
)
from product_data.ingest.readers import RawRow, read_delimited

REQUIRED = ("Handle", "Title")
OPTION_SLOTS = (1, 2, 3)
VARIANT_COLUMNS = ("Variant SKU", "Variant Price", *(f"Option{n} Value" for n in OPTION_SLOTS))
LEFT_OUT = {"draft": "draft product", "archived": "archived product"}


class _Product:
    """The rows of one handle: the first one with a title leads; the ones with variant cells are its
    variants (the lead is also the first variant, as Shopify writes it)."""

    def __init__(self, rows: list[Mapping[str, Any]]) -> None:
        self.lead = next((row for row in rows if value(row.get("Title"))), rows[0])
        self.variants = [row for row in rows if row is self.lead or _is_variant(row)]
        self.option_names = [value(self.lead.get(f"Option{n} Name")) for n in OPTION_SLOTS]

    def left_out(self) -> str | None:
        status = (value(self.lead.get("Status")) or "active").lower()
        if status in LEFT_OUT:
            return LEFT_OUT[status]
        if (value(self.lead.get("Published")) or "true").lower() == "false":
            return "unpublished product"
        return None

    def options(self, row: Mapping[str, Any]) -> list[Option]:
        """The row's option values under the names the lead row gives the slots."""
        found = []
        for slot, name in zip(OPTION_SLOTS, self.option_names, strict=True):
            cell = value(row.get(f"Option{slot} Value"))
            if name and cell:
                found.append(Option(name, (cell,)))
        return found


def _is_variant(row: Mapping[str, Any]) -> bool:
    return any(value(row.get(column)) for column in VARIANT_COLUMNS)


def _record(product: _Product, rows: list[Mapping[str, Any]], reading: PlatformReading) -> Record:
    """The product (every variant row) or one variant (one row) as a record."""
    lead = product.lead
    options = [option for row in rows for option in product.options(row)]
    brand = next(iter(option_values(options, reading.brand_names())), None) or value(lead.get("Vendor"))
    path = category_path(value(lead.get("Product Category"))) or distinct([value(lead.get("Type"))])
    handle = value(lead.get("Handle"))
    if len(rows) == 1 and reading.per == "variant":
        product_id = value(rows[0].get("Variant SKU")) or f"{handle}-{product.variants.index(rows[0]) + 1}"
        title = variant_title(value(lead.get("Title")), [v for o in options for v in o.values])
    else:
        product_id, title = handle, value(lead.get("Title"))
    return product_record(
        product_id,
        title,
        description=reading.text(lead.get("Body (HTML)")),
        bullets=other_options(options, reading),
        brand=brand,
        colors=option_values(options, reading.color_names()),
        path=path,
        locale=reading.locale,
    )


def load_shopify(
    path: str | Path, reading: PlatformReading, *, encoding: str = "utf-8", delimiter: str = ","
) -> IngestResult:
    """Every row of a Shopify product export as a record (per product, or per variant with
    ``reading.per == "variant"``), a named skip, or a dead letter."""
    rows: list[RawRow] = list(read_delimited(path, delimiter=delimiter, required=REQUIRED, encoding=encoding))
    handles: dict[str, list[Mapping[str, Any]]] = {}
    for row in rows:
        if row.problem is None and value(row.fields.get("Handle")):
            handles.setdefault(value(row.fields.get("Handle")) or "", []).append(row.fields)
    products = {handle: _Product(group) for handle, group in handles.items()}
    unique = FirstWins.of("products")

    def convert(fields: Mapping[str, Any]) -> Record:
        handle = value(fields.get("Handle"))
        if not handle:
            raise ValueError("the row has no Handle, so it belongs to no product")
        product = products[handle]
        reason = product.left_out()
        if reason:
            raise Skip(reason)
        if fields is not product.lead and not _is_variant(fields):
            raise Skip("image row (no variant)")
        if reading.per == "variant":
            return unique(_record(product, [fields], reading))
        if fields is not product.lead:
            raise Skip("variant row, folded into its product")
        return unique(_record(product, product.variants, reading))

    return platform_result("shopify", rows, convert, path, reading, encoding)
