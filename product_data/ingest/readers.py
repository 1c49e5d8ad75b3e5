"""Raw rows out of Parquet, delimited text and JSON Lines, each labelled with where it was.

Readers never interpret columns; they only turn a file into `RawRow`s. A row that
cannot even be parsed (wrong number of fields, a line that is not UTF-8 or not a JSON
object) comes out with ``problem`` set, so the loader dead-letters it instead of the
reader crashing half-way through a file. A file that is wrong as a whole (missing a
required column, no header) raises `ValueError`: that is a wrong path or a wrong
format, not bad data, and nothing useful could be loaded from it.
"""

from __future__ import annotations

import codecs
import csv
import difflib
import json
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import pyarrow.parquet as pq


@dataclass(frozen=True)
class RawRow:
    """One source row as read. ``where`` names it for humans: ``"label.csv line 12"``."""

    where: str
    fields: Mapping[str, Any] = field(default_factory=dict)
    problem: str | None = None


def missing_columns_message(path: Path | str, present: Sequence[str], wanted: Collection[str]) -> str | None:
    """None when every wanted column is present; else what is missing, each with the nearest present name."""
    missing = [name for name in wanted if name not in present]
    if not missing:
        return None
    nearest = []
    for name in missing:
        close = difflib.get_close_matches(name, list(present), n=1, cutoff=0.6)
        nearest.append(f"{name!r} (nearest: {close[0]!r})" if close else repr(name))
    return (
        f"{path} lacks the mapped column(s) {', '.join(nearest)}; its columns are {list(present)}: fix the "
        "mapping's column name"
    )


# Delimiters a spreadsheet export uses besides the comma (a Dutch or German Excel writes ';').
_OTHER_DELIMITERS = (";", "\t", "|")


def _check_columns(
    path: Path, present: Sequence[str], required: Collection[str], delimiter: str = ","
) -> None:
    message = missing_columns_message(path, present, required)
    if not message:
        return
    # One column whose name holds another delimiter: the file was split on the wrong character.
    used = [d for d in _OTHER_DELIMITERS if d != delimiter and len(present) == 1 and d in present[0]]
    if used:
        shown = "$'\\t'" if used[0] == "\t" else repr(used[0])
        raise ValueError(
            f"{path} reads as one column {present[0][:80]!r}: its fields are separated by {used[0]!r}, not "
            f"{delimiter!r}; pass --delimiter {shown}"
        )
    raise ValueError(message)


def parquet_columns(path: str | Path) -> list[str]:
    """Column names from the footer alone (no data is read)."""
    return list(pq.ParquetFile(path).schema_arrow.names)


def read_parquet(
    path: str | Path,
    columns: Sequence[str],
    *,
    required: Collection[str] = (),
    batch_size: int = 65_536,
) -> Iterator[RawRow]:
    """Rows of the projected ``columns`` that exist, one record batch at a time.

    ESCI's examples file has millions of rows: reading it whole would hold every column of
    every row at once, while projected batches keep memory at one batch of the columns we map.
    """
    source = Path(path)
    parquet = pq.ParquetFile(source)
    present = list(parquet.schema_arrow.names)
    _check_columns(source, present, required)
    projected = [name for name in columns if name in present]
    number = 0
    for batch in parquet.iter_batches(batch_size=batch_size, columns=projected):
        for values in batch.to_pylist():
            number += 1
            yield RawRow(f"{source.name} row {number}", values)


def _decoded_lines(handle: BinaryIO, bad_lines: set[int], encoding: str) -> Iterator[str]:
    """Decode line by line so one bad byte costs one row, recorded in ``bad_lines``."""
    for number, line in enumerate(handle, start=1):
        try:
            yield line.decode(encoding)
        except UnicodeDecodeError:
            bad_lines.add(number)
            yield line.decode(encoding, "backslashreplace")


