"""`madr ingest shopify|woocommerce`: the platforms' product exports, in their own column layouts
(tests/fixtures/platform_exports/), ingest in one command: variants grouped under their product and
inheriting its text, brand and colour read from whichever slot holds them, drafts and unpublished products
left out and counted, and every row accounted for."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq

from jobs.cli import main
from product_data.ingest.platform_export import PlatformReading
from product_data.ingest.shopify import load_shopify
from product_data.ingest.woocommerce import load_woocommerce

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "platform_exports"
SHOPIFY = FIXTURES / "shopify_products_export.csv"
WOOCOMMERCE = FIXTURES / "woocommerce_products_export.csv"


def _by_id(result) -> dict[str, dict]:
    return {record["product_id"]: record for record in result.products}


def test_a_shopify_export_gives_one_record_per_product_with_its_variants_folded_in() -> None:
    result = load_shopify(SHOPIFY, PlatformReading())
    products = _by_id(result)
    assert list(products) == ["merino-hoodie", "trail-sock", "running-shoe"]
    hoodie = products["merino-hoodie"]
    assert hoodie["title"] == "Merino Hoodie"
    assert hoodie["description"] == "Warm & soft merino wool."  # HTML and entities decoded
    assert hoodie["brand"] == "Icebreaker"  # Vendor
    assert hoodie["aspects"]["color"] == ["Zwart", "Blauw"] and hoodie["color"] is None  # two colours
    assert hoodie["bullet_points"] == ["Maat: M, L"]
    assert hoodie["category_path"] == ["Apparel & Accessories", "Clothing", "Activewear"]
    assert products["trail-sock"]["bullet_points"] == []  # "Default Title" is no option
    assert products["running-shoe"]["brand"] == "Nike"  # the option named Merk, not the reseller Vendor
    counts = result.counts["products"].to_json()
    assert counts == {
        "rows_in": 10,
        "records_out": 3,
        "rejected": 1,
        "skipped": {
            "draft product": 2,
            "image row (no variant)": 1,
            "unpublished product": 1,
            "variant row, folded into its product": 2,
        },
    }
    assert [letter.reason for letter in result.dead_letters] == [
        "shopify_products_export.csv line 10: the row has no Handle, so it belongs to no product"
    ]


def test_a_shopify_export_per_variant_gives_each_variant_its_products_text() -> None:
    products = _by_id(load_shopify(SHOPIFY, PlatformReading(per="variant")))
    assert list(products) == ["IB-HOOD-ZW-M", "IB-HOOD-ZW-L", "IB-HOOD-BL-M", "FK-SOCK", "NK-PEG-R"]
    blue = products["IB-HOOD-BL-M"]
    assert blue["title"] == "Merino Hoodie - Blauw / M"
    assert blue["color"] == "Blauw" and blue["brand"] == "Icebreaker"
    assert blue["description"] == "Warm & soft merino wool." and blue["bullet_points"] == ["Maat: M"]
    assert products["FK-SOCK"]["title"] == "Trail Sock"


def test_a_woocommerce_export_reads_brand_and_colour_from_whichever_slot_holds_them() -> None:
    result = load_woocommerce(WOOCOMMERCE, PlatformReading())
    products = _by_id(result)
    assert list(products) == ["RJ-STORM", "MUTS-1", "TENT-2P"]
    coat = products["RJ-STORM"]
    assert coat["brand"] == "Rains" and coat["aspects"]["color"] == ["Geel", "Zwart"]  # slots 1 and 2
    assert coat["description"] == "Waterdicht & ademend." and coat["bullet_points"] == ["Lichtgewicht"]
    assert coat["category_path"] == ["Kleding", "Jassen"]  # the deepest of its category paths
    hat = products["MUTS-1"]
    assert hat["brand"] == "Barts" and hat["color"] == "Rood"  # the same names in the other slots
    tent = products["TENT-2P"]
    assert tent["brand"] == "Patagonia"  # the Brands column
    assert tent["category_path"] == ["Outdoor, Kamperen", "Tenten"]  # "\," is a comma in a name
    assert result.counts["products"].to_json()["skipped"] == {
        "draft product": 1,
        "grouped product (its products are rows of their own)": 1,
        "private product": 1,
        "variation, folded into its product": 2,
    }
    assert [letter.reason for letter in result.dead_letters] == [
        "woocommerce_products_export.csv line 8: variation WEES-1: its parent 'id:999' is not in the export"
    ]


def test_a_woocommerce_published_value_the_platform_never_writes_is_a_dead_letter(tmp_path: Path) -> None:
    """Neither for sale nor left out: "yes" (a hand-edited export) is named, not guessed, and its
    variations go with it; the counts still reconcile."""
    path = tmp_path / "edited.csv"
    path.write_text(
        WOOCOMMERCE.read_text().replace(
            "101,variable,RJ-STORM,Regenjas Storm,1,", "101,variable,RJ-STORM,Regenjas Storm,yes,"
        )
    )
    result = load_woocommerce(path, PlatformReading())
    assert "RJ-STORM" not in _by_id(result)
    reasons = [letter.reason for letter in result.dead_letters]
    wrong = (
        "product RJ-STORM: 'Published' is 'yes'; WooCommerce writes 1 (published), 0 (private) or -1 (draft)"
    )
    assert sum(wrong in reason for reason in reasons) == 3  # the product and its two variations
    counts = result.counts["products"].to_json()
    assert counts["rows_in"] == counts["records_out"] + counts["rejected"] + sum(counts["skipped"].values())


def test_woocommerce_variations_inherit_their_parents_text_brand_and_category() -> None:
    result = load_woocommerce(WOOCOMMERCE, PlatformReading(per="variant"))
    products = _by_id(result)
    assert list(products) == ["RJ-STORM-GEEL", "RJ-STORM-ZW", "MUTS-1", "TENT-2P"]
    black = products["RJ-STORM-ZW"]  # its Parent given by SKU, its Name the parent's
    assert black["title"] == "Regenjas Storm - Zwart" and black["color"] == "Zwart"
    assert black["brand"] == "Rains" and black["category_path"] == ["Kleding", "Jassen"]
    assert black["description"] == "Waterdicht & ademend."
    assert (
        result.counts["products"].to_json()["skipped"]["variable product (its variations are the records)"]
        == 1
    )


def test_a_shop_names_its_own_brand_attribute(tmp_path: Path) -> None:
    path = tmp_path / "renamed.csv"
    path.write_text(SHOPIFY.read_text().replace(",Merk,Nike,", ",Fabrikat,Nike,"))
    assert _by_id(load_shopify(path, PlatformReading()))["running-shoe"]["brand"] == "Sportshop Jansen"
    given = PlatformReading(brand_attribute="Fabrikat")
    assert _by_id(load_shopify(path, given))["running-shoe"]["brand"] == "Nike"


def _reconciled(out: Path, records: int) -> list[dict]:
    rows = pq.read_table(out / "products").to_pylist()
    assert len(rows) == records
    counts = json.loads((out / "manifest.json").read_text())["counts"]["products"]
    assert counts["rows_in"] == counts["records_out"] + counts["rejected"] + sum(counts["skipped"].values())
    assert len((out / "dead_letters.jsonl").read_text().splitlines()) == counts["rejected"] == 1
    return rows


def test_the_readmes_shopify_command_as_a_user_types_it(tmp_path: Path) -> None:
    out = tmp_path / "shop"
    assert main(["ingest", "shopify", str(SHOPIFY), "--output", str(out), "--locale", "nl_NL"]) == 0
    rows = _reconciled(out, 3)
    assert {row["locale"] for row in rows} == {"nl_NL"}


def test_the_readmes_woocommerce_command_as_a_user_types_it(tmp_path: Path) -> None:
    out = tmp_path / "shop"
    argv = ["ingest", "woocommerce", str(WOOCOMMERCE), "--output", str(out), "--per", "variant"]
    assert main([*argv, "--brand_attribute", "Merk"]) == 0
    rows = _reconciled(out, 4)
    assert {row["product_id"]: row["brand"] for row in rows}["RJ-STORM-GEEL"] == "Rains"


def test_a_semicolon_export_is_told_the_delimiter(tmp_path: Path, capsys) -> None:
    export = tmp_path / "export.csv"
    export.write_text(WOOCOMMERCE.read_text().replace(",", ";"))
    argv = ["ingest", "woocommerce", str(export), "--output", str(tmp_path / "shop")]
    assert main(argv) == 2
    assert "pass --delimiter ';'" in capsys.readouterr().err
