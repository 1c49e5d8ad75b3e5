"""Products a batch at a time: rows that validation keeps as read stay in Arrow, the rest are validated.

`ReadValidatedFn` turns every row into a dict and validates it (tens of µs a product in Python).
`ReadValidatedBatchesFn` first asks a column-wise screen (`schemas.product_columns.plain_product_rows`)
which rows validation would return unchanged; those stay in the Arrow batch, and only the others are
converted and validated record by record, with the same counters, dead letters and reasons. What cannot
be read is dead-lettered as `ReadValidatedFn` does (see `pipelines.io.catalog_io`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa
from apache_beam import pvalue

from pipelines.io.catalog_io import (
    ReadValidatedFn,
    RowGroup,
    Undecodable,
    UnreadableRowGroup,
    batch_records,
    read_row_group,
)
from schemas.terminal_text import rows_with_unsafe_text


class ValidatedBatch(NamedTuple):
    """One Arrow batch of a row group, validated. Its valid records are of two kinds: `plain`, the batch
    rows that validation keeps as read (left in `batch`), and `validated`, the other valid rows with the
    records validation returned. Rows are indices into `batch`; invalid ones left as dead letters."""

    path: str
    first_row: int  # the file row of the batch's row 0
    batch: pa.RecordBatch
    plain: np.ndarray
    validated: list[tuple[int, dict[str, Any]]]

    def position(self, row: int) -> tuple[str, int]:
        """Where the batch's row `row` was read: (file, row), as `catalog_io.Positioned` has it."""
        return self.path, self.first_row + row


class ReadValidatedBatchesFn(ReadValidatedFn):
    """RowGroup -> `ValidatedBatch`es, and TaggedOutput(DEAD_LETTERS) for the invalid and unreadable.

    `screen(batch)` says, per row, whether `validate(record)` would return the row's values unchanged and
    add nothing to the control-character count: those rows are counted as read and kept; the others take
    `ReadValidatedFn`'s record path.
    """

    def __init__(
        self,
        kind: str,
        validate: Callable[[Mapping[str, Any]], Any],
        screen: Callable[[pa.RecordBatch], np.ndarray],
        columns: Sequence[str] | None = None,
        batch_rows: int = 1024,
    ) -> None:
        super().__init__(kind, validate, columns)
        self.screen = screen
        self.batch_rows = batch_rows

    def process(self, group: RowGroup) -> Iterator[Any]:
        done = 0
        try:
            for batch in read_row_group(group, self.columns, self.batch_rows):
                read = ValidatedBatch(group.path, group.first_row + done, batch, np.empty(0, np.int64), [])
                plain = self.screen(batch)
                self.validate.read.inc(int(np.count_nonzero(plain)))
                others = np.flatnonzero(~plain)
                if len(others):
                    yield from self._validated(read, others)
                yield read._replace(plain=np.flatnonzero(plain))
                done += batch.num_rows
        except UnreadableRowGroup as error:
            yield self._unreadable(group, done, str(error))

    def _validated(self, read: ValidatedBatch, rows: np.ndarray) -> Iterator[pvalue.TaggedOutput]:
        """The record path for `rows` of the batch: dead letters yielded, valid records added to `read`."""
        taken = read.batch.take(pa.array(rows))
        records = batch_records(taken)
        decoded = not any(isinstance(record, Undecodable) for record in records)
        unsafe = rows_with_unsafe_text(taken) if decoded else np.ones(len(records), dtype=bool)
        for row, record, marked in zip(rows.tolist(), records, unsafe.tolist(), strict=True):
            if isinstance(record, Undecodable):
                yield self._undecodable(read.position(row), record)
                continue
            for out in self.validate.process(record, screened_clean=not marked):
                if isinstance(out, pvalue.TaggedOutput):
                    yield out
                else:
                    read.validated.append((row, out))
