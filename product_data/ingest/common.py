"""What one ingest run produces: validated records, dead letters, and counts that reconcile.

Every source row ends in exactly one of three places per stream (products, queries,
judgments): a record, a dead letter (bad input: the row, why, and where it was), or a
named skip (left out on purpose: another locale, another dataset version, a repeat of
a query already emitted). `StreamCounts` refuses to exist unless
``rows_in == records_out + rejected + sum(skipped)``, so nothing disappears unnoticed.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from product_data.ingest.readers import RawRow
from schemas import InvalidRecord

STREAMS: tuple[str, ...] = ("products", "queries", "judgments")
# Per stream: the record kind as `InvalidRecord` names it, and the fields that identify a record.
RECORD_KEYS: Mapping[str, tuple[str, tuple[str, ...]]] = {
    "products": ("product", ("product_id",)),
    "queries": ("query", ("query_id",)),
    "judgments": ("judgment", ("query_id", "product_id")),
}

Record = dict[str, Any]
Converter = Callable[[Mapping[str, Any]], Record]


class Skip(Exception):
    """Raised by a converter for a row left out on purpose; ``reason`` is a low-cardinality label."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class DeadLetter:
    """A row that could not become a record: where it was, why, and the row as read.

    ``to_row`` gives the columns of `schemas.DEAD_LETTER_SCHEMA`, so dead letters of
    every stage can be loaded and audited the same way.
    """

    stage: str
    record_id: str | None
    reason: str
    raw: Mapping[str, Any]

    def __post_init__(self) -> None:
        if not self.stage or not self.reason:
            raise ValueError("a dead letter needs a stage and a reason")

    def to_row(self) -> dict[str, Any]:
        return {
            "stage": self.stage,
            "record_id": self.record_id,
            "reason": self.reason,
            # default=str: Parquet rows may hold dates or decimals; the audit trail must not crash on them.
            "record_json": json.dumps(dict(self.raw), ensure_ascii=False, default=str),
        }


