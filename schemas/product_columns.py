"""Validation over Arrow columns: the rows of a product batch that `validate_product` returns as they are.

Validating product by product (`schemas.validation`) costs the embed stage tens of µs a product in Python:
converting the batch to dicts, then a dozen string checks per record. Nearly every row of a catalog is
already clean, and for such a row validation changes nothing. `plain_product_rows` finds those rows with
Arrow's kernels, column by column; only the others take the record path, so every rule, message and dead
letter stays the one `validate_product` gives.

A row is plain when each of its strings (ids, text fields, list items, aspect names and values) is printable
ASCII that starts and ends with a visible character, its id fits `MAX_ID_BYTES`, and its columns have the
types of `PRODUCT_SCHEMA`. For such a row, by rules I1-I3 and T1-T4:

- nothing is stripped, normalised or dropped (ASCII is NFC; no leading or trailing space; none is empty or
  invisible), so `product_id`, `title`, `description`, `bullet_points`, `brand`, `color`, `category_path`
  and `locale` are the values read (an absent column or a null value reads as validation's None or []);
- nothing is rejected (no NUL, surrogate, control character or empty required field);
- it holds no control or bidi character, so it adds nothing to `products_with_control_characters`.

Other columns are not validated, but the reader dead-letters a record holding a string that is not valid
UTF-8 in any column, so a row is plain only where every other column's strings decode.

An aspect column is checked, never used: a plain row's aspects may still be reshaped by validation (a
value list left empty is dropped, a repeated name keeps its last values), so what reads a plain row's
aspects takes them from `validate_product`. tests/test_product_columns.py checks every claim above
against `validate_product` on awkward values.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from schemas.terminal_text import nested_strings
from schemas.validation import MAX_ID_BYTES

# Printable ASCII ("!" to "~" and the space), a visible character first and last: validation keeps it as is.
_CLEAN_TEXT = "^[!-~](?:[ -~]*[!-~])?$"
_REQUIRED = ("product_id", "title")
_OPTIONAL_TEXT = ("description", "brand", "color", "locale")
_NESTED = ("bullet_points", "category_path", "aspects")


def _is_string(kind: pa.DataType) -> bool:
    return pa.types.is_string(kind) or pa.types.is_large_string(kind)


def _clean(strings: pa.Array) -> np.ndarray:
    """Per value: clean text as validation keeps it; False for a null (a nested null is rejected)."""
    # ASCII first: a value that is not valid UTF-8 is not ASCII, and never reaches the regex.
    ascii_only = pc.string_is_ascii(strings).fill_null(False).to_numpy(zero_copy_only=False)
    if not ascii_only.any():
        return ascii_only
    matched = pc.match_substring_regex(strings, _CLEAN_TEXT).fill_null(False).to_numpy(zero_copy_only=False)
    return ascii_only & matched


def _decodes(strings: pa.Array) -> np.ndarray:
    """Per value: valid UTF-8 (or null)."""
    try:
        strings.validate(full=True)  # checks every value's UTF-8, at C speed
        return np.ones(len(strings), dtype=bool)
    except pa.ArrowInvalid:
        return pc.string_is_ascii(strings).fill_null(True).to_numpy(zero_copy_only=False)


def plain_product_rows(batch: pa.RecordBatch) -> np.ndarray:
    """For each row of `batch`, whether `validate_product` would return its values unchanged (the module
    docstring gives the rule). All False when a column has a type other than `PRODUCT_SCHEMA`'s."""
    plain = np.ones(batch.num_rows, dtype=bool)
    names = batch.schema.names
    for name in _REQUIRED:
        if name not in names or not _is_string(batch.schema.field(name).type):
            return np.zeros(batch.num_rows, dtype=bool)
        plain &= _clean(batch.column(name))
    # ASCII: one byte a character, so the byte length is the length.
    id_bytes = pc.binary_length(batch.column("product_id")).fill_null(0).to_numpy(zero_copy_only=False)
    plain &= id_bytes <= MAX_ID_BYTES
    for name in _OPTIONAL_TEXT:
        if name not in names:
            continue
        column = batch.column(name)
        if pa.types.is_null(column.type):
            continue
        if not _is_string(column.type):
            return np.zeros(batch.num_rows, dtype=bool)
        plain &= _clean(column) | column.is_null().to_numpy(zero_copy_only=False)
    for name in names:
        if name in _REQUIRED or name in _OPTIONAL_TEXT or name in _NESTED:
            continue
        for strings, rows in nested_strings(batch.column(name)):
            plain[rows[~_decodes(strings)]] = False
    for name in _NESTED:
        if name not in names:
            continue
        column = batch.column(name)
        if pa.types.is_null(column.type):
            continue
        if not _nested_type_is_expected(name, column.type):
            return np.zeros(batch.num_rows, dtype=bool)
        for strings, rows in nested_strings(column):
            plain[rows[~_clean(strings)]] = False
    return plain


def _nested_type_is_expected(name: str, kind: pa.DataType) -> bool:
    if name == "aspects":
        return (
            pa.types.is_map(kind)
            and _is_string(kind.key_type)
            and (pa.types.is_list(kind.item_type) or pa.types.is_large_list(kind.item_type))
            and _is_string(kind.item_type.value_type)
        )
    return (pa.types.is_list(kind) or pa.types.is_large_list(kind)) and _is_string(kind.value_type)
