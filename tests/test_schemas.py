"""Schemas and validation: what enters a stage, and how bad records are named."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from schemas import (
    PEOPLE_SEARCH_ASPECTS,
    PRODUCT_SCHEMA,
    QUERY_SCHEMA,
    AspectSchema,
    InvalidRecord,
    embedding_schema,
    validate_judgment,
    validate_product,
    validate_query,
)


def product(**changes: object) -> dict:
    record = {
        "product_id": "p1",
        "title": "Breville Juice Fountain",
        "description": "A juicer.",
        "bullet_points": ["850 W", " "],
        "brand": "Breville",
        "color": None,
        "category_path": ["Home", "Kitchen", "Juicers"],
        "aspects": {"category": ["Juicers"], "brand": ["Breville"]},
        "locale": "us",
    }
    record.update(changes)
    return record


def test_valid_product_is_normalised() -> None:
    clean = validate_product(product(title="  Breville Juicer  "))
    assert clean["title"] == "Breville Juicer"
    assert clean["bullet_points"] == ["850 W"]  # blank bullet dropped
    assert clean["aspects"] == {"category": ["Juicers"], "brand": ["Breville"]}


def test_arrow_map_pairs_are_accepted_as_aspects() -> None:
    clean = validate_product(product(aspects=[("color", ["Pink", ""]), ("brand", "Nike")]))
    assert clean["aspects"] == {"color": ["Pink"], "brand": ["Nike"]}


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"product_id": None}, "product without a usable id: 'product_id' must be a non-empty string"),
        ({"product_id": "  "}, "'product_id' is empty"),
        ({"title": ""}, "product 'p1': 'title' is missing or empty"),
        ({"title": 42}, "product 'p1': 'title' must be a string, got int"),
        ({"bullet_points": "one string"}, "'bullet_points' must be a list of strings"),
        ({"aspects": {"brand": [3]}}, "'aspects[brand]' must hold only strings"),
    ],
)
def test_bad_products_name_the_record_and_the_fix(changes: dict, message: str) -> None:
    with pytest.raises(InvalidRecord) as raised:
        validate_product(product(**changes))
    assert message in str(raised.value)


def test_query_and_judgment_validation() -> None:
    assert validate_query({"query_id": 7, "text": "white nike socks"})["split"] == "test"
    with pytest.raises(InvalidRecord, match="'split' must be one of"):
        validate_query({"query_id": "q", "text": "x", "split": "dev"})
    assert validate_judgment({"query_id": "q", "product_id": "p", "grade": 3})["grade"] == 3
    with pytest.raises(InvalidRecord, match=r"q/p.*'grade' must be an integer >= 0"):
        validate_judgment({"query_id": "q", "product_id": "p", "grade": 2.5})


def test_aspect_names_are_configuration() -> None:
    people = AspectSchema(PEOPLE_SEARCH_ASPECTS)
    assert list(people) == ["location", "company", "education"]
    assert AspectSchema.parse("category, brand").names == ("category", "brand")
    for bad in [(), ("Brand",), ("brand", "brand"), ("other",)]:
        with pytest.raises(ValueError):
            AspectSchema(bad)


def test_people_search_records_round_trip_through_parquet(tmp_path) -> None:
    record = validate_product(
        product(aspects={"location": ["Berlin"], "company": ["Acme", "Initech"], "education": ["TU"]})
    )
    path = tmp_path / "people.parquet"
    pq.write_table(pa.Table.from_pylist([record], schema=PRODUCT_SCHEMA), path)
    back = validate_product(pq.read_table(path).to_pylist()[0])
    assert back["aspects"] == {"location": ["Berlin"], "company": ["Acme", "Initech"], "education": ["TU"]}


def test_query_schema_and_embedding_schema() -> None:
    assert QUERY_SCHEMA.field("split").nullable is False
    schema = embedding_schema(128)
    assert schema.field("embedding").type == pa.list_(pa.float32(), 128)
    with pytest.raises(ValueError):
        embedding_schema(0)
