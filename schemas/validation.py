"""Validation of records entering a stage.

Each ``validate_*`` function takes one raw record (a dict, as Beam's Parquet
reader or a JSON loader yields it) and returns a normalised copy, or raises
`InvalidRecord` whose message names the record and says what to fix. Stages turn
that exception into a dead letter; nothing here decides what happens to bad data.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from schemas.records import QUERY_SPLITS


class InvalidRecord(ValueError):
    """A record that cannot enter a stage. ``record_id`` is None when the id itself is bad."""

    def __init__(self, kind: str, record_id: str | None, reason: str) -> None:
        self.kind = kind
        self.record_id = record_id
        self.reason = reason
        where = f"{kind} {record_id!r}" if record_id is not None else f"{kind} without a usable id"
        super().__init__(f"{where}: {reason}")


def _required_id(record: Mapping[str, Any], field: str, kind: str) -> str:
    value = record.get(field)
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise InvalidRecord(kind, None, f"'{field}' must be a non-empty string, got {value!r}")
    text = str(value).strip()
    if not text:
        raise InvalidRecord(kind, None, f"'{field}' is empty")
    return text


def _optional_text(record: Mapping[str, Any], field: str, kind: str, rid: str) -> str | None:
    value = record.get(field)
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if not isinstance(value, str):
        raise InvalidRecord(kind, rid, f"'{field}' must be a string, got {type(value).__name__}")
    return value.strip() or None


def _text_list(value: Any, field: str, kind: str, rid: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise InvalidRecord(kind, rid, f"'{field}' must be a list of strings, got {value!r}")
    items = list(value)
    if not all(isinstance(item, str) for item in items):
        raise InvalidRecord(kind, rid, f"'{field}' must hold only strings, got {items!r}")
    return [item.strip() for item in items if item.strip()]


def normalise_aspects(value: Any, kind: str, rid: str) -> dict[str, list[str]]:
    """Accept a dict or Arrow's list of (key, values) pairs; drop empty values."""
    if value is None:
        return {}
    pairs = value.items() if isinstance(value, Mapping) else value
    aspects: dict[str, list[str]] = {}
    try:
        for name, values in pairs:
            if not isinstance(name, str) or not name:
                raise InvalidRecord(kind, rid, f"aspect name must be a non-empty string, got {name!r}")
            if isinstance(values, str):
                values = [values]
            cleaned = _text_list(values, f"aspects[{name}]", kind, rid)
            if cleaned:
                aspects[name] = cleaned
    except (TypeError, ValueError) as error:
        if isinstance(error, InvalidRecord):
            raise
        raise InvalidRecord(kind, rid, f"'aspects' must map names to lists of strings: {error}") from None
    return aspects


def validate_product(record: Mapping[str, Any]) -> dict[str, Any]:
    """A product with an id and a non-empty title; everything else optional."""
    rid = _required_id(record, "product_id", "product")
    title = _optional_text(record, "title", "product", rid)
    if title is None:
        raise InvalidRecord("product", rid, "'title' is missing or empty; every product needs a title")
    return {
        "product_id": rid,
        "title": title,
        "description": _optional_text(record, "description", "product", rid),
        "bullet_points": _text_list(record.get("bullet_points"), "bullet_points", "product", rid),
        "brand": _optional_text(record, "brand", "product", rid),
        "color": _optional_text(record, "color", "product", rid),
        "category_path": _text_list(record.get("category_path"), "category_path", "product", rid),
        "aspects": normalise_aspects(record.get("aspects"), "product", rid),
        "locale": _optional_text(record, "locale", "product", rid),
    }


def validate_query(record: Mapping[str, Any]) -> dict[str, Any]:
    """A query with an id, non-empty text and a known split."""
    rid = _required_id(record, "query_id", "query")
    text = _optional_text(record, "text", "query", rid)
    if text is None:
        raise InvalidRecord("query", rid, "'text' is missing or empty")
    split = _optional_text(record, "split", "query", rid) or "test"
    if split not in QUERY_SPLITS:
        raise InvalidRecord("query", rid, f"'split' must be one of {QUERY_SPLITS}, got {split!r}")
    return {
        "query_id": rid,
        "text": text,
        "aspects": normalise_aspects(record.get("aspects"), "query", rid),
        "split": split,
    }


def validate_judgment(record: Mapping[str, Any]) -> dict[str, Any]:
    """A (query, product, grade) triple; grades are non-negative integers."""
    qid = _required_id(record, "query_id", "judgment")
    pid = _required_id(record, "product_id", "judgment")
    grade = record.get("grade")
    if isinstance(grade, bool) or not isinstance(grade, int) or grade < 0:
        raise InvalidRecord("judgment", f"{qid}/{pid}", f"'grade' must be an integer >= 0, got {grade!r}")
    return {
        "query_id": qid,
        "product_id": pid,
        "grade": grade,
        "label": _optional_text(record, "label", "judgment", f"{qid}/{pid}"),
    }
