"""A WooCommerce product export (Products → Export, the built-in CSV exporter) → madr product records.

WooCommerce's layout (woocommerce.com, "Product CSV Importer and Exporter"): one row per product or
variation. ``Type`` is simple, variable, variation, grouped or external (a row may add ", virtual" or
", downloadable"); a ``variation`` names its parent in ``Parent`` (``id:123`` or the parent's SKU) and
inherits what it leaves empty. ``Published`` is 1, 0 (private) or -1 (draft). ``Categories`` lists paths
("Clothing > Hoodies, Clothing"; a comma inside a name is written ``\\,``). Attributes sit in numbered
slots, ``Attribute 1 name`` / ``Attribute 1 value(s)``, the slot a shop used for its brand or colour
changing from product to product, a variable parent listing every value ("Blue, Green"). The brand is
the ``Brands`` column (WooCommerce 9.6 and later) or the attribute named as one.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from product_data.ingest.common import FirstWins, IngestResult, Record, Skip
from product_data.ingest.platform_export import (
    Option,
    PlatformReading,
    category_path,
    numbered_slots,
    option_values,
    options_of,
    other_options,
    platform_result,
    product_record,
    value,
    variant_title,
)
from product_data.ingest.readers import RawRow, read_delimited

REQUIRED = ("ID", "Type", "Name")
PUBLISHED = {"1": None, "0": "private product", "-1": "draft product"}


def _kinds(row: Mapping[str, Any]) -> set[str]:
    return {part.strip().lower() for part in str(row.get("Type") or "").split(",") if part.strip()}


def _longest_category(cell: str | None) -> list[str]:
    """The deepest of the product's category paths ("Clothing > Hoodies, Clothing" → Clothing, Hoodies)."""
    paths = [part.replace("\\,", ",") for part in re.split(r"(?<!\\),", cell or "")]
    return max((category_path(part) for part in paths), key=len, default=[])


class _Export:
    """The rows of an export by id and by SKU, so a variation finds its parent either way."""

    def __init__(self, rows: list[RawRow]) -> None:
        readable = [row.fields for row in rows if row.problem is None]
        self.by_id = {f"id:{value(f.get('ID'))}": f for f in readable if value(f.get("ID"))}
        self.by_sku = {value(f.get("SKU")): f for f in readable if value(f.get("SKU"))}
        header = next(iter(readable), {})
        self.slots = [
            (f"Attribute {n} name", f"Attribute {n} value(s)")
            for n in numbered_slots(header, r"Attribute (\d+) name")
        ]

    def parent_of(self, row: Mapping[str, Any]) -> Mapping[str, Any]:
        parent = value(row.get("Parent"))
        found = self.by_id.get(parent or "") or self.by_sku.get(parent) if parent else None
        if found is None:
            raise ValueError(f"variation {_identity(row)}: its parent {parent!r} is not in the export")
        return found

    def options(self, row: Mapping[str, Any]) -> list[Option]:
        # A variable parent lists its values comma-separated; a variation gives one.
        return options_of(row, self.slots, split="," if "variable" in _kinds(row) else None)


def _identity(row: Mapping[str, Any]) -> str:
    return value(row.get("SKU")) or f"id:{value(row.get('ID'))}"


def _left_out(row: Mapping[str, Any]) -> str | None:
    """Why a product is not for sale (private, draft), or None; a `Published` WooCommerce never writes is
    a dead letter, not a guess either way."""
    published = value(row.get("Published")) or "1"
    if published not in PUBLISHED:
        raise ValueError(
            f"product {_identity(row)}: 'Published' is {published!r}; WooCommerce writes 1 (published), "
            "0 (private) or -1 (draft): fix the export or the column"
        )
    return PUBLISHED[published]


def _record(
    row: Mapping[str, Any], parent: Mapping[str, Any] | None, export: _Export, reading: PlatformReading
) -> Record:
    """A simple product, a variable parent (its values across variations) or one variation (inheriting
    its parent's text, brand and category) as a record."""
    base = parent or row
    own = export.options(row)
    inherited = export.options(parent) if parent else []
    brands = value(row.get("Brands")) or value(base.get("Brands"))
    brand = next(iter(option_values([*own, *inherited], reading.brand_names())), None) or (
        brands.split(",")[0].strip() if brands else None
    )
    description = reading.text(row.get("Description")) or reading.text(base.get("Description"))
    short = reading.text(row.get("Short description")) or reading.text(base.get("Short description"))
    title = value(row.get("Name"))
    if parent is not None and (not title or title == value(parent.get("Name"))):
        title = variant_title(value(parent.get("Name")), [v for o in own for v in o.values])
    bullets = ([short] if short and description else []) + other_options(own or inherited, reading)
    return product_record(
        _identity(row),
        title,
        description=description or short,
        bullets=bullets,
        brand=brand,
        colors=option_values(own, reading.color_names()) or option_values(inherited, reading.color_names()),
        path=_longest_category(value(row.get("Categories")) or value(base.get("Categories"))),
        locale=reading.locale,
    )


def load_woocommerce(
    path: str | Path, reading: PlatformReading, *, encoding: str = "utf-8", delimiter: str = ","
) -> IngestResult:
    """Every row of a WooCommerce product export as a record (per product: simple and variable ones;
    per variant: simple products and each variation), a named skip, or a dead letter."""
    rows = list(read_delimited(path, delimiter=delimiter, required=REQUIRED, encoding=encoding))
    export = _Export(rows)
    unique = FirstWins.of("products")

    def convert(fields: Mapping[str, Any]) -> Record:
        kinds = _kinds(fields)
        reason = _left_out(fields)
        if reason:
            raise Skip(reason)
        if "grouped" in kinds:
            raise Skip("grouped product (its products are rows of their own)")
        if "variation" in kinds:
            parent = export.parent_of(fields)
            if _left_out(parent):
                raise Skip("variation of an unpublished product")
            if reading.per == "product":
                raise Skip("variation, folded into its product")
            return unique(_record(fields, parent, export, reading))
        if "variable" in kinds and reading.per == "variant":
            raise Skip("variable product (its variations are the records)")
        return unique(_record(fields, None, export, reading))

    return platform_result("woocommerce", rows, convert, path, reading, encoding)
