"""Validation of records entering a stage.

Each ``validate_*`` function takes one raw record (a dict, as Beam's Parquet
reader or a JSON loader yields it) and returns a normalised copy, or raises
`InvalidRecord` whose message names the record and says what to fix. Stages turn
that exception into a dead letter; nothing here decides what happens to bad data.

The rules protect what reads our outputs (indexes, serving systems, logs, the
model). tests/test_validation_rules.py tests each one alone.

Ids (``product_id``, ``query_id`` and both ids of a judgment)
    I1  a string or an integer, not a bool; surrounding whitespace is stripped; not empty.
    I2  printable (Python's `str.isprintable`): no control characters (newline, tab, NUL, ...),
        no invisible format characters (zero-width characters, the byte-order mark, bidi controls
        such as U+202E RIGHT-TO-LEFT OVERRIDE), no separators but the ASCII space, no surrogates,
        private-use or unassigned code points. A newline splits a log or JSONL line; a bidi
        override makes an id display as another id.
    I3  at most 256 bytes of UTF-8: ids are keys of indexes and serving systems that cap them.
    Ids are not otherwise normalised (no NFC): they join products, judgments and the previous
    run's rows, and must stay byte for byte what the source system sent.

Text (title, description, bullet points, brand, color, category path, aspect values,
query text, split, locale, judgment label)
    T1  NFC normalised, then stripped: the same words typed composed or decomposed must give
        the same content hash, aspect value and tokens. Every stage embeds the text these
        functions return, so the model reads the NFC text.
    T2  no NUL (U+0000) anywhere: NUL never occurs in text, it marks a binary or truncated
        field, and C-string consumers cut the text there. The record is rejected.
    T3  no lone surrogate: such text cannot be written as UTF-8 (Parquet, JSON, hashes).
    T4  a value without a visible character (only whitespace, zero-width or other format or
        control characters) counts as missing: an optional field becomes None, a list drops
        it, and a product without a visible title or a query without visible text is rejected.
"""

from __future__ import annotations

import math
import re
import reprlib
import unicodedata
from collections.abc import Iterable, Mapping
from typing import Any

from schemas.records import QUERY_SPLITS

MAX_ID_BYTES = 256
# Characters that never make a value visible (rule T4): controls and invisible format characters.
_INVISIBLE_CATEGORIES = frozenset({"Cc", "Cf"})
_FORBIDDEN_IN_TEXT = re.compile("[\x00\ud800-\udfff]")
# In ASCII text the visible characters are exactly "!" to "~": the rest are spaces or controls (Cc).
_ASCII_VISIBLE = re.compile("[!-~]")
# unicodedata has no names for control characters; these are the ones data is seen to carry.
_CONTROL_NAMES = {"\x00": "NUL", "\t": "TAB", "\n": "LINE FEED", "\r": "CARRIAGE RETURN"}
_CATEGORY_NAMES = {
    "Cc": "a control character",
    "Cf": "an invisible format character: zero-width, bidi control or byte-order mark",
    "Cs": "a lone surrogate, not valid Unicode",
    "Co": "a private-use character",
    "Cn": "an unassigned code point",
    "Zl": "a line separator",
    "Zp": "a paragraph separator",
    "Zs": "a space other than U+0020",
}


class InvalidRecord(ValueError):
    """A record that cannot enter a stage. ``record_id`` is None when the id itself is bad."""

    def __init__(self, kind: str, record_id: str | None, reason: str) -> None:
        self.kind = kind
        self.record_id = record_id
        self.reason = reason
        where = f"{kind} {record_id!r}" if record_id is not None else f"{kind} without a usable id"
        super().__init__(f"{where}: {reason}")


def describe_character(char: str) -> str:
    """'U+202E RIGHT-TO-LEFT OVERRIDE (an invisible format character: ...)', for messages."""
    name = unicodedata.name(char, _CONTROL_NAMES.get(char, ""))
    kind = _CATEGORY_NAMES.get(unicodedata.category(char))
    return f"U+{ord(char):04X} {name}".strip() + (f" ({kind})" if kind else "")


_REPR = reprlib.Repr()
_REPR.maxstring = _REPR.maxother = 60


def _shown(value: Any) -> str:
    # A short repr: it escapes controls and bidi characters, so a message (and the log line or dead
    # letter that carries it) never reproduces the damage it reports, nor 10,000 characters of it.
    return _REPR.repr(value)