@dataclass(frozen=True)
class StreamCounts:
    """How the rows of one stream were accounted for; construction checks that the books balance."""

    rows_in: int
    records_out: int
    rejected: int
    skipped: Mapping[str, int] = field(default_factory=dict)
    # Values read as missing because they are an export's placeholder ("Default Title", "N/A", "-"),
    # per field: not rows, so outside the reconciliation.
    placeholders: Mapping[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        numbers = [self.rows_in, self.records_out, self.rejected, *self.skipped.values()]
        if any(isinstance(n, bool) or not isinstance(n, int) or n < 0 for n in numbers):
            raise ValueError(f"counts must be integers >= 0, got {self}")
        accounted = self.records_out + self.rejected + sum(self.skipped.values())
        if accounted != self.rows_in:
            raise ValueError(
                f"counts do not reconcile: {self.rows_in} rows in, but {self.records_out} records + "
                f"{self.rejected} rejected + {sum(self.skipped.values())} skipped = {accounted}"
            )
        object.__setattr__(self, "skipped", dict(sorted(self.skipped.items())))
        object.__setattr__(self, "placeholders", dict(sorted(self.placeholders.items())))

    def to_json(self) -> dict[str, Any]:
        return {
            "rows_in": self.rows_in,
            "records_out": self.records_out,
            "rejected": self.rejected,
            "skipped": dict(self.skipped),
            **({"placeholders_read_as_missing": dict(self.placeholders)} if self.placeholders else {}),
        }


class StreamTally:
    """Accounts for one stream while its rows are read; `counts` freezes the result.

    One source row may feed several streams (an ESCI examples row is both a query and
    a judgment), so the tally works row by row (`attempt`) rather than owning the loop.
    """

    def __init__(self, stage: str) -> None:
        self.stage = stage
        self.dead_letters: list[DeadLetter] = []
        self._rows_in = 0
        self._records_out = 0
        self._skipped: Counter[str] = Counter()
        # Placeholder values a converter read as missing, per field (`ColumnMapping.convert`).
        self.placeholders: Counter[str] = Counter()

    def attempt(self, row: RawRow, convert: Converter) -> Record | None:
        """Convert one row; a bad row becomes a dead letter, a skipped row a named count, never an exception.

        TypeError/ValueError are caught besides `InvalidRecord` because a converter meeting a value of
        an unexpected type (a list where a string was promised) is bad input too, not a reason to stop.
        """
        self._rows_in += 1
        if row.problem is not None:
            self._reject(None, f"{row.where}: {row.problem}", row.fields)
            return None
        try:
            record = convert(row.fields)
        except Skip as skip:
            self._skipped[skip.reason] += 1
            return None
        except (InvalidRecord, TypeError, ValueError) as error:
            self._reject(getattr(error, "record_id", None), f"{row.where}: {error}", row.fields)
            return None
        self._records_out += 1
        return record

    def route(self, rows: Iterable[RawRow], convert: Converter) -> Iterator[Record]:
        """Yield the records of a stream whose rows feed nothing else."""
        for row in rows:
            record = self.attempt(row, convert)
            if record is not None:
                yield record

    def counts(self) -> StreamCounts:
        return StreamCounts(
            self._rows_in,
            self._records_out,
            len(self.dead_letters),
            dict(self._skipped),
            dict(self.placeholders),
        )

    def _reject(self, record_id: str | None, reason: str, raw: Mapping[str, Any]) -> None:
        self.dead_letters.append(DeadLetter(self.stage, record_id, reason, dict(raw)))


class FirstWins:
    """Rejects a record whose key fields an earlier record already had: ids must be unique.

    Keeping the first and dead-lettering the rest makes a repeated id visible instead of
    letting a later row silently overwrite an earlier one downstream.
    """

    def __init__(self, kind: str, key: tuple[str, ...]) -> None:
        self.kind, self.key = kind, key
        self.seen: set[tuple[str, ...]] = set()

    @classmethod
    def of(cls, stream: str) -> FirstWins:
        return cls(*RECORD_KEYS[stream])

    def __call__(self, record: Record) -> Record:
        key = tuple(record[name] for name in self.key)
        if key in self.seen:
            raise InvalidRecord(self.kind, "/".join(key), "repeats the id of an earlier row; the first wins")
        self.seen.add(key)
        return record


@dataclass(frozen=True)
class IngestResult:
    """The records of the streams a loader read, their dead letters and counts, and what they mean.

    ``positive_min_grade`` and ``gain_map`` travel with the data into the dataset manifest because
    they are properties of the source's label scale, not of a metric: WANDS' Exact is grade 2 while
    ESCI's is grade 3, so a fixed "grade >= 2 is relevant" would count ESCI Substitutes as relevant.
    """

    source: str
    products: tuple[Record, ...] = ()
    queries: tuple[Record, ...] = ()
    judgments: tuple[Record, ...] = ()
    dead_letters: tuple[DeadLetter, ...] = ()
    counts: Mapping[str, StreamCounts] = field(default_factory=dict)
    positive_min_grade: int | None = None
    gain_map: Mapping[int, float] | None = None
    provenance: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        unknown = set(self.counts) - set(STREAMS)
        if unknown:
            raise ValueError(f"unknown streams {sorted(unknown)}; streams are {STREAMS}")
        for stream in STREAMS:
            records = getattr(self, stream)
            counts = self.counts.get(stream)
            if counts is None and records:
                raise ValueError(f"{stream} has records but no counts")
            if counts is not None and counts.records_out != len(records):
                raise ValueError(f"{stream}: counts say {counts.records_out} records, got {len(records)}")
        rejected = sum(c.rejected for c in self.counts.values())
        if rejected != len(self.dead_letters):
            raise ValueError(f"{rejected} rows rejected but {len(self.dead_letters)} dead letters")
        if self.positive_min_grade is not None and (
            isinstance(self.positive_min_grade, bool)
            or not isinstance(self.positive_min_grade, int)
            or self.positive_min_grade < 1
        ):
            raise ValueError(f"positive_min_grade must be an int >= 1, got {self.positive_min_grade!r}")
        if self.gain_map is not None:
            for grade, gain in self.gain_map.items():
                if isinstance(grade, bool) or not isinstance(grade, int) or grade < 0:
                    raise ValueError(f"gain_map grades must be integers >= 0, got {grade!r}")
                if not isinstance(gain, float) or not math.isfinite(gain) or gain < 0:
                    raise ValueError(f"gain of grade {grade} must be a finite float >= 0, got {gain!r}")

    @property
    def streams(self) -> tuple[str, ...]:
        """The streams that were read (a stream with zero records was still read if it has counts)."""
        return tuple(stream for stream in STREAMS if stream in self.counts)


def build_result(
    source: str,
    tallies: Mapping[str, StreamTally],
    records: Mapping[str, list[Record]],
    **meaning: Any,
) -> IngestResult:
    """Freeze the tallies and records of a finished load into an `IngestResult`."""
    return IngestResult(
        source=source,
        products=tuple(records.get("products", ())),
        queries=tuple(records.get("queries", ())),
        judgments=tuple(records.get("judgments", ())),
        dead_letters=tuple(letter for tally in tallies.values() for letter in tally.dead_letters),
        counts={stream: tally.counts() for stream, tally in tallies.items()},
        **meaning,
    )


def combine_results(*results: IngestResult, source: str | None = None) -> IngestResult:
    """One dataset from loads of separate files (e.g. three `load_generic` calls).

    A stream may come from one result only: merging two product streams would need a
    rule for repeated ids, which belongs to whoever chose to have two catalogs.
    """
    if not results:
        raise ValueError("combine_results needs at least one result")
    counts: dict[str, StreamCounts] = {}
    for result in results:
        for stream, stream_counts in result.counts.items():
            if stream in counts:
                raise ValueError(f"two results both hold {stream}; load each stream from one source")
            counts[stream] = stream_counts
    grades = {r.positive_min_grade for r in results if r.positive_min_grade is not None}
    gains = {tuple(sorted(r.gain_map.items())) for r in results if r.gain_map is not None}
    if len(grades) > 1 or len(gains) > 1:
        raise ValueError("results disagree on positive_min_grade or gain_map; they are not one dataset")
    return IngestResult(
        source=source or "+".join(r.source for r in results),
        products=tuple(p for r in results for p in r.products),
        queries=tuple(q for r in results for q in r.queries),
        judgments=tuple(j for r in results for j in r.judgments),
        dead_letters=tuple(d for r in results for d in r.dead_letters),
        counts=counts,
        positive_min_grade=grades.pop() if grades else None,
        gain_map=dict(gains.pop()) if gains else None,
        provenance={r.source: dict(r.provenance) for r in results},
    )


def drop_dangling_judgments(result: IngestResult) -> IngestResult:
    """Move judgments whose query or product was not emitted into the dead letters.

    A judgment on a product the catalog lacks can never be retrieved and would silently cap
    recall; one on a missing query is never evaluated. Only streams that were read are
    checked: judgments loaded without a catalog keep their product ids unverified.
    """
    if "judgments" not in result.counts:
        return result
    query_ids = {q["query_id"] for q in result.queries} if "queries" in result.counts else None
    product_ids = {p["product_id"] for p in result.products} if "products" in result.counts else None
    kept: list[Record] = []
    letters: list[DeadLetter] = []
    for judgment in result.judgments:
        missing = []
        if query_ids is not None and judgment["query_id"] not in query_ids:
            missing.append(f"query {judgment['query_id']!r}")
        if product_ids is not None and judgment["product_id"] not in product_ids:
            missing.append(f"product {judgment['product_id']!r}")
        if missing:
            what = " and ".join(missing)
            reason = f"judgment refers to {what}, which was not loaded (rejected, filtered or absent)"
            record_id = f"{judgment['query_id']}/{judgment['product_id']}"
            letters.append(DeadLetter(f"ingest.{result.source}.judgments", record_id, reason, judgment))
        else:
            kept.append(judgment)
    if not letters:
        return result
    before = result.counts["judgments"]
    after = replace(
        before, records_out=before.records_out - len(letters), rejected=before.rejected + len(letters)
    )
    return replace(
        result,
        judgments=tuple(kept),
        dead_letters=result.dead_letters + tuple(letters),
        counts={**result.counts, "judgments": after},
    )


DEFAULT_MAX_DEAD_LETTER_FRACTION = 0.5  # most rows rejected: a wrong mapping or file, not a few bad rows


def check_dead_letter_share(
    result: IngestResult, max_fraction: float = DEFAULT_MAX_DEAD_LETTER_FRACTION
) -> None:
    """Refuse a load where more than `max_fraction` of a stream's rows were dead-lettered.

    A mapping that names the wrong column, or a file in another encoding, rejects nearly every row;
    writing "dataset written" with 3 products of 400 hides it until a later stage finds the catalog
    empty. The error names the stream, the counts and the first reasons.
    """
    if not 0 <= max_fraction <= 1:
        raise ValueError(f"max_dead_letter_fraction must be in [0, 1], got {max_fraction}")
    for stream, counts in result.counts.items():
        if not counts.rows_in:
            # A header-only export (or an empty file) would write a dataset nothing can be built from.
            raise ValueError(
                f"{stream}: the file has no row (a header line alone, or nothing): export the {stream} "
                "again, or leave the file out"
            )
        if counts.rejected / counts.rows_in > max_fraction:
            reasons = [letter.reason for letter in result.dead_letters if letter.stage.endswith(stream)][:3]
            raise ValueError(
                f"{stream}: {counts.rejected} of {counts.rows_in} rows dead-lettered (more than "
                f"{max_fraction:.0%}); the first: {'; '.join(reasons)}. Check the mapping's column names "
                "and the file's --encoding, or raise --max_dead_letter_fraction to write it anyway"
            )
