"""The column-wise screen of the embed stage's read (`schemas.product_columns`) against `validate_product`.

A row the screen calls plain skips the record path: it must be one validation accepts, returns unchanged
and does not count as holding control characters, in every column type, slice and odd value below; and
the text built from its columns must be the text `document_text` builds from the validated record.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from model import document_text, document_text_column
from schemas import PRODUCT_SCHEMA, InvalidRecord, validate_product
from schemas.product_columns import plain_product_rows
from schemas.terminal_text import record_has_unsafe_text

_FIELDS = ("product_id", "title", "description", "bullet_points", "brand", "color", "category_path", "locale")
_EMPTY = {"bullet_points": [], "category_path": []}


def _product(n: int, **fields: object) -> dict:
    base = {
        "product_id": f"p{n}",
        "title": f"Trail shoe {n}",
        "description": "Light and grippy.",
        "bullet_points": ["Vibram sole", "Waterproof"],
        "brand": "Salomon",
        "color": "red",
        "category_path": ["Shoes", "Trail"],
        "aspects": {"brand": ["Salomon"], "color": ["red"]},
        "locale": "en",
    }
    return {**base, **fields}


# (fields changed, plain?): each odd value alone in an otherwise clean product.
CASES: list[tuple[dict, bool]] = [
    ({}, True),
    ({"description": None, "brand": None, "color": None, "locale": None}, True),
    ({"bullet_points": None, "category_path": None, "aspects": None}, True),
    ({"bullet_points": [], "category_path": [], "aspects": {}}, True),
    ({"title": "x"}, True),
    ({"product_id": "a" * 256}, True),
    ({"product_id": "a" * 257}, False),  # over MAX_ID_BYTES: rejected
    ({"product_id": " p1"}, False),  # stripped by validation
    ({"product_id": ""}, False),
    ({"title": "Trail shoe "}, False),
    ({"title": "   "}, False),  # nothing visible: rejected
    ({"title": ""}, False),
    ({"title": "Trail\tshoe"}, False),  # a control character: counted
    ({"title": "Caf\u00e9 chair"}, False),  # not ASCII: NFC on the record path
    ({"title": "Cafe\u0301 chair"}, False),  # decomposed: NFC changes it
    ({"title": "shoe\x00"}, False),  # NUL: rejected
    ({"title": "shoe\u200b"}, False),  # zero-width
    ({"title": "shoe\u202e"}, False),  # bidi override
    ({"title": "shoe\x7f"}, False),  # DEL
    ({"description": ""}, False),  # empty becomes None
    ({"description": " light"}, False),
    ({"brand": "Nike\n"}, False),
    ({"locale": "\u00e9"}, False),
    ({"bullet_points": ["ok", ""]}, False),  # an empty item is dropped
    ({"bullet_points": ["ok", " padded"]}, False),
    ({"bullet_points": ["ok", None]}, False),  # not a string: rejected
    ({"category_path": ["Home", "K\u00fcche"]}, False),
    ({"aspects": {"": ["x"]}}, False),  # an empty name: rejected
    ({"aspects": {"brand": ["Nike "]}}, False),
    ({"aspects": {"brand": ["Nike\x1b[2J"]}}, False),
    ({"aspects": {"brand": [None]}}, False),
    ({"aspects": {"bra\tnd": ["Nike"]}}, False),
]


def _batch(rows: list[dict]) -> pa.RecordBatch:
    return pa.RecordBatch.from_pylist(rows, schema=PRODUCT_SCHEMA)


def _kept_as_read(record: dict) -> bool:
    """What the screen promises, from `validate_product` itself: accepted, unchanged, nothing counted."""
    try:
        valid = validate_product(record)
    except InvalidRecord:
        return False
    read = {name: record.get(name) if record.get(name) is not None else _EMPTY.get(name) for name in _FIELDS}
    return all(valid[name] == read[name] for name in _FIELDS) and not record_has_unsafe_text(valid)


def test_each_odd_value_alone_makes_its_row_take_the_record_path() -> None:
    rows = [_product(n, **fields) for n, (fields, _) in enumerate(CASES)]
    plain = plain_product_rows(_batch(rows)).tolist()
    assert plain == [expected for _, expected in CASES]
    records = _batch(rows).to_pylist()
    assert all(_kept_as_read(record) for record, is_plain in zip(records, plain, strict=True) if is_plain)


@pytest.mark.parametrize(("start", "stop"), [(0, len(CASES)), (3, 20), (11, 12), (20, len(CASES))])
def test_the_screen_reads_slices_of_every_column_type(start: int, stop: int) -> None:
    rows = [_product(n, **fields) for n, (fields, _) in enumerate(CASES)]
    plain = plain_product_rows(_batch(rows).slice(start, stop - start)).tolist()
    assert plain == [expected for _, expected in CASES[start:stop]]


def test_a_column_of_another_type_sends_every_row_to_the_record_path() -> None:
    rows = [{"product_id": n, "title": "Trail shoe"} for n in range(3)]  # ints: validation makes them str
    assert plain_product_rows(pa.RecordBatch.from_pylist(rows)).tolist() == [False] * 3
    rows = [{"product_id": "p1", "title": "Trail shoe", "description": float("nan")}]  # NaN reads as None
    assert plain_product_rows(pa.RecordBatch.from_pylist(rows)).tolist() == [False]
    only_required = pa.RecordBatch.from_pylist([{"product_id": "p1", "title": "Trail shoe"}])
    assert plain_product_rows(only_required).tolist() == [True]
    assert plain_product_rows(pa.RecordBatch.from_pylist([{"product_id": "p1"}])).tolist() == [False]


def test_a_string_that_is_not_utf8_in_any_column_leaves_the_row_to_the_reader(tmp_path) -> None:
    """Arrow's Parquet reader does not check UTF-8; the record path dead-letters such a row."""
    table = pa.table(
        {
            "product_id": pa.array([b"p1", b"p2", b"p\xff"], pa.binary()).view(pa.string()),
            "title": ["Trail shoe", "Trail shoe", "Trail shoe"],
            "supplier_note": pa.array([b"ok", b"caf\xe9", b"ok"], pa.binary()).view(pa.string()),
        }
    )
    pq.write_table(table, tmp_path / "bad.parquet")
    batch = pq.read_table(tmp_path / "bad.parquet").to_batches()[0]
    assert plain_product_rows(batch).tolist() == [True, False, False]


def test_the_text_of_plain_rows_is_document_text_of_the_validated_record() -> None:
    rows = [_product(n, **fields) for n, (fields, plain) in enumerate(CASES) if plain]
    rows += [
        _product(90, bullet_points=[], description=None),
        _product(91, bullet_points=None, description="Only a description."),
        _product(92, bullet_points=["One"], description=None),
    ]
    batch = _batch(rows)
    assert plain_product_rows(batch).all()
    texts = document_text_column(batch).to_pylist()
    assert texts == [document_text(validate_product(record)) for record in batch.to_pylist()]
    assert texts[-3:] == ["Trail shoe 90", "Trail shoe 91 . Only a description.", "Trail shoe 92 . One"]