def clean_id(value: Any, field: str, kind: str) -> str:
    """An id as rules I1-I3 accept it (stripped), or `InvalidRecord` naming the rule it breaks."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise InvalidRecord(kind, None, f"'{field}' must be a non-empty string, got {_shown(value)}")
    text = str(value).strip()
    if not text:
        raise InvalidRecord(kind, None, f"'{field}' is empty")
    if not text.isprintable():
        position, char = next((n, c) for n, c in enumerate(text) if not c.isprintable())
        raise InvalidRecord(
            kind,
            None,
            f"'{field}' {_shown(text)} contains {describe_character(char)} at position {position}; "
            "ids must be printable: remove it at the source",
        )
    # Four bytes per character at most: short ids (nearly all) need no encoding to be measured.
    size = len(text) if len(text) * 4 <= MAX_ID_BYTES else len(text.encode("utf-8"))
    if size > MAX_ID_BYTES:
        raise InvalidRecord(
            kind,
            None,
            f"'{field}' {_shown(text)} is {size} bytes of UTF-8, more than the {MAX_ID_BYTES} allowed; "
            "shorten it at the source (a hash of a long id is a good id)",
        )
    return text


def _is_visible(text: str) -> bool:
    return any(not c.isspace() and unicodedata.category(c) not in _INVISIBLE_CATEGORIES for c in text)


def clean_text(value: str, field: str, kind: str, rid: str | None, item: int | None = None) -> str | None:
    """A text value as rules T1-T4 accept it, None when it has nothing visible. `item`: its position
    in the list `field` names, for the message (formatted only when there is one to write)."""
    if value.isascii() and "\x00" not in value:
        # Most catalog text, checked at C speed: ASCII is NFC already and holds no surrogate. At 46 us
        # a product, the general path below cost a 1M-product nightly 46 s before anything was embedded.
        text = value.strip()
        # Stripped, it starts with a non-space: visible unless that is a control and nothing after is visible.
        if text and ("!" <= text[0] <= "~" or _ASCII_VISIBLE.search(text)):
            return text
        return None
    if item is not None:
        field = f"{field}[{item}]"
    forbidden = _FORBIDDEN_IN_TEXT.search(value)
    if forbidden:
        fix = (
            "the field is binary or was cut short; fix the source's export"
            if forbidden.group() == "\x00"
            else "the source's text encoding is broken; re-export it as UTF-8"
        )
        char = describe_character(forbidden.group())
        raise InvalidRecord(kind, rid, f"'{field}' contains {char} at position {forbidden.start()}: {fix}")
    text = unicodedata.normalize("NFC", value).strip()
    return text if _is_visible(text) else None


def _required_id(record: Mapping[str, Any], field: str, kind: str) -> str:
    return clean_id(record.get(field), field, kind)


def _optional_text(record: Mapping[str, Any], field: str, kind: str, rid: str) -> str | None:
    value = record.get(field)
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if not isinstance(value, str):
        raise InvalidRecord(kind, rid, f"'{field}' must be a string, got {type(value).__name__}")
    return clean_text(value, field, kind, rid)


def _required_text(record: Mapping[str, Any], field: str, kind: str, rid: str, need: str) -> str:
    text = _optional_text(record, field, kind, rid)
    if text is not None:
        return text
    raw = record.get(field)
    if isinstance(raw, str) and raw.strip():  # whitespace alone reads as empty, zero-width does not
        problem = "has no visible character (only whitespace, zero-width or control characters)"
    else:
        problem = "is missing or empty"
    raise InvalidRecord(kind, rid, f"'{field}' {problem}{need}")


def _text_list(value: Any, field: str, kind: str, rid: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise InvalidRecord(kind, rid, f"'{field}' must be a list of strings, got {value!r}")
    items = value if isinstance(value, list) else list(value)
    cleaned = []
    for n, item in enumerate(items):
        if not isinstance(item, str):
            raise InvalidRecord(kind, rid, f"'{field}' must hold only strings, got {items!r}")
        text = clean_text(item, field, kind, rid, n)
        if text is not None:
            cleaned.append(text)
    return cleaned


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
    """A product with an id and a visible title; everything else optional."""
    rid = _required_id(record, "product_id", "product")
    return {
        "product_id": rid,
        "title": _required_text(record, "title", "product", rid, "; every product needs a title"),
        "description": _optional_text(record, "description", "product", rid),
        "bullet_points": _text_list(record.get("bullet_points"), "bullet_points", "product", rid),
        "brand": _optional_text(record, "brand", "product", rid),
        "color": _optional_text(record, "color", "product", rid),
        "category_path": _text_list(record.get("category_path"), "category_path", "product", rid),
        "aspects": normalise_aspects(record.get("aspects"), "product", rid),
        "locale": _optional_text(record, "locale", "product", rid),
    }


def validate_query(record: Mapping[str, Any]) -> dict[str, Any]:
    """A query with an id, visible text and a known split."""
    rid = _required_id(record, "query_id", "query")
    text = _required_text(record, "text", "query", rid, "; every query needs the words it searches")
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
