"""Catalog text shown on a terminal: control and bidi characters escaped, long values cut.

A title, value, id or query text comes from a catalog, a query file or a model, and a terminal obeys
what it holds: `ESC[2J` clears the screen, an OSC 8 sequence makes a link to another site, U+202E
shows the rest of the line reversed. Everything madr prints from such a source passes through
`for_terminal`; files written with --output keep the data as it is.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

# Shown at most this many characters of one value: a 1 MB title is one cut line, not a screenful.
TERMINAL_VALUE_CHARS = 300

# Unicode's bidirectional embedding, override and isolate controls, and the marks that reorder text.
BIDI_CONTROLS = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
# C0 (with tab and newline: one value is one line), DEL and C1 (0x9b is a one-byte CSI), and bidi.
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f" + "".join(sorted(BIDI_CONTROLS)) + "]")


def has_unsafe_characters(text: str) -> bool:
    """Whether `text` holds a control or bidi character a terminal would act on."""
    return _UNSAFE.search(text) is not None


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def for_terminal(value: object, limit: int = TERMINAL_VALUE_CHARS) -> str:
    """`value` as text that is safe to print: control and bidi characters as `\\x1b` / `\\u202e`, and
    cut after `limit` characters with a marker that says how many were left out."""
    text = str(value)
    cut = ""
    if len(text) > limit:
        cut = f"… [{len(text) - limit:,} more characters]"
        text = text[:limit]
    # Other format characters (zero-width joiners, soft hyphens) change no more than a letter does: kept.
    return _UNSAFE.sub(_escaped, text) + cut


def record_has_unsafe_text(record: Mapping[str, Any]) -> bool:
    """Whether a validated record holds a control or bidi character in any text field (its strings,
    lists of strings and aspect values). Such a record is kept as it is: its text is data, escaped only
    where it is printed; the stage counts it (`<kind>_with_control_characters`)."""
    for value in record.values():
        if isinstance(value, str):
            if _UNSAFE.search(value):
                return True
        elif isinstance(value, list):
            if any(isinstance(item, str) and _UNSAFE.search(item) for item in value):
                return True
        elif isinstance(value, Mapping) and any(
            record_has_unsafe_text({"values": values}) for values in value.values()
        ):
            return True
    return False


# `_UNSAFE` in RE2's syntax, for Arrow's regex kernels.
_UNSAFE_RE2 = "[\\x00-\\x1f\\x7f-\\x9f" + "".join(f"\\x{{{ord(c):x}}}" for c in sorted(BIDI_CONTROLS)) + "]"


def rows_with_unsafe_text(batch: pa.RecordBatch) -> np.ndarray:
    """For each row of `batch`, whether any of its strings (in string, list and map columns, keys and
    values) holds a control or bidi character: Arrow's regex over each column, not Python per value.

    A row without one cannot gain one in validation (which strips and NFC-normalises), so only the rows
    marked here need `record_has_unsafe_text`."""
    marked = np.zeros(batch.num_rows, dtype=bool)
    for column in batch.columns:
        for strings, rows in nested_strings(column):
            hits = (
                pc.match_substring_regex(strings, _UNSAFE_RE2).fill_null(False).to_numpy(zero_copy_only=False)
            )
            marked[rows[hits]] = True
    return marked


def nested_strings(column: pa.Array) -> Iterator[tuple[pa.Array, np.ndarray]]:
    """Each string array nested in `column`, with the row each of its values belongs to."""
    kind = column.type
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        yield column, np.arange(len(column))
    elif pa.types.is_map(kind):
        # As a list of (key, value) structs: Arrow's list kernels take no maps, and a map's `keys` ignore
        # a slice's offset where its `offsets` do not.
        entries = pa.StructArray.from_arrays([column.keys, column.items], ["key", "value"])
        pairs = pa.ListArray.from_arrays(column.offsets, entries)
        parents = pc.list_parent_indices(pairs).to_numpy()
        flat = pc.list_flatten(pairs)
        for part in (flat.field("key"), flat.field("value")):
            for strings, rows in nested_strings(part):
                yield strings, parents[rows]
    elif pa.types.is_list(kind) or pa.types.is_large_list(kind):
        parents = pc.list_parent_indices(column).to_numpy()
        for strings, rows in nested_strings(pc.list_flatten(column)):
            yield strings, parents[rows]
