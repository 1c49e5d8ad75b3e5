"""Reading catalogs, queries and judgments into validated records, with dead letters.

Parquet is read through Beam's FileSystems, so a path may be local or gs://.
Invalid records never stop a pipeline: they leave on the `dead_letters` output
with the reason, and counters record how many went each way.

Large catalogs are read row group by row group (`ListRowGroups`, `read_row_group`):
a row group is a small work item that several passes of one job can share, a
record's (file, row) position comes for free, and a pass that needs one column
(the ids) decodes only that column.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, NamedTuple

import apache_beam as beam
import pyarrow as pa
import pyarrow.parquet as pq
from apache_beam import pvalue
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics import Metrics

from schemas import InvalidRecord

VALID = "valid"
DEAD_LETTERS = "dead_letters"
METRICS_NAMESPACE = "madr"


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
    def __init__(self, kind: str, validate: Callable[[Mapping[str, Any]], dict[str, Any]]) -> None:
        self.kind = kind
        self.validate = validate
        plural = PLURALS.get(kind, f"{kind}s")
        self.read = Metrics.counter(METRICS_NAMESPACE, f"{plural}_read")
        self.rejected = Metrics.counter(METRICS_NAMESPACE, f"{plural}_dead_lettered")

    def process(self, record: Mapping[str, Any]) -> Iterator[Any]:
        self.read.inc()
        try:
            yield self.validate(record)
        except InvalidRecord as error:
            self.rejected.inc()
            yield pvalue.TaggedOutput(
                DEAD_LETTERS, dead_letter(f"validate_{self.kind}", record, str(error), error.record_id)
            )


class RowGroup(NamedTuple):
    """One Parquet row group of one file; `first_row` is the file row number of its first record."""

    path: str
    index: int
    first_row: int


class Positioned(NamedTuple):
    """A record and where it was read, (file, row): the only thing that tells identical copies apart."""

    position: tuple[str, int]
    record: dict[str, Any]


def _open(path: str) -> Any:
    return FileSystems.open(path, "application/octet-stream", compression_type=CompressionTypes.UNCOMPRESSED)


def _row_groups(pattern: str) -> Iterator[RowGroup]:
    for metadata in sorted(FileSystems.match([pattern])[0].metadata_list, key=lambda m: m.path):
        with _open(metadata.path) as handle:
            layout = pq.ParquetFile(handle).metadata
        first_row = 0
        for index in range(layout.num_row_groups):
            yield RowGroup(metadata.path, index, first_row)
            first_row += layout.row_group(index).num_rows


class ListRowGroups(beam.PTransform):
    """A Parquet file pattern (local or gs://) -> one `RowGroup` per row group of every matching file.

    Listing happens in the pipeline, so a job can be built before its input exists; a pattern
    that matches nothing fails at construction, as Beam's ReadFromParquet does. The Reshuffle
    spreads row groups over workers (a runner would otherwise read them all where they were listed).
    """

    def __init__(self, file_pattern: str) -> None:
        super().__init__()
        self.file_pattern = file_pattern

    def expand(self, root: pvalue.PBegin) -> beam.PCollection:
        if not FileSystems.match([self.file_pattern])[0].metadata_list:
            raise FileNotFoundError(f"no files match {self.file_pattern}; check the path or glob")
        return (
            root
            | "Pattern" >> beam.Create([self.file_pattern])
            | "RowGroups" >> beam.FlatMap(_row_groups)
            | "Spread" >> beam.Reshuffle()
        )


def read_row_group(
    group: RowGroup, columns: Sequence[str] | None = None, batch_rows: int = 1024
) -> Iterator[pa.RecordBatch]:
    """The row group's records in Arrow batches of at most `batch_rows`, so that converting them to
    Python objects never holds more than one batch, whatever the row group size."""
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


def positioned_records(group: RowGroup, batch_rows: int = 1024) -> Iterator[Positioned]:
    """Every record of a row group as a dict (as Beam's ReadFromParquet gives it), with its position."""
    row = group.first_row
    for batch in read_row_group(group, batch_rows=batch_rows):
        for record in batch.to_pylist():
            yield Positioned((group.path, row), record)
            row += 1


class ReadValidatedFn(ArrowDoFn):
    """RowGroup -> Positioned valid records, and TaggedOutput(DEAD_LETTERS) for the others.

    Counted as ValidateRecords counts (`products_read`, `products_dead_lettered`, ...).
    """

    def __init__(self, kind: str, validate: Callable[[Mapping[str, Any]], dict[str, Any]]) -> None:
        super().__init__()
        self.validate = _ValidateFn(kind, validate)

    def process(self, group: RowGroup) -> Iterator[Any]:
        for positioned in positioned_records(group):
            for out in self.validate.process(positioned.record):
                if isinstance(out, pvalue.TaggedOutput):
                    yield out
                else:
                    yield Positioned(positioned.position, out)


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
