"""WANDS loader on tab-separated fixtures with the real header lines, and on the real query.csv."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from product_data.ingest import WANDS_GRADES, HashSplit, IngestResult, load_wands, wands_product
from product_data.ingest.wands import feature_colors, parse_features, split_classes, split_hierarchy

FIXTURES = Path(__file__).parent / "fixtures" / "ingest" / "wands"
QUERIES, PRODUCTS, LABELS = FIXTURES / "query.csv", FIXTURES / "product.csv", FIXTURES / "label.csv"
# The real WANDS query file (MIT licence, Wayfair), shared next to the repository.
REAL_QUERIES = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "wands" / "query.csv"


def _load() -> IngestResult:
    return load_wands(QUERIES, PRODUCTS, LABELS)


def _reason_at(result: IngestResult, where: str) -> str:
    """The one dead-letter reason for the row at ``where`` (each WANDS row feeds one stream)."""
    found = [d.reason for d in result.dead_letters if d.reason.startswith(f"{where}:")]
    assert len(found) == 1, (where, [d.reason for d in result.dead_letters])
    return found[0]


def _reconciles(result: IngestResult) -> None:
    for stream, counts in result.counts.items():
        assert counts.rows_in == counts.records_out + counts.rejected + sum(counts.skipped.values()), stream
    assert len(result.dead_letters) == sum(c.rejected for c in result.counts.values())


def test_fixture_headers_are_the_real_ones() -> None:
    first = {
        path.name: path.read_text(encoding="utf-8").splitlines()[0] for path in (QUERIES, PRODUCTS, LABELS)
    }
    assert first["query.csv"] == "query_id\tquery\tquery_class"
    assert first["product.csv"] == (
        "product_id\tproduct_name\tproduct_class\tcategory hierarchy\tproduct_description\t"
        "product_features\trating_count\taverage_rating\treview_count"
    )
    assert first["label.csv"] == "id\tquery_id\tproduct_id\tlabel"


@pytest.mark.parametrize(("label", "grade"), [("Exact", 2), ("Partial", 1), ("Irrelevant", 0)])
def test_labels_map_to_grades(label: str, grade: int) -> None:
    assert WANDS_GRADES[label] == grade
    assert (label, grade) in {(j["label"], j["grade"]) for j in _load().judgments}


def test_queries() -> None:
    result = _load()
    by_id = {q["query_id"]: q for q in result.queries}
    assert list(by_id) == ["0", "2", "208", "197", "11"]
    assert by_id["2"]["aspects"] == {"category": ["Kids Wall Décor"]}
    assert by_id["208"]["text"] == 'fawkes 36" blue vanity'  # stored CSV-quoted, as in the real file
    assert by_id["197"]["aspects"] == {}  # empty query_class: no category aspect
    assert all(q["split"] == HashSplit(0.2, 0.2).assign(q["query_id"]) for q in result.queries)


def test_products() -> None:
    by_id = {p["product_id"]: p for p in _load().products}
    assert list(by_id) == ["0", "7", "12", "15", "18"]
    bed = by_id["0"]
    assert bed["title"] == "solid wood platform bed"
    assert bed["category_path"] == ["Furniture", "Bedroom Furniture", "Beds & Headboards", "Beds"]
    assert bed["bullet_points"] == [
        "overallwidth-sidetoside: 64.7",
        "dsprimaryproductstyle: modern",
        "color: brown",
        "framematerial: solid wood",
    ]  # the empty-key noise segment " : no" is dropped
    assert (bed["color"], bed["aspects"]) == ("brown", {"category": ["Beds"], "color": ["brown"]})
    chair = by_id["7"]
    assert chair["aspects"]["category"] == ["Teen Lounge Furniture", "Accent Chairs"]
    assert chair["description"] is None
    assert chair["color"] == "gray"  # upholsterycolor; legcolor is a part colour
    hooks = by_id["12"]
    assert (hooks["color"], hooks["aspects"]["color"]) == ("white", ["white", "blue", "silver"])
    assert by_id["15"]["color"] == "platinum"  # colorfinish
    assert by_id["15"]["bullet_points"] == ["colorfinish: platinum", "voltage: 115"]
    assert by_id["18"]["category_path"] == ["Décor & Pillows", "Wall Art"]
    assert all(p["brand"] is None and p["locale"] is None for p in by_id.values())


def test_judgments_and_meaning() -> None:
    result = _load()
    assert [(j["query_id"], j["product_id"], j["grade"]) for j in result.judgments] == [
        ("0", "7", 2),
        ("0", "0", 0),
        ("2", "18", 1),
        ("11", "12", 0),
        ("197", "18", 2),
    ]
    assert result.positive_min_grade == 2  # grade >= 2 is Exact only
    assert result.gain_map is None


def test_counts_reconcile() -> None:
    result = _load()
    _reconciles(result)
    summary = {stream: (c.rows_in, c.records_out, c.rejected) for stream, c in result.counts.items()}
    assert summary == {"queries": (8, 5, 3), "products": (9, 5, 4), "judgments": (10, 5, 5)}


def test_bad_rows_become_dead_letters_naming_the_row() -> None:
    result = _load()
    assert "'query_id' is empty" in _reason_at(result, "query.csv line 6")
    assert "'text' is missing" in _reason_at(result, "query.csv line 7")
    assert "repeats the id" in _reason_at(result, "query.csv line 8")
    assert "'title' is missing" in _reason_at(result, "product.csv line 6")
    assert "'product_id' is empty" in _reason_at(result, "product.csv line 7")
    assert "has 3 fields but the header has 9" in _reason_at(result, "product.csv line 8")
    assert "repeats the id" in _reason_at(result, "product.csv line 9")
    assert "got 'Relevant'" in _reason_at(result, "label.csv line 6")
    assert "'product_id' is empty" in _reason_at(result, "label.csv line 7")
    dangling = {d.record_id for d in result.dead_letters if "was not loaded" in d.reason}
    assert dangling == {"2/16", "9/0"}
    row = next(d.raw for d in result.dead_letters if d.reason.startswith("label.csv line 6:"))
    assert row == {"id": "4", "query_id": "208", "product_id": "15", "label": "Relevant"}


def test_queries_alone_leave_judgment_references_unchecked() -> None:
    result = load_wands(QUERIES, label_csv=LABELS)
    assert result.streams == ("queries", "judgments")
    assert "2/16" in {f"{j['query_id']}/{j['product_id']}" for j in result.judgments}  # no catalog to check


def test_readme_spelling_of_the_hierarchy_column(tmp_path: Path) -> None:
    text = PRODUCTS.read_text(encoding="utf-8").replace("category hierarchy", "category_hierarchy", 1)
    (tmp_path / "product.csv").write_text(text, encoding="utf-8")
    products = load_wands(QUERIES, tmp_path / "product.csv").products
    assert products[0]["category_path"][0] == "Furniture"


def test_missing_required_column_is_a_file_error(tmp_path: Path) -> None:
    (tmp_path / "label.csv").write_text("id\tquery_id\tproduct_id\n0\t0\t7\n", encoding="utf-8")
    with pytest.raises(ValueError, match="label"):
        load_wands(QUERIES, label_csv=tmp_path / "label.csv")


def test_feature_parsing_helpers() -> None:
    assert split_classes("Teen Lounge Furniture|Accent Chairs|") == ["Teen Lounge Furniture", "Accent Chairs"]
    assert split_hierarchy("Browse By Brand / All-Clad") == ["Browse By Brand", "All-Clad"]
    assert split_hierarchy(None) == []
    pairs = parse_features("a:1|b : x:y| : no|c : |plain text")
    assert pairs == [("a", "1"), ("b", "x:y"), ("", "plain text")]
    assert feature_colors([("basecolor", "gold"), ("topcolor", "white")]) == []
    assert wands_product({"product_id": "1", "product_name": "cup"})["bullet_points"] == []


@pytest.mark.skipif(not REAL_QUERIES.is_file(), reason=f"real WANDS query.csv not found at {REAL_QUERIES}")
def test_real_wands_query_file() -> None:
    result = load_wands(REAL_QUERIES)
    assert result.counts["queries"].to_json() == {
        "rows_in": 480,
        "records_out": 480,
        "rejected": 0,
        "skipped": {},
    }
    assert result.dead_letters == ()
    ids = [q["query_id"] for q in result.queries]
    assert len(set(ids)) == 480 and ids[:3] == ["0", "1", "2"] and ids[-1] == "487"
    assert sum(1 for q in result.queries if not q["aspects"]) == 6  # six queries have no query_class
    by_id = {q["query_id"]: q for q in result.queries}
    assert by_id["2"]["aspects"] == {"category": ["Kids Wall Décor"]}
    assert by_id["208"]["text"] == 'fawkes 36" blue vanity'  # stored as "fawkes 36"" blue vanity"
    assert by_id["391"]["text"] == 'writing desk 48"'  # stored as "writing desk 48"""
    # Pinned: a change here means the split hash changed and every WANDS split moved.
    assert Counter(q["split"] for q in result.queries) == {"train": 292, "valid": 79, "test": 109}
