"""Write the second store's export: a Shopify products CSV, its shoppers' queries and graded judgments.

    python examples/second_store/make_export.py --output runs/second_store [--seed 7]
    madr ingest folder runs/second_store --output runs/second_store_data

The output folder holds products.csv (Shopify's export columns, one row per variant), queries.csv,
judgments.csv, the committed mapping.json (copied, so the folder ingests on its own) and summary.json
(the counts README.md quotes). Standard library only, and deterministic: the same seed writes the same
bytes, so the fixture can be regenerated instead of committed. See README.md for what is in it.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import random
import shutil
import statistics
import sys
from collections import Counter
from pathlib import Path

from judging import LABELS, Judgment, Query, write_queries
from listings import LANGUAGE_INDEX, Listing, Product, build_catalog, ean13, shipping_grams
from vocabulary import COLOURS, LEAVES
from wording import GOOGLE_GENDER, OPTION_NAMES

HERE = Path(__file__).resolve().parent
DEFAULT_SEED = 7
LOCALES: dict[str, str] = {"de": "de-CH", "fr": "fr-CH", "en": "en"}
LANGUAGE_COLUMN = "Language (product.metafields.custom.language)"
PRODUCT_COLUMNS: tuple[str, ...] = (
    "Handle", "Title", "Body (HTML)", "Vendor", "Product Category", "Type", "Tags", "Published",
    "Option1 Name", "Option1 Value", "Option2 Name", "Option2 Value", "Variant SKU", "Variant Grams",
    "Variant Inventory Tracker", "Variant Inventory Policy", "Variant Fulfillment Service", "Variant Price",
    "Variant Compare At Price", "Variant Requires Shipping", "Variant Taxable", "Variant Barcode",
    "Image Src", "Image Position", "Image Alt Text", "Gift Card", "SEO Title", "SEO Description",
    "Google Shopping / Gender", "Google Shopping / Age Group", "Google Shopping / MPN",
    "Google Shopping / Condition", LANGUAGE_COLUMN, "Variant Weight Unit", "Status",
)  # fmt: skip


def _product_row(listing: Listing, product: Product, rng: random.Random) -> dict[str, str]:
    model = product.model
    leaf = LEAVES[model.leaf]
    colour_name, size_name = OPTION_NAMES[listing.language]
    if listing.options:
        colour = (
            COLOURS[product.colour][LANGUAGE_INDEX[listing.language] + 1] if product.colour else "Standard"
        )
        options = {"Option1 Name": colour_name, "Option1 Value": colour}
        if product.option_size:
            options |= {"Option2 Name": size_name, "Option2 Value": product.option_size}
    else:
        options = {"Option1 Name": "Title", "Option1 Value": "Default Title"}
    sale = "sale" in listing.tags
    price = model.price * (0.7 if sale else 1.0)
    return {
        "Handle": listing.handle,
        "Title": listing.title,
        "Body (HTML)": listing.body,
        "Vendor": model.brand,
        "Product Category": " > ".join(leaf.path),
        "Type": leaf.name,
        "Tags": ", ".join(listing.tags),
        "Published": "TRUE",
        **options,
        "Variant SKU": product.sku,
        "Variant Grams": str(shipping_grams(product)),
        "Variant Inventory Tracker": "shopify",
        "Variant Inventory Policy": "deny",
        "Variant Fulfillment Service": "manual",
        "Variant Price": f"{price:.2f}",
        "Variant Compare At Price": f"{model.price:.2f}" if sale else "",
        "Variant Requires Shipping": "TRUE",
        "Variant Taxable": "TRUE",
        "Variant Barcode": ean13(rng),
        "Image Src": f"https://cdn.shopify.com/s/files/1/0612/7731/files/{listing.handle}.jpg",
        "Image Position": "1",
        "Image Alt Text": listing.title,
        "Gift Card": "FALSE",
        "SEO Title": f"{listing.title} | Bergfink Sport",
        "SEO Description": "",
        "Google Shopping / Gender": GOOGLE_GENDER[model.gender],
        "Google Shopping / Age Group": "kids" if model.gender == "k" else "adult",
        "Google Shopping / MPN": product.sku.removeprefix("BF-"),
        "Google Shopping / Condition": "new",
        LANGUAGE_COLUMN: LOCALES[listing.language],
        "Variant Weight Unit": "g",
        "Status": "active",
    }


def _csv(rows: list[dict[str, str]], columns: tuple[str, ...]) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns, lineterminator="\n", restval="")
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue()


def summarise(listings: list[Listing], queries: list[Query], judgments: list[Judgment]) -> dict[str, object]:
    """The counts README.md quotes, recomputed from what was written."""
    products = [product for listing in listings for product in listing.products]
    per_leaf = Counter(LEAVES[p.model.leaf].name for p in products)
    per_model: dict[object, list[Product]] = {}
    for product in products:
        per_model.setdefault(product.model, []).append(product)
    pairs = Counter()
    for rows in per_model.values():
        for i, first in enumerate(rows):
            for second in rows[i + 1 :]:
                if first.handle == second.handle:
                    pairs["variant rows of one handle"] += 1
                elif first.relisted or second.relisted:
                    pairs["re-listed under another title"] += 1
                elif first.title_size != second.title_size:
                    pairs["another size or pack, own handle"] += 1
                else:
                    pairs["another colour, own handle"] += 1
    relevant = Counter(j.query_id for j in judgments if j.grade >= 2)
    judged = Counter(j.query_id for j in judgments)
    kinds = Counter(q.kind.split("+")[0] for q in queries)
    return {
        "products": len(products),
        "listings (handles)": len(listings),
        "models": len(per_model),
        "products per department": dict(Counter(LEAVES[p.model.leaf].department for p in products)),
        "product languages": dict(Counter(LOCALES[p.language] for p in products)),
        "default title rows": sum(len(x.products) for x in listings if not x.options),
        "leaves": len(per_leaf),
        "tree depth": Counter(len(leaf.path) for leaf in LEAVES),
        "products per leaf": {
            "min": min(per_leaf.values()),
            "median": statistics.median(per_leaf.values()),
            "max": max(per_leaf.values()),
            "leaves with 5-30": sum(5 <= n <= 30 for n in per_leaf.values()),
        },
        "brands": len({p.model.brand for p in products}),
        "near-duplicate pairs": dict(pairs),
        "products with a near-duplicate": sum(len(rows) for rows in per_model.values() if len(rows) > 1),
        "queries": len(queries),
        "query languages": dict(Counter(q.language for q in queries)),
        "query kinds": dict(sorted(kinds.items())),
        "queries with a typo": sum(q.kind.endswith("+typo") for q in queries),
        "judgments": len(judgments),
        "judgments by grade": {
            str(g): sum(j.grade == g for j in judgments) for g in sorted(LABELS, reverse=True)
        },
        "relevant per query": {
            "min": min(relevant.values()),
            "median": statistics.median(relevant.values()),
            "max": max(relevant.values()),
        },
        "judged per query": {"min": min(judged.values()), "max": max(judged.values())},
    }


def generate(output: Path, seed: int = DEFAULT_SEED) -> dict[str, object]:
    """Write the export folder; returns its summary. One `random.Random(seed)` drives everything."""
    rng = random.Random(seed)
    listings = build_catalog(rng)
    products = [product for listing in listings for product in listing.products]
    queries, judgments = write_queries(rng, products, {listing.title.lower() for listing in listings})
    barcodes = random.Random(seed + 1)  # its own stream, so adding a column never reshuffles the catalog
    product_rows = [_product_row(x, product, barcodes) for x in listings for product in x.products]
    query_rows = [
        {"Search ID": q.query_id, "Search term": q.text, "Language": q.language, "Query kind": q.kind}
        for q in queries
    ]
    judgment_rows = [
        {
            "Search ID": j.query_id,
            "Variant SKU": j.sku,
            "Grade": str(j.grade),
            "Label": LABELS[j.grade],
            "Rule": j.rule,
        }
        for j in judgments
    ]
    output.mkdir(parents=True, exist_ok=True)
    (output / "products.csv").write_text(_csv(product_rows, PRODUCT_COLUMNS), encoding="utf-8")
    (output / "queries.csv").write_text(
        _csv(query_rows, ("Search ID", "Search term", "Language", "Query kind")), encoding="utf-8"
    )
    (output / "judgments.csv").write_text(
        _csv(judgment_rows, ("Search ID", "Variant SKU", "Grade", "Label", "Rule")), encoding="utf-8"
    )
    shutil.copyfile(HERE / "mapping.json", output / "mapping.json")
    summary = summarise(listings, queries, judgments)
    text = json.dumps(summary, ensure_ascii=False, indent=2, default=str)
    (output / "summary.json").write_text(text + "\n", encoding="utf-8")
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", required=True, type=Path, help="Folder to write (created if missing)")
    parser.add_argument(
        "--seed", type=int, default=DEFAULT_SEED, help=f"Random seed (default {DEFAULT_SEED})"
    )
    args = parser.parse_args(argv)
    summary = generate(args.output, args.seed)
    print(json.dumps(summary, ensure_ascii=False, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
