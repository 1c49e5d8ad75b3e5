"""Nightly incremental embedding: reuse what has not changed, embed only what has.

Tonight's validated products are joined with the previous run's embedding rows by
`product_id` (CoGroupByKey). For each id:

- not in tonight's catalog: dropped (it disappears from the output, counted);
- several products share the id: the duplicate rule below keeps one, the others
  become dead letters naming the id;
- same content hash, same model id and version as the previous row: the previous
  row is reused as is;
- otherwise (new, changed, or a new model version): embedded tonight.

Duplicate rule: the copy whose canonical JSON (sorted keys) sorts first is kept.
Beam guarantees no order between records, so "first seen" or "last seen" would
change from run to run; this rule gives the same winner on every runner.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import apache_beam as beam
from apache_beam import pvalue
from apache_beam.metrics import Metrics

from model import content_hash
from model.annotations import ANNOTATION_COLUMNS
from pipelines.catalog_io import METRICS_NAMESPACE, dead_letter
from pipelines.inference import ModelIdentity, TextToEncode

TO_EMBED = "to_embed"
REUSED = "reused"
DEAD_LETTERS = "dead_letters"


def canonical_json(record: dict[str, Any]) -> str:
    return json.dumps(record, sort_keys=True, default=str)


class _PlanFn(beam.DoFn):
    def __init__(self, identity: ModelIdentity) -> None:
        self.identity = identity
        self.reused = Metrics.counter(METRICS_NAMESPACE, "products_reused")
        self.dropped = Metrics.counter(METRICS_NAMESPACE, "products_dropped_since_previous")
        self.duplicates = Metrics.counter(METRICS_NAMESPACE, "products_dead_lettered")
        self.changed = Metrics.counter(METRICS_NAMESPACE, "products_new_or_changed")

    def process(self, joined: tuple[str, dict[str, list[Any]]]) -> Iterator[Any]:
        product_id, groups = joined
        current, previous = groups["current"], groups["previous"]
        if not current:
            self.dropped.inc()
            return
        ordered = sorted(current, key=canonical_json)
        kept = ordered[0]
        for extra in ordered[1:]:
            self.duplicates.inc()
            reason = (
                f"product {product_id!r}: duplicate product_id; kept the copy whose canonical JSON sorts "
                f"first (content hash {content_hash(self.identity.text_of(kept))[:12]})"
            )
            yield pvalue.TaggedOutput(DEAD_LETTERS, dead_letter("dedupe", extra, reason, product_id))
        text = self.identity.text_of(kept)
        digest = content_hash(text)
        reusable = [
            row
            for row in previous
            if row["content_hash"] == digest
            and row["model_id"] == self.identity.model_id
            and row["model_version"] == self.identity.model_version
            and len(row["embedding"]) == self.identity.dimension
        ]
        if reusable:
            self.reused.inc()
            # Rows written before the annotation columns existed read back without them.
            row = {**dict.fromkeys(ANNOTATION_COLUMNS), **reusable[0]}
            yield pvalue.TaggedOutput(REUSED, row)
        else:
            self.changed.inc()
            yield TextToEncode(product_id, text)


class PlanEmbedding(beam.PTransform):
    """(valid products, previous embedding rows) -> {to_embed, reused, dead_letters}.

    Without a previous run, pass an empty PCollection: every product is embedded
    and duplicates are still resolved.
    """

    def __init__(self, identity: ModelIdentity) -> None:
        super().__init__()
        self.identity = identity

    def expand(self, inputs: dict[str, beam.PCollection]) -> dict[str, beam.PCollection]:
        keyed = {
            "current": inputs["products"] | "KeyProducts" >> beam.Map(lambda p: (p["product_id"], p)),
            "previous": inputs["previous"] | "KeyPrevious" >> beam.Map(lambda r: (r["product_id"], r)),
        }
        planned = (
            keyed
            | "JoinWithPrevious" >> beam.CoGroupByKey()
            | beam.ParDo(_PlanFn(self.identity)).with_outputs(REUSED, DEAD_LETTERS, main=TO_EMBED)
        )
        return {TO_EMBED: planned[TO_EMBED], REUSED: planned[REUSED], DEAD_LETTERS: planned[DEAD_LETTERS]}
