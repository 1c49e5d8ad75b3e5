"""Reading catalogs, queries and judgments into validated records, with dead letters.

Parquet is read through Beam's FileSystems, so a path may be local or gs://.
Invalid records never stop a pipeline: they leave on the `dead_letters` output
with the reason, and counters record how many went each way.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import apache_beam as beam
from apache_beam import pvalue
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
