"""Reading catalogs, queries and judgments into validated records, with dead letters.

Parquet is read through Beam's FileSystems, so a path may be local or gs://.
Invalid records never stop a pipeline: they leave on the `dead_letters` output
with the reason, and counters record how many went each way.

Large catalogs are read row group by row group (`ListRowGroups`, `read_row_group`):
a row group is a small work item that several passes of one job can share, a
record's (file, row) position comes for free, and a pass that needs one column
(the ids) decodes only that column.

What cannot be read never stops a job either, and its dead letter names the file:

- a file that cannot be opened as Parquet (truncated, not Parquet at all, unreadable):
  one dead letter for the file; its footer is gone, so its rows are unknown and are not
  counted as records read (only `files_dead_lettered` counts it);
- a file without a required column (`ListRowGroups(..., required_columns)`): one dead
  letter for the file, whose rows (known from the footer) count as read and dead-lettered;
- a row group that fails to decode: one dead letter for the rest of the group (rows
  already read stay read), those rows counted as read and dead-lettered
  (`row_groups_dead_lettered` counts the group);
- a record with a string that is not valid UTF-8: a dead letter of its own.

So "read = written + dead-lettered" still holds for records, and a file of unknown size is
counted as a file. `ReadValidatedFn`, the pass that validates, is the one that emits these
dead letters and counts them; the passes that only collect keys (`batches_until_unreadable`)
skip what cannot be read, so nothing is dead-lettered or counted twice.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, NamedTuple

import apache_beam as beam
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from apache_beam import pvalue
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics import Metrics

from pipelines.io.parquet_reading import parquet_pattern
from schemas import InvalidRecord
from schemas.terminal_text import record_has_unsafe_text, rows_with_unsafe_text

VALID = "valid"
DEAD_LETTERS = "dead_letters"
METRICS_NAMESPACE = "madr"
# What `schemas.validate_product` cannot do without: a file lacking one is a dead letter as a whole.
REQUIRED_PRODUCT_COLUMNS = ("product_id", "title")
_ID_COLUMNS = {"product": "product_id", "query": "query_id"}


def dead_letter(stage: str, record: Mapping[str, Any], reason: str, record_id: str | None) -> dict[str, Any]:
    """A DEAD_LETTER_SCHEMA row: the stage, the record as JSON, and why it was rejected."""
    return {
        "stage": stage,
        "record_id": record_id,
        "reason": reason,
        "record_json": json.dumps(record, default=str, sort_keys=True),
    }


PLURALS = {"product": "products", "query": "queries", "judgment": "judgments"}


class _ValidateFn(beam.DoFn):
    def __init__(self, kind: str, validate: Callable[[Mapping[str, Any]], Any]) -> None:
        self.kind = kind
        self.validate = validate
        plural = PLURALS.get(kind, f"{kind}s")
        self.read = Metrics.counter(METRICS_NAMESPACE, f"{plural}_read")
        self.rejected = Metrics.counter(METRICS_NAMESPACE, f"{plural}_dead_lettered")
        self.control = Metrics.counter(METRICS_NAMESPACE, f"{plural}_with_control_characters")

    def process(self, record: Mapping[str, Any], screened_clean: bool = False) -> Iterator[Any]:
        """`screened_clean`: the raw record was found to hold no control or bidi character
        (`rows_with_unsafe_text`), so its validated form holds none either and is not searched again."""
        self.read.inc()
        try:
            valid = self.validate(record)
            if not screened_clean and isinstance(valid, Mapping) and record_has_unsafe_text(valid):
                self.control.inc()  # kept as data; every command prints it escaped (schemas.terminal_text)
            yield valid
        except InvalidRecord as error:
            self.rejected.inc()
            yield pvalue.TaggedOutput(
                DEAD_LETTERS, dead_letter(f"validate_{self.kind}", record, str(error), error.record_id)
            )


class RowGroup(NamedTuple):
    """One Parquet row group of one file; `first_row` is the file row number of its first record.

    A file that cannot be read is listed as one RowGroup with index -1 and the reason in `error`
    (`num_rows` is -1 where the footer could not be read), so its dead letter travels with the rest.
    """

    path: str
    index: int
    first_row: int
    num_rows: int = -1
    error: str | None = None


class UnreadableRowGroup(OSError):
    """A row group, or its whole file, that cannot be read; the message names the file."""


class Undecodable(NamedTuple):
    """A record with a string that is not valid UTF-8: the columns that hold one, and the record with
    each such value as its bytes (invalid ones escaped), for the dead letter."""

    record: dict[str, Any]
    columns: tuple[str, ...]


class Positioned(NamedTuple):
    """A record and where it was read, (file, row): the only thing that tells identical copies apart."""

    position: tuple[str, int]
    record: dict[str, Any]


def _open(path: str) -> Any:
    return FileSystems.open(path, "application/octet-stream", compression_type=CompressionTypes.UNCOMPRESSED)


def _one_line(error: BaseException) -> str:
    return " ".join(str(error).split()) or type(error).__name__


def _row_groups(pattern: str, required_columns: Sequence[str] = ()) -> Iterator[RowGroup]:
    for metadata in sorted(FileSystems.match([pattern])[0].metadata_list, key=lambda m: m.path):
        try:
            with _open(metadata.path) as handle:
                parquet = pq.ParquetFile(handle)
                layout, names = parquet.metadata, set(parquet.schema_arrow.names)
        except (OSError, pa.ArrowException) as error:
            reason = f"cannot be read as Parquet ({_one_line(error)}); its rows are unknown"
            yield RowGroup(metadata.path, -1, 0, error=reason)
            continue
        missing = [name for name in required_columns if name not in names]
        if missing:
            absent = ", ".join(map(repr, missing))
            reason = f"has no column {absent}; none of its {layout.num_rows} rows is read"
            yield RowGroup(metadata.path, -1, 0, layout.num_rows, reason)
            continue
        first_row = 0
        for index in range(layout.num_row_groups):
            rows = layout.row_group(index).num_rows
            yield RowGroup(metadata.path, index, first_row, rows)
            first_row += rows


def catalog_row_count(pattern: str, max_files: int = 200) -> int | None:
    """Rows of `pattern`'s readable files by their footers, for progress ETAs; None when more than
    `max_files` match (a footer read per file would then cost the driver more than it tells)."""
    matched = FileSystems.match([parquet_pattern(pattern)])[0].metadata_list
    if len(matched) > max_files:
        return None
    rows = 0
    for metadata in matched:
        try:
            with _open(metadata.path) as handle:
                rows += pq.ParquetFile(handle).metadata.num_rows
        except (OSError, pa.ArrowException):
            continue  # the stage itself dead-letters it, with the reason
    return rows


class ListRowGroups(beam.PTransform):
    """A Parquet file, folder or pattern (local or gs://) -> one `RowGroup` per row group of every file.

    Listing happens in the pipeline, so a job can be built before its input exists; a pattern
    that matches nothing fails at construction, as Beam's ReadFromParquet does. The Reshuffle
    spreads row groups over workers (a runner would otherwise read them all where they were listed).
    A file that cannot be opened, or lacks one of `required_columns`, is listed as one RowGroup
    carrying the reason (see `RowGroup`), never raised.
    """

    def __init__(self, file_pattern: str, required_columns: Sequence[str] = ()) -> None:
        super().__init__()
        self.file_pattern = file_pattern
        self.required_columns = tuple(required_columns)

    def expand(self, root: pvalue.PBegin) -> beam.PCollection:
        pattern = parquet_pattern(self.file_pattern)
        if not FileSystems.match([pattern])[0].metadata_list:
            raise FileNotFoundError(f"no files match {self.file_pattern}; check the path or glob")
        return (
            root
            | "Pattern" >> beam.Create([pattern])
            | "RowGroups" >> beam.FlatMap(_row_groups, self.required_columns)
            | "Spread" >> beam.Reshuffle()
        )


def read_row_group(
    group: RowGroup, columns: Sequence[str] | None = None, batch_rows: int = 1024
) -> Iterator[pa.RecordBatch]:
    """The row group's records in Arrow batches of at most `batch_rows`, so that converting them to
    Python objects never holds more than one batch, whatever the row group size.

    Raises `UnreadableRowGroup`, naming the file, for a group listed as unreadable, or when a batch
    fails to decode (after the batches before it were yielded).
    """
    if group.error:
        raise UnreadableRowGroup(f"{group.path} {group.error}")
    try:
        with _open(group.path) as handle:
            parquet = pq.ParquetFile(handle)
            # One thread: Beam parallelises over row groups already, and Arrow's reader threads each
            # keep freed buffers in a heap of their own (peak RSS grew with the row groups read).
            yield from parquet.iter_batches(
                batch_size=batch_rows,
                row_groups=[group.index],
                columns=list(columns) if columns else None,
                use_threads=False,
            )
    except (OSError, pa.ArrowException) as error:
        raise UnreadableRowGroup(
            f"{group.path}: row group {group.index} cannot be decoded ({_one_line(error)})"
        ) from error


def batches_until_unreadable(
    group: RowGroup, columns: Sequence[str] | None = None, batch_rows: int = 1024
) -> Iterator[pa.RecordBatch]:
    """`read_row_group` for passes that only collect keys (ids, hashes): an unreadable group just ends.

    `ReadValidatedFn` reads every group too and dead-letters (and counts) what cannot be read, once.
    A pass that reads the same columns in the same batches stops at the same record.
    """
    try:
        yield from read_row_group(group, columns, batch_rows)
    except UnreadableRowGroup:
        return


def column_values(column: pa.Array | pa.ChunkedArray) -> list[Any]:
    """`column.to_pylist()`, with None for a string that is not valid UTF-8 (which would raise)."""
    try:
        return column.to_pylist()
    except UnicodeDecodeError:
        values = []
        for value in column:
            try:
                values.append(value.as_py())
            except UnicodeDecodeError:
                values.append(None)
        return values


def _escaped(value: pa.Scalar) -> str:
    if pa.types.is_string(value.type) or pa.types.is_large_string(value.type):
        return value.cast(pa.binary()).as_py().decode("utf-8", "backslashreplace")
    return "<holds a string that is not valid UTF-8>"  # a list or map of strings


def batch_records(batch: pa.RecordBatch) -> list[dict[str, Any] | Undecodable]:
    """The batch's records as dicts; one with a string that is not valid UTF-8 as `Undecodable`.

    Arrow's Parquet reader does not check UTF-8, so the bytes surface only here, and converting
    the whole batch would fail for all of its records: the slow path, value by value, runs only
    for a batch that holds such a string.
    """
    try:
        return batch.to_pylist()
    except UnicodeDecodeError:
        pass
    records: list[dict[str, Any] | Undecodable] = []
    for row in range(batch.num_rows):
        record, bad = {}, []
        for name, column in zip(batch.schema.names, batch.columns, strict=True):
            try:
                record[name] = column[row].as_py()
            except UnicodeDecodeError:
                bad.append(name)
                record[name] = _escaped(column[row])
        records.append(Undecodable(record, tuple(bad)) if bad else record)
    return records


class ArrowDoFn(beam.DoFn):
    """A DoFn that reads or builds Arrow data in bulk: its worker process allocates Arrow memory
    with the system allocator.

    pyarrow's default pool, mimalloc, keeps the freed buffers of the many short-lived row groups
    and record batches instead of giving them back: reading 300k products by row group held
    ~60 MB more at the end than at 10k (about 15 MB more with the system pool). The pool is
    process-wide, so this changes it for the whole worker (and, on the in-process local runner,
    for the driver): Arrow works the same, its freed memory just goes back to the system.
    """

    def setup(self) -> None:
        pa.set_memory_pool(pa.system_memory_pool())


class ReadValidatedFn(ArrowDoFn):
    """RowGroup -> Positioned valid records, and TaggedOutput(DEAD_LETTERS) for the others.

    Counted as ValidateRecords counts (`products_read`, `products_dead_lettered`, ...), plus
    `files_dead_lettered` and `row_groups_dead_lettered`; the module docstring gives the rules for
    what cannot be read. `columns`, if given, are the only ones decoded (one a file lacks is left
    out of its records: list the ones it must have as `ListRowGroups`' required_columns).
    """

    def __init__(
        self,
        kind: str,
        validate: Callable[[Mapping[str, Any]], Any],
        columns: Sequence[str] | None = None,
    ) -> None:
        super().__init__()
        self.kind = kind
        self.validate = _ValidateFn(kind, validate)
        self.columns = tuple(columns) if columns else None
        self.files = Metrics.counter(METRICS_NAMESPACE, "files_dead_lettered")
        self.groups = Metrics.counter(METRICS_NAMESPACE, "row_groups_dead_lettered")

    def process(self, group: RowGroup) -> Iterator[Any]:
        done = 0
        try:
            for batch in read_row_group(group, self.columns):
                records = batch_records(batch)
                # Screened column-wise where every string decoded: most rows then skip the search per value.
                decoded = not any(isinstance(record, Undecodable) for record in records)
                unsafe = rows_with_unsafe_text(batch) if decoded else np.ones(len(records), dtype=bool)
                for record, marked in zip(records, unsafe.tolist(), strict=True):
                    position = (group.path, group.first_row + done)
                    done += 1
                    if isinstance(record, Undecodable):
                        yield self._undecodable(position, record)
                        continue
                    for out in self.validate.process(record, screened_clean=not marked):
                        yield out if isinstance(out, pvalue.TaggedOutput) else Positioned(position, out)
        except UnreadableRowGroup as error:
            yield self._unreadable(group, done, str(error))

    def _undecodable(self, position: tuple[str, int], bad: Undecodable) -> pvalue.TaggedOutput:
        self.validate.read.inc()
        self.validate.rejected.inc()
        columns = ", ".join(map(repr, bad.columns))
        path, row = position
        reason = f"{path} row {row}: {columns} is not valid UTF-8; fix the encoding at the source"
        id_column = _ID_COLUMNS.get(self.kind)
        raw_id = bad.record.get(id_column) if id_column and id_column not in bad.columns else None
        record_id = None if raw_id is None else str(raw_id)
        letter = dead_letter(f"read_{self.kind}", bad.record, reason, record_id)
        return pvalue.TaggedOutput(DEAD_LETTERS, letter)

    def _unreadable(self, group: RowGroup, done: int, reason: str) -> pvalue.TaggedOutput:
        rows = group.num_rows - done if group.num_rows >= 0 else None
        # Rows the footer vouches for count as read and dead-lettered; a file without a footer as a file.
        self.validate.read.inc(rows or 0)
        self.validate.rejected.inc(rows or 0)
        (self.files if group.index < 0 else self.groups).inc()
        record = {
            "file": group.path,
            "row_group": group.index if group.index >= 0 else None,
            "first_row": group.first_row + done,
            "rows": rows,
        }
        return pvalue.TaggedOutput(DEAD_LETTERS, dead_letter(f"read_{self.kind}", record, reason, None))


class ValidateRecords(beam.PTransform):
    """dict records -> (`valid`: normalised dicts, `dead_letters`: DEAD_LETTER_SCHEMA rows)."""

    def __init__(self, kind: str, validate: Callable[[Mapping[str, Any]], dict[str, Any]]) -> None:
        super().__init__()
        self.kind = kind
        self.validate = validate

    def expand(self, records: beam.PCollection) -> pvalue.DoOutputsTuple:
        return records | beam.ParDo(_ValidateFn(self.kind, self.validate)).with_outputs(
            DEAD_LETTERS, main=VALID
        )


class WriteDeadLetters(beam.PTransform):
    """Dead letters as JSON lines, one file set per stage output folder."""

    def __init__(self, path_prefix: str) -> None:
        super().__init__()
        self.path_prefix = path_prefix

    def expand(self, dead_letters: beam.PCollection) -> pvalue.PDone:
        return (
            dead_letters
            | beam.Map(lambda row: json.dumps(row, sort_keys=True))
            | beam.io.WriteToText(
                self.path_prefix, file_name_suffix=".jsonl", shard_name_template="-SSSSS-of-NNNNN"
            )
        )