def check_encoding(encoding: str) -> str:
    """The codec's canonical name; an unknown one, or one whose lines cannot be split on b"\\n"
    (UTF-16/32), is refused with what to do."""
    try:
        name = codecs.lookup(encoding).name
    except LookupError:
        raise ValueError(f"unknown encoding {encoding!r}; e.g. utf-8, cp1252, latin-1, shift_jis") from None
    if name.startswith(("utf-16", "utf-32")):
        raise ValueError(f"{encoding}: convert the file to UTF-8 first (e.g. iconv -f {encoding} -t utf-8)")
    return name


def read_delimited(
    path: str | Path,
    *,
    delimiter: str = ",",
    required: Collection[str] = (),
    encoding: str = "utf-8",
) -> Iterator[RawRow]:
    """Rows of a delimited text file with a header line, keyed by the header's names.

    Quoting is the csv module's (and pandas') default: a field holding the delimiter, a quote or
    a newline is written in double quotes with inner quotes doubled. WANDS relies on it: its
    query 208 is stored as ``"fawkes 36"" blue vanity"``. Blank lines carry no data and are
    passed over. ``encoding`` is the file's (a spreadsheet's cp1252, say); a line it cannot
    decode becomes a dead-lettered row.
    """
    source = Path(path)
    encoding = check_encoding(encoding)
    bad_lines: set[int] = set()
    with source.open("rb") as handle:
        reader = csv.reader(_decoded_lines(handle, bad_lines, encoding), delimiter=delimiter)
        header = next(reader, None)
        if not header:
            raise ValueError(f"{source} is empty; expected a header line naming the columns")
        header = [name.strip() for name in header]
        header[0] = header[0].removeprefix("\ufeff")  # a BOM written by spreadsheet exports
        if len(set(header)) != len(header):
            raise ValueError(f"{source} header repeats a column name: {header}")
        _check_columns(source, header, required, delimiter)
        last_line = reader.line_num
        while True:
            try:
                values = next(reader)
            except StopIteration:
                return
            except csv.Error as error:  # e.g. a field over csv's size limit, or a NUL byte
                last_line = reader.line_num
                yield RawRow(f"{source.name} line {last_line}", {}, f"cannot be parsed: {error}")
                continue
            first_line, last_line = last_line + 1, reader.line_num
            where = f"{source.name} line {first_line}" + (f"-{last_line}" if last_line > first_line else "")
            if not values:
                continue
            spanned = bad_lines.intersection(range(first_line, last_line + 1))
            if spanned:
                raw = {"line": delimiter.join(values)}
                yield RawRow(where, raw, f"is not valid {encoding.upper()} (line(s) {sorted(spanned)})")
            elif len(values) != len(header):
                raw = {"line": delimiter.join(values)}
                yield RawRow(where, raw, f"has {len(values)} fields but the header has {len(header)}")
            else:
                yield RawRow(where, dict(zip(header, values, strict=True)))


def read_jsonl(path: str | Path, encoding: str = "utf-8") -> Iterator[RawRow]:
    """One JSON object per line; a line that is not one becomes a row with a problem."""
    source = Path(path)
    encoding = check_encoding(encoding)
    bad_lines: set[int] = set()
    with source.open("rb") as handle:
        for number, line in enumerate(_decoded_lines(handle, bad_lines, encoding), start=1):
            if not line.strip():
                continue
            where = f"{source.name} line {number}"
            if number in bad_lines:
                yield RawRow(where, {"line": line.rstrip("\r\n")}, f"is not valid {encoding.upper()}")
                continue
            try:
                value = json.loads(line)
            except json.JSONDecodeError as error:
                yield RawRow(where, {"line": line.rstrip("\r\n")}, f"is not valid JSON: {error}")
                continue
            if not isinstance(value, dict):
                yield RawRow(where, {"line": line.rstrip("\r\n")}, "is not a JSON object")
            else:
                yield RawRow(where, value)
