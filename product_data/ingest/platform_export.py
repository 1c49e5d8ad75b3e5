"""What the Shopify and WooCommerce product exports share: rows grouped under their product, option or
attribute slots read by name whichever slot holds them, and one record per product or per sellable variant.

Both platforms write a product over several CSV rows (Shopify: one row per variant under a shared
``Handle``, the product's text on the first; WooCommerce: a ``variable`` parent row and one ``variation``
row per sellable combination pointing at it through ``Parent``), and both put brand and colour in a slot
the shop chose (Shopify's ``Option1 Name`` .. ``Option3 Name``, WooCommerce's ``Attribute 1 name`` ..).
`PlatformReading` holds what a user sets; `shopify.py` and `woocommerce.py` hold each layout.

Every CSV row is accounted for: a record, a dead letter, or a named skip (a draft, a variant row folded
into its product, an image-only row), so ``rows_in = records_out + rejected + skipped`` as every ingest.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from product_data.ingest.common import IngestResult, Record, StreamTally, build_result
from product_data.ingest.generic import PLACEHOLDERS
from product_data.ingest.html_text import plain_text
from product_data.ingest.readers import RawRow
from schemas import validate_product

Per = Literal["product", "variant"]
PER_CHOICES: tuple[str, ...] = ("product", "variant")

# Option and attribute names that hold the brand or the colour, in the languages stores write them.
BRAND_NAMES: tuple[str, ...] = (
    "brand", "merk", "marke", "marque", "marca", "märke", "mærke", "merke", "manufacturer", "hersteller",
    "fabrikant", "producent", "vendor",
)  # fmt: skip
COLOR_NAMES: tuple[str, ...] = (
    "color", "colour", "kleur", "farbe", "couleur", "colore", "cor", "färg", "farve", "farge", "kolor",
    "barva", "szín",
)  # fmt: skip


@dataclass(frozen=True)
class PlatformReading:
    """How a platform export becomes records: one per product or per sellable variant, which option or
    attribute names hold the brand and the colour (besides the defaults), and the catalog's locale."""

    per: Per = "product"
    brand_attribute: str | None = None
    color_attribute: str | None = None
    locale: str | None = None
    keep_html: bool = False

    def __post_init__(self) -> None:
        if self.per not in PER_CHOICES:
            raise ValueError(f"per must be one of {PER_CHOICES}, got {self.per!r}")

    def brand_names(self) -> tuple[str, ...]:
        return (*_names(self.brand_attribute), *BRAND_NAMES)

    def color_names(self) -> tuple[str, ...]:
        return (*_names(self.color_attribute), *COLOR_NAMES)

    def text(self, value: Any) -> str | None:
        """An export's text cell as plain text (tags dropped, entities decoded), or None when empty."""
        if not isinstance(value, str) or not value.strip():
            return None
        return value.strip() if self.keep_html else (plain_text(value) or None)


def _names(given: str | None) -> tuple[str, ...]:
    return tuple(name.strip().lower() for name in given.split(",") if name.strip()) if given else ()


def slot_name(name: Any) -> str:
    """An option or attribute name as compared: lower case, WooCommerce's ``pa_`` taxonomy prefix off."""
    return str(name or "").strip().lower().removeprefix("pa_")


def value(cell: Any) -> str | None:
    """A cell's text, None when empty or an export's placeholder ("Default Title")."""
    if not isinstance(cell, str):
        return None
    text = cell.strip()
    return text if text and text.lower() not in PLACEHOLDERS else None


def distinct(values: Iterable[str | None]) -> list[str]:
    """The values in first-seen order, each once, empty ones left out."""
    return list(dict.fromkeys(v for v in values if v))


@dataclass(frozen=True)
class Option:
    """One option (Shopify) or attribute (WooCommerce) slot's name and the values a row gives it."""

    name: str
    values: tuple[str, ...]


def options_of(row: Mapping[str, Any], names: Sequence[tuple[str, str]], split: str | None) -> list[Option]:
    """The row's filled option slots: `names` pairs each slot's name column with its value column;
    `split` cuts a value cell holding several (a variable WooCommerce parent's "Blue, Green")."""
    found = []
    for name_column, value_column in names:
        name, cell = value(row.get(name_column)), value(row.get(value_column))
        if not name or not cell:
            continue
        values = [part.strip() for part in cell.split(split)] if split else [cell]
        found.append(Option(name, tuple(distinct(value(v) for v in values))))
    return found


def option_values(options: Iterable[Option], names: Sequence[str]) -> list[str]:
    """The values of the options whose name is one of `names`."""
    wanted = set(names)
    return distinct(v for option in options if slot_name(option.name) in wanted for v in option.values)


def other_options(options: Iterable[Option], reading: PlatformReading) -> list[str]:
    """The options that are neither brand nor colour, as bullet points ("Size: S, M, L")."""
    taken = set(reading.brand_names()) | set(reading.color_names())
    merged: dict[str, list[str]] = {}
    for option in options:
        if slot_name(option.name) not in taken:
            merged.setdefault(option.name, []).extend(option.values)
    return [f"{name}: {', '.join(distinct(values))}" for name, values in merged.items()]


def category_path(text: str | None, separator: str = ">") -> list[str]:
    """ "Apparel & Accessories > Clothing > Shirts" as its levels."""
    return [level.strip() for level in (text or "").split(separator) if level.strip()]


def product_record(
    product_id: str | None,
    title: str | None,
    *,
    description: str | None,
    bullets: list[str],
    brand: str | None,
    colors: list[str],
    path: list[str],
    locale: str | None,
) -> Record:
    """A validated product record; the colour field is set only when the product has one colour (a
    product sold in several keeps them all as its colour aspect)."""
    aspects = {"brand": [brand] if brand else [], "color": colors, "category": path[-1:]}
    return validate_product(
        {
            "product_id": product_id,
            "title": title,
            "description": description,
            "bullet_points": bullets,
            "brand": brand,
            "color": colors[0] if len(colors) == 1 else None,
            "category_path": path,
            "aspects": {name: values for name, values in aspects.items() if values},
            "locale": locale,
        }
    )


def variant_title(title: str | None, values: Sequence[str]) -> str | None:
    """A variant's title as both platforms show it: the product's, then its option values."""
    if not title:
        return None
    return f"{title} - {' / '.join(values)}" if values else title


def numbered_slots(header: Iterable[str], pattern: str) -> list[int]:
    """The slot numbers a header has columns for (`pattern` with a group for the number)."""
    found = {int(match[1]) for column in header if (match := re.fullmatch(pattern, column, re.IGNORECASE))}
    return sorted(found)


def platform_result(
    platform: str,
    rows: Iterable[RawRow],
    convert: Callable[[Mapping[str, Any]], Record],
    path: str | Path,
    reading: PlatformReading,
    encoding: str,
) -> IngestResult:
    """Every row through `convert` (a record, a named skip or a dead letter), as the platform's result."""
    tally = StreamTally(f"ingest.{platform}.products")
    records = list(tally.route(rows, convert))
    provenance = {"path": str(path), "format": platform, "per": reading.per, "encoding": encoding}
    return build_result(platform, {"products": tally}, {"products": records}, provenance=provenance)
