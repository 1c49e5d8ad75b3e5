"""ESCI loader on parquet fixtures in the real Shopping Queries Dataset layout.

Every fixture row is listed with its purpose in tests/fixtures/ingest/make_esci_fixtures.py.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pyarrow.parquet as pq
import pytest

from product_data.ingest import (
    ESCI_FLOAT_GAINS,
    ESCI_GRADES,
    EsciConfig,
    HashSplit,
    IngestResult,
    esci_product,
    load_esci,
)
from product_data.ingest.esci import esci_grade
from schemas import InvalidRecord

FIXTURES = Path(__file__).parent / "fixtures" / "ingest"
PRODUCTS = FIXTURES / "esci" / "shopping_queries_dataset_products.parquet"
EXAMPLES = FIXTURES / "esci" / "shopping_queries_dataset_examples.parquet"


def _fixture_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("make_esci_fixtures", FIXTURES / "make_esci_fixtures.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _load(**config: object) -> IngestResult:
    return load_esci(PRODUCTS, EXAMPLES, EsciConfig(**config))  # type: ignore[arg-type]


def _reconciles(result: IngestResult) -> None:
    for stream, counts in result.counts.items():
        assert counts.rows_in == counts.records_out + counts.rejected + sum(counts.skipped.values()), stream
        assert counts.records_out == len(getattr(result, stream))
    assert len(result.dead_letters) == sum(c.rejected for c in result.counts.values())


def _reasons(result: IngestResult, stream: str) -> list[str]:
    return [d.reason for d in result.dead_letters if d.stage == f"ingest.esci.{stream}"]


def _reason_at(result: IngestResult, stream: str, where: str) -> str:
    """The one dead-letter reason of ``stream`` for the row at ``where``."""
    found = [reason for reason in _reasons(result, stream) if reason.startswith(f"{where}:")]
    assert len(found) == 1, (where, _reasons(result, stream))
    return found[0]


def test_committed_fixtures_match_their_generator() -> None:
    script = _fixture_script()
    assert pq.read_table(PRODUCTS).equals(script.products_table())
    assert pq.read_table(EXAMPLES).equals(script.examples_table())


@pytest.mark.parametrize(("label", "grade"), [("E", 3), ("S", 2), ("C", 1), ("I", 0)])
def test_esci_labels_map_to_grades(label: str, grade: int) -> None:
    assert ESCI_GRADES[label] == grade
    assert esci_grade(label, "q/p") == grade


@pytest.mark.parametrize("label", ["X", "e", "Exact", None, 3])
def test_unknown_esci_label_is_invalid(label: object) -> None:
    with pytest.raises(InvalidRecord, match="esci_label"):
        esci_grade(label, "q/p")


def test_small_us_records() -> None:
    result = _load()
    _reconciles(result)
    assert [p["product_id"] for p in result.products] == [
        "B000SHOE01",
        "B000LAMP02",
        "B000CABL04",
        "B000UNJD07",
    ]
    shoe = result.products[0]
    assert shoe == {
        "product_id": "B000SHOE01",
        "title": "Trail Running Shoe, Red",
        "description": "<p>Light trail shoe.</p>",
        "bullet_points": ["Breathable mesh upper", "Rubber outsole", "True to size"],
        "brand": "Stridex",
        "color": "Red",
        "category_path": [],
        "aspects": {"brand": ["Stridex"], "color": ["Red"]},
        "locale": "us",
    }
    assert result.products[1]["aspects"] == {}
    assert [(q["query_id"], q["text"]) for q in result.queries] == [
        ("101", "red trail shoes"),
        ("102", "desk lamp"),
    ]
    assert [(j["query_id"], j["product_id"], j["grade"], j["label"]) for j in result.judgments] == [
        ("101", "B000SHOE01", 3, "E"),
        ("101", "B000LAMP02", 2, "S"),
        ("102", "B000LAMP02", 0, "I"),
        ("102", "B000CABL04", 1, "C"),
    ]
    assert result.positive_min_grade == 3  # Exact only, as madral-reproducibility-ecir24 §7
    assert result.gain_map is None


def test_small_us_counts_and_skips() -> None:
    counts = _load().counts
    assert counts["products"].to_json() == {
        "rows_in": 10,
        "records_out": 4,
        "rejected": 4,
        "skipped": {"product_locale is not 'us'": 2},
    }
    assert counts["judgments"].skipped == {"not in the small version": 1, "product_locale is not 'us'": 2}
    assert counts["queries"].skipped["repeat of a query already emitted"] == 4
    assert counts["judgments"].rows_in == counts["queries"].rows_in == 14


def test_bad_rows_become_dead_letters_naming_the_row() -> None:
    result = _load()
    products, examples = PRODUCTS.name, EXAMPLES.name
    assert "'title' is missing" in _reason_at(result, "products", f"{products} row 3")
    assert "'product_id'" in _reason_at(result, "products", f"{products} row 4")
    assert "repeats the id" in _reason_at(result, "products", f"{products} row 6")
    assert "product_locale" in _reason_at(result, "products", f"{products} row 9")
    assert "got 'X'" in _reason_at(result, "judgments", f"{examples} row 8")
    assert "repeats" in _reason_at(result, "judgments", f"{examples} row 11")
    assert "small_version" in _reason_at(result, "judgments", f"{examples} row 12")
    assert "small_version" in _reason_at(result, "queries", f"{examples} row 12")  # one letter per stream
    assert "'text' is missing" in _reason_at(result, "queries", f"{examples} row 10")
    assert "differs from an earlier row" in _reason_at(result, "queries", f"{examples} row 13")
    assert "'validation'" in _reason_at(result, "queries", f"{examples} row 14")
    # Judgments whose product (empty title) or query (empty text, bad split) was rejected.
    dangling = {d.record_id for d in result.dead_letters if "was not loaded" in d.reason}
    assert dangling == {"101/B000BLNK03", "104/B000SHOE01", "105/B000CABL04"}
    raw = next(d.raw for d in result.dead_letters if d.reason.startswith(f"{EXAMPLES.name} row 8:"))
    assert raw["esci_label"] == "X" and raw["example_id"] == 8  # the row as read, for the audit


def test_locale_filter() -> None:
    result = _load(locale="es")
    _reconciles(result)
    assert [(p["product_id"], p["title"], p["locale"]) for p in result.products] == [
        ("B000SHOE01", "Zapatilla de trail, roja", "es")
    ]
    assert [q["query_id"] for q in result.queries] == ["201"]
    assert [(j["query_id"], j["product_id"], j["grade"]) for j in result.judgments] == [
        ("201", "B000SHOE01", 3)
    ]
    assert result.counts["judgments"].skipped["product_locale is not 'es'"] == 13


def test_large_version_filter() -> None:
    result = _load(version="large")
    _reconciles(result)
    assert ("103", "B000CABL04") in {(j["query_id"], j["product_id"]) for j in result.judgments}
    assert result.counts["judgments"].skipped["not in the large version"] == 1  # row 14: small only
    assert "large_version" in " ".join(_reasons(result, "judgments"))
    small_pairs = {(j["query_id"], j["product_id"]) for j in _load().judgments}
    assert ("103", "B000CABL04") not in small_pairs


def test_judged_catalog_keeps_only_judged_products() -> None:
    result = _load(catalog="judged")
    _reconciles(result)
    assert "B000UNJD07" not in {p["product_id"] for p in result.products}
    assert result.counts["products"].skipped["not judged in the small version"] == 1


def test_float_gains_are_exposed_and_stay_float() -> None:
    result = _load(gains="esci_float")
    assert result.gain_map == {3: 1.0, 2: 0.1, 1: 0.01, 0: 0.0} == dict(ESCI_FLOAT_GAINS)
    assert all(isinstance(gain, float) for gain in result.gain_map.values())
    assert [j["grade"] for j in result.judgments] == [j["grade"] for j in _load().judgments]


def test_splits_keep_test_and_carve_valid_from_train_by_hash() -> None:
    by_id = {q["query_id"]: q["split"] for q in _load().queries}
    assert by_id["102"] == "test"
    assert by_id["101"] == HashSplit(valid_fraction=0.17).assign("101")
    assert {q["split"] for q in _load(valid_fraction=1.0).queries} == {"valid", "test"}
    assert {q["query_id"]: q["split"] for q in _load(valid_fraction=0.0).queries} == {
        "101": "train",
        "102": "test",
    }


def test_batch_size_does_not_change_the_result() -> None:
    one, default = _load(batch_size=1), _load()
    assert one.products == default.products
    assert one.queries == default.queries
    assert one.judgments == default.judgments
    assert [d.reason for d in one.dead_letters] == [d.reason for d in default.dead_letters]


def test_missing_column_is_a_file_error(tmp_path: Path) -> None:
    table = pq.read_table(EXAMPLES).drop_columns(["esci_label"])
    pq.write_table(table, tmp_path / "examples.parquet")
    with pytest.raises(ValueError, match="esci_label"):
        load_esci(PRODUCTS, tmp_path / "examples.parquet")


def test_extra_columns_are_not_read(tmp_path: Path) -> None:
    table = pq.read_table(PRODUCTS)
    table = table.append_column("product_image", table.column("product_id"))
    pq.write_table(table, tmp_path / "products.parquet")
    assert load_esci(tmp_path / "products.parquet", EXAMPLES).products == _load().products


@pytest.mark.parametrize(
    "config",
    [{"locale": "en"}, {"version": "medium"}, {"gains": "float"}, {"valid_fraction": 1.5}, {"batch_size": 0}],
)
def test_config_rejects_unknown_values(config: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        EsciConfig(**config)  # type: ignore[arg-type]


def test_product_converter_is_usable_alone() -> None:
    row = {
        "product_id": "B1",
        "product_title": "Cup",
        "product_bullet_point": "a\r\nb",
        "product_locale": "us",
    }
    assert esci_product(row)["bullet_points"] == ["a", "b"]
    with pytest.raises(InvalidRecord, match="bullet_points"):
        esci_product({**row, "product_bullet_point": 7})
