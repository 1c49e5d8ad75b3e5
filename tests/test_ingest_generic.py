"""Generic loader: one mapping, the same records from JSONL, CSV, TSV and Parquet."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from product_data.ingest import (
    ColumnMapping,
    IngestResult,
    combine_results,
    drop_dangling_judgments,
    load_generic,
)
from product_data.ingest.generic import infer_format

CATALOG_ROWS: list[dict[str, Any]] = [
    {"sku": "S-1", "name": "Oak Side Table", "manufacturer": "Woodly",
     "breadcrumbs": "Home > Tables > Side Tables", "features": "solid oak|easy assembly",
     "product_type": "Side Tables;Tables", "blurb": "A small table."},
    {"sku": "S-2", "name": "Floor Lamp", "manufacturer": "", "breadcrumbs": "Home > Lighting",
     "features": "", "product_type": "Lamps", "blurb": ""},
    {"sku": "", "name": "No SKU Vase", "manufacturer": "Potter", "breadcrumbs": "Home > Decor",
     "features": "", "product_type": "Vases", "blurb": ""},  # bad: missing id
    {"sku": "S-4", "name": "  ", "manufacturer": "Woodly", "breadcrumbs": "",
     "features": "", "product_type": "", "blurb": ""},  # bad: empty title
    {"sku": "S-1", "name": "Oak Side Table v2", "manufacturer": "Woodly", "breadcrumbs": "",
     "features": "", "product_type": "", "blurb": ""},  # bad: repeats S-1
]  # fmt: skip
MAPPING = ColumnMapping(
    {"product_id": "sku", "title": "name", "brand": "manufacturer", "category_path": "breadcrumbs",
     "bullet_points": "features", "description": "blurb"},
    aspects={"category": "product_type", "brand": "manufacturer"},
    separators={"category_path": " > ", "bullet_points": "|", "category": ";"},
)  # fmt: skip
EXPECTED_FIRST = {
    "product_id": "S-1",
    "title": "Oak Side Table",
    "description": "A small table.",
    "bullet_points": ["solid oak", "easy assembly"],
    "brand": "Woodly",
    "color": None,
    "category_path": ["Home", "Tables", "Side Tables"],
    "aspects": {"category": ["Side Tables", "Tables"], "brand": ["Woodly"]},
    "locale": None,
}


def _write(rows: list[dict[str, Any]], path: Path) -> Path:
    if path.suffix == ".jsonl":
        path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    elif path.suffix == ".parquet":
        pq.write_table(pa.Table.from_pylist(rows), path)
    else:
        with path.open("w", encoding="utf-8", newline="") as handle:
            writer = csv.DictWriter(handle, list(rows[0]), delimiter="\t" if path.suffix == ".tsv" else ",")
            writer.writeheader()
            writer.writerows(rows)
    return path


def _reconciles(result: IngestResult) -> None:
    for counts in result.counts.values():
        assert counts.rows_in == counts.records_out + counts.rejected + sum(counts.skipped.values())
    assert len(result.dead_letters) == sum(c.rejected for c in result.counts.values())


@pytest.mark.parametrize("suffix", [".jsonl", ".csv", ".tsv", ".parquet"])
def test_products_in_every_format(tmp_path: Path, suffix: str) -> None:
    result = load_generic(_write(CATALOG_ROWS, tmp_path / f"catalog{suffix}"), MAPPING, "products")
    _reconciles(result)
    assert result.products[0] == EXPECTED_FIRST
    assert result.products[1]["brand"] is None and result.products[1]["aspects"] == {"category": ["Lamps"]}
    assert result.counts["products"].to_json() == {
        "rows_in": 5,
        "records_out": 2,
        "rejected": 3,
        "skipped": {},
    }
    unit = "row" if suffix == ".parquet" else "line"
    first = 4 if suffix in (".csv", ".tsv") else 3  # line 1 of CSV/TSV is the header
    where = [f"catalog{suffix} {unit} {n}" for n in (first, first + 1, first + 2)]
    reasons = {d.reason.split(":")[0]: d.reason for d in result.dead_letters}
    assert list(reasons) == where
    assert "'product_id' is empty" in reasons[where[0]]
    assert "'title' is missing" in reasons[where[1]]
    assert "repeats the id" in reasons[where[2]]
    assert result.dead_letters[0].raw["name"] == "No SKU Vase"


def test_native_lists_need_no_separator(tmp_path: Path) -> None:
    rows = [
        {"product_id": "P1", "title": "Mug", "category_path": ["Kitchen", "Mugs"], "bullet_points": ["12 oz"]}
    ]
    result = load_generic(_write(rows, tmp_path / "p.jsonl"), ColumnMapping(), "products")
    assert (result.products[0]["category_path"], result.products[0]["bullet_points"]) == (
        ["Kitchen", "Mugs"],
        ["12 oz"],
    )


def test_format_override_and_inference(tmp_path: Path) -> None:
    path = _write(CATALOG_ROWS, tmp_path / "catalog.tsv").rename(tmp_path / "catalog.txt")
    with pytest.raises(ValueError, match="file_format"):
        load_generic(path, MAPPING, "products")
    result = load_generic(path, MAPPING, "products", file_format="csv", delimiter="\t")
    assert result.products[0] == EXPECTED_FIRST
    assert [infer_format(f"x{s}") for s in (".JSONL", ".ndjson", ".tsv", ".pq")] == [
        "jsonl",
        "jsonl",
        "csv",
        "parquet",
    ]


def test_queries(tmp_path: Path) -> None:
    rows = [
        {"qid": "q1", "q": "oak table", "dept": "Tables", "split": "train"},
        {"qid": "q2", "q": "lamp", "dept": "", "split": ""},  # no split: "test", as validate_query decides
        {"qid": "q3", "q": "vase", "dept": "Decor", "split": "dev"},  # bad: unknown split
    ]
    mapping = ColumnMapping({"query_id": "qid", "text": "q"}, aspects={"category": "dept"})
    result = load_generic(_write(rows, tmp_path / "queries.csv"), mapping, "queries")
    _reconciles(result)
    assert result.queries == (
        {"query_id": "q1", "text": "oak table", "aspects": {"category": ["Tables"]}, "split": "train"},
        {"query_id": "q2", "text": "lamp", "aspects": {}, "split": "test"},
    )
    reason = result.dead_letters[0].reason
    assert reason.startswith("queries.csv line 4:") and "'dev'" in reason


def test_judgments_with_text_labels(tmp_path: Path) -> None:
    rows = [
        {"query": "q1", "item": "S-1", "relevance": "relevant"},
        {"query": "q1", "item": "S-2", "relevance": "irrelevant"},
        {"query": "q2", "item": "S-1", "relevance": "maybe"},  # bad: unknown label
    ]
    mapping = ColumnMapping(
        {"query_id": "query", "product_id": "item", "grade": "relevance"},
        label_grades={"relevant": 2, "partial": 1, "irrelevant": 0},
    )
    result = load_generic(_write(rows, tmp_path / "qrels.jsonl"), mapping, "judgments", positive_min_grade=2)
    assert [(j["grade"], j["label"]) for j in result.judgments] == [(2, "relevant"), (0, "irrelevant")]
    assert result.positive_min_grade == 2
    letter = result.dead_letters[0]
    assert (letter.record_id, letter.reason.split(":")[0]) == ("q2/S-1", "qrels.jsonl line 3")
    assert "'maybe'" in letter.reason


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_judgments_with_numeric_grades(tmp_path: Path, suffix: str) -> None:
    grades: list[Any] = ["2", "0", "-1", "high"] if suffix == ".csv" else [2.0, 0.0, -1.0, 1.5]
    rows = [{"query_id": "q1", "product_id": f"P{i}", "grade": g} for i, g in enumerate(grades)]
    result = load_generic(_write(rows, tmp_path / f"qrels{suffix}"), ColumnMapping(), "judgments")
    _reconciles(result)
    assert [j["grade"] for j in result.judgments] == [2, 0]
    assert all("'grade' must be an integer" in d.reason for d in result.dead_letters)


def test_unparseable_jsonl_lines_are_dead_letters(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    path.write_text('{"product_id": "P1", "title": "Mug"}\n\n{not json\n[1, 2]\n', encoding="utf-8")
    result = load_generic(path, ColumnMapping(), "products")
    _reconciles(result)
    assert [d.reason.split(":")[0] for d in result.dead_letters] == ["p.jsonl line 3", "p.jsonl line 4"]
    assert "not valid JSON" in result.dead_letters[0].reason
    assert "not a JSON object" in result.dead_letters[1].reason


def test_missing_mapped_column_is_a_file_error(tmp_path: Path) -> None:
    path = _write(CATALOG_ROWS, tmp_path / "catalog.csv")
    with pytest.raises(ValueError, match="item_name"):
        load_generic(path, ColumnMapping({"product_id": "sku", "title": "item_name"}), "products")
    parquet = _write(CATALOG_ROWS, tmp_path / "catalog.parquet")
    with pytest.raises(ValueError, match="item_name"):
        load_generic(parquet, ColumnMapping({"product_id": "sku", "title": "item_name"}), "products")


@pytest.mark.parametrize("suffix", [".jsonl", ".csv", ".parquet"])
def test_a_misspelt_optional_column_is_an_error_naming_the_nearest(tmp_path: Path, suffix: str) -> None:
    """As a new user met it: `"color": "Option1 Valeu"` ingested with exit 0 and every colour null."""
    rows = [{**row, "Option1 Value": "Red"} for row in CATALOG_ROWS]
    path = _write(rows, tmp_path / f"catalog{suffix}")
    for mapping in (
        ColumnMapping({"product_id": "sku", "title": "name", "color": "Option1 Valeu"}),
        ColumnMapping({"product_id": "sku", "title": "name"}, aspects={"color": "Option1 Valeu"}),
    ):
        with pytest.raises(ValueError, match="'Option1 Valeu' \\(nearest: 'Option1 Value'\\)"):
            load_generic(path, mapping, "products")
    spelt = ColumnMapping({"product_id": "sku", "title": "name", "color": "Option1 Value"})
    assert {r["color"] for r in load_generic(path, spelt, "products").products} == {"Red"}


def test_export_placeholders_are_read_as_missing_and_counted(tmp_path: Path) -> None:
    """Shopify writes "Default Title" as the option value of a product without variants: it became a
    colour (into the vocabulary and the Vertex restricts) for 23 products of a real export."""
    rows = [
        {"sku": "A", "name": "Watering Can", "opt": "Default Title", "maker": "N/A", "tags": "garden|-"},
        {"sku": "B", "name": "Red Hose", "opt": "Red", "maker": "Gardena", "tags": "garden"},
        {"sku": "C", "name": "Default Title", "opt": " default  title ", "maker": "-", "tags": ""},
    ]
    mapping = ColumnMapping(
        {"product_id": "sku", "title": "name", "color": "opt", "brand": "maker", "bullet_points": "tags"},
        aspects={"color": "opt"},
        separators={"bullet_points": "|"},
    )
    result = load_generic(_write(rows, tmp_path / "export.csv"), mapping, "products")
    by_id = {p["product_id"]: p for p in result.products}
    assert by_id["A"]["color"] is None and by_id["A"]["brand"] is None and by_id["A"]["aspects"] in (None, {})
    assert by_id["A"]["bullet_points"] == ["garden"]
    assert by_id["B"]["color"] == "Red" and by_id["B"]["aspects"] == {"color": ["Red"]}
    assert by_id["C"]["title"] == "Default Title"  # never in a title: only fields that may be missing
    counts = result.counts["products"]
    assert counts.placeholders == {"aspects.color": 2, "brand": 2, "bullet_points": 1, "color": 2}
    assert counts.to_json()["placeholders_read_as_missing"] == counts.placeholders
    _reconciles(result)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"fields": {"sku": "product_id"}}, "unknown target field"),
        ({"fields": {"title": ""}}, "non-empty"),
        ({"separators": {"brand": ","}}, "can be split"),
        ({"aspects": {"other": "x"}}, "reserved"),
        ({"aspects": {"Brand": "x"}}, "snake_case"),
        ({"aspects": {"category_path": "x"}}, "ambiguous"),
        ({"label_grades": {"good": -1}}, "int >= 0"),
    ],
)
def test_mapping_validation(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ColumnMapping(**kwargs)


def test_mapping_must_fit_the_kind(tmp_path: Path) -> None:
    path = _write([{"query_id": "q1", "text": "x"}], tmp_path / "q.jsonl")
    with pytest.raises(ValueError, match="not fields of queries"):
        load_generic(path, ColumnMapping({"title": "text"}), "queries")
    with pytest.raises(ValueError, match="positive_min_grade"):
        load_generic(path, ColumnMapping(), "queries", positive_min_grade=2)


def test_three_files_make_one_dataset(tmp_path: Path) -> None:
    products = load_generic(_write(CATALOG_ROWS, tmp_path / "catalog.csv"), MAPPING, "products")
    queries = load_generic(
        _write([{"query_id": "q1", "text": "oak"}], tmp_path / "q.jsonl"), ColumnMapping(), "queries"
    )
    qrels = [
        {"query_id": "q1", "product_id": "S-1", "grade": 2},
        {"query_id": "q1", "product_id": "S-9", "grade": 1},
    ]
    judgments = load_generic(_write(qrels, tmp_path / "j.parquet"), ColumnMapping(), "judgments")
    combined = drop_dangling_judgments(combine_results(products, queries, judgments, source="shop"))
    _reconciles(combined)
    assert combined.streams == ("products", "queries", "judgments")
    assert [j["product_id"] for j in combined.judgments] == ["S-1"]
    assert combined.dead_letters[-1].record_id == "q1/S-9"
    with pytest.raises(ValueError, match="both hold products"):
        combine_results(products, products)
