"""Nightly incremental embedding: reuse what has not changed, embed only what has.

Tonight's validated products are matched with the previous run's embedding rows by
`product_id`. For each id:

- not in tonight's catalog: dropped (it disappears from the output, counted);
- several products share the id: the duplicate rule below keeps one, the others
  become dead letters naming the id;
- same content hash, same model id and version as the previous row: the previous
  row is reused as is;
- otherwise (new, changed, or a new model version): embedded tonight.

Duplicate rule: the copy whose canonical JSON (sorted keys) sorts first is kept.
Beam guarantees no order between records, so "first seen" or "last seen" would
change from run to run; this rule gives the same winner on every runner.

How, without a join of whole records (which Beam's local runner holds in memory;
see `pipelines.embed.key_index`): products stream through `_PlanFn` once, past side inputs
that are small or compact —

- the duplicates (`pipelines.embed.dedupe`): a handful of ids and where their kept copy is;
- the previous rows this model may reuse, as 64-bit keys of (id, content hash): 16
  bytes per previous row;

and, with --previous, leave behind the same 16 bytes per product ("tonight"). The
reused rows themselves are read again from the previous shards by `_ReusedRowsFn`,
which writes exactly the rows whose product the plan skipped. A match needs both
64-bit keys to agree and neither to be shared by two ids on its side, so a wrong
reuse needs two independent 64-bit coincidences.

What still grows with the catalog, with --previous only: the two key indexes. The
local runner holds each in a few copies (combiner buffer, encoded result, side-input
state, decoded value), so re-embedding an unchanged catalog peaked at 620 MB for 10k
products and 886 MB for 1M (tiny model); Dataflow keeps side inputs in its state backend.

Which previous output may be reused at all (the same model's weights) is `reusable_previous`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any, NamedTuple

import apache_beam as beam
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from apache_beam import pvalue
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics import Metrics
from apache_beam.transforms.window import GlobalWindows
from apache_beam.utils.windowed_value import WindowedValue

from model import content_hash
from pipelines.embed.batches import ProductBatcher
from pipelines.embed.dedupe import CANDIDATES, KEPT, FindDuplicates, KeptCopy, canonical_json
from pipelines.embed.key_index import IndexKeys, KeyIndex, as_side_input, content_key, id_key
from pipelines.inference import ModelIdentity
from pipelines.io.catalog_io import METRICS_NAMESPACE, ArrowDoFn, RowGroup, dead_letter, read_row_group
from pipelines.io.parquet_reading import previous_embeddings_folder
from pipelines.io.validated_batches import ReadValidatedBatchesFn, ValidatedBatch
from pipelines.storage.verify import model_fingerprint, verified_stage_manifest
from schemas import embedding_schema, validate_product
from schemas.product_columns import plain_product_rows

TO_EMBED = "to_embed"
REUSED = "reused"
DEAD_LETTERS = "dead_letters"
TONIGHT = "tonight"

__all__ = [
    "DEAD_LETTERS",
    "EMBEDDINGS_KIND",
    "REUSED",
    "TO_EMBED",
    "PlanEmbedding",
    "canonical_json",
    "previous_pattern",
    "reusable_previous",
]


EMBEDDINGS_KIND = "madr-embeddings"
LOGGER = logging.getLogger(__name__)


def previous_pattern(folder: str) -> str:
    return FileSystems.join(folder, "embeddings-*.parquet")


def reusable_previous(previous: str | None, model_dir: str, verify: bool, precision: str) -> str | None:
    """The --previous embed output to reuse rows from (checked against its manifest), or None.

    Rows are reused only when they were made by the very weights being used: the rows' model id and
    version are names, which a retrained or adapted model may share, so the folder's model fingerprint
    must match too. Otherwise every product is embedded, with a warning (the previous run is a cache).
    Rows made at another precision are still reused (int8 and fp32 vectors of one product are within a
    cosine of about 0.98 of each other), with a warning that says how to re-embed them all.
    """
    if not previous:
        return None
    folder = previous_embeddings_folder(previous)
    manifest = verified_stage_manifest(folder, EMBEDDINGS_KIND, verify)
    recorded, current = manifest.get("model_fingerprint"), model_fingerprint(model_dir)
    if recorded and current and recorded != current:
        LOGGER.warning(
            "--previous %s was embedded by another model (fingerprint %s, not %s's %s): nothing is "
            "reused, every product is embedded",
            folder,
            recorded[:16],
            model_dir,
            current[:16],
        )
        return None
    before = (manifest.get("precision") or {}).get("precision")
    if before and before != precision:
        LOGGER.warning(
            "--previous %s was embedded at %s, tonight's products at %s: its unchanged rows are reused as "
            "they are; embed without --previous to have every row at %s",
            folder,
            before,
            precision,
            precision,
        )
    return folder


def _reusable_mask(batch: pa.RecordBatch, identity: ModelIdentity) -> np.ndarray:
    """Rows made by this model id and version, of its dimension: the only ones it may reuse."""
    same = pc.and_(
        pc.equal(batch.column("model_id"), identity.model_id),
        pc.equal(batch.column("model_version"), identity.model_version),
    )
    same = pc.and_(same, pc.equal(pc.list_value_length(batch.column("embedding")), identity.dimension))
    return same.fill_null(False).to_numpy(zero_copy_only=False)


class _PreviousKeysFn(ArrowDoFn):
    COLUMNS = ("product_id", "content_hash", "model_id", "model_version", "embedding")

    def __init__(self, identity: ModelIdentity) -> None:
        super().__init__()
        self.identity = identity

    def process(self, group: RowGroup) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        for batch in read_row_group(group, columns=self.COLUMNS, batch_rows=8192):
            mask = _reusable_mask(batch, self.identity)
            ids = batch.column("product_id").filter(mask).to_pylist()
            hashes = batch.column("content_hash").filter(mask).to_pylist()
            yield (
                np.fromiter((id_key(i) for i in ids), dtype=np.uint64, count=len(ids)),
                np.fromiter((content_key(h) for h in hashes), dtype=np.uint64, count=len(hashes)),
            )


class TonightKeys:
    """The (id key, content key) of each product a row group kept, for `IndexKeys` as two arrays."""

    def __init__(self) -> None:
        self.keys: list[np.ndarray] = []
        self.digests: list[np.ndarray] = []

    def add(self, keys: np.ndarray, digests: np.ndarray) -> None:
        self.keys.append(keys)
        self.digests.append(digests)

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        return np.concatenate(self.keys), np.concatenate(self.digests)


# Products read, validated and planned together (a batch of the row group): as arrays, their keys are
# hashed and looked up in the side inputs at once (per product, the lookups took about 12 µs; a
# 1M-product night's plan spent 12 s on them).
PLAN_CHUNK = 1024


class _Products(NamedTuple):
    """A `ValidatedBatch`'s valid products in file order: ids, the texts the model reads, batch rows."""

    ids: list[str]
    texts: list[str]
    rows: np.ndarray


class _PlanFn(ArrowDoFn):
    """Product RowGroups -> read, validate, dedupe, then embed or leave to reuse, a batch at a time.

    Reading is part of this DoFn, not a step before it, on purpose: a step of its own would
    be fused with the listing of row groups, upstream of the side inputs, and the runner
    would then hold every product it read until the side inputs are ready.

    Products are planned `PLAN_CHUNK` at a time, and those validation keeps as read never become dicts
    (`ReadValidatedBatchesFn`).
    """

    def __init__(self, identity: ModelIdentity, with_previous: bool, batch_size: int) -> None:
        super().__init__()
        self.identity = identity
        self.with_previous = with_previous
        self.batch_size = batch_size
        self.read = ReadValidatedBatchesFn(
            "product", validate_product, plain_product_rows, batch_rows=PLAN_CHUNK
        )
        self.duplicates = Metrics.counter(METRICS_NAMESPACE, "products_dead_lettered")
        self.changed = Metrics.counter(METRICS_NAMESPACE, "products_new_or_changed")

    def start_bundle(self) -> None:
        # Products to embed gathered across the bundle's row groups, so a night that changed a few
        # products of each group still sends full batches to the model.
        self.batcher = ProductBatcher(self.batch_size)

    def finish_bundle(self) -> Iterator[WindowedValue]:
        rest = self.batcher.flush()
        if rest:
            yield GlobalWindows.windowed_value(rest)

    def process(
        self,
        group: RowGroup,
        candidates: KeyIndex,
        kept: dict[str, KeptCopy],
        previous: KeyIndex | None = None,
    ) -> Iterator[Any]:
        tonight = TonightKeys()
        for read in self.read.process(group):
            if isinstance(read, pvalue.TaggedOutput):
                yield read  # an invalid or unreadable record's dead letter
            else:
                yield from self.plan(read, candidates, kept, previous, tonight)
        if tonight.keys:
            # One element per row group, not per product: a million (key, digest) elements cost the
            # runner's per-element overhead twice (the output and the combiner's add_input).
            yield pvalue.TaggedOutput(TONIGHT, tonight.arrays())

    def products(self, read: ValidatedBatch) -> _Products:
        ids, texts = self.plain_products(read)
        if not read.validated:
            return _Products(ids, texts, read.plain)
        rows = np.concatenate([read.plain, np.array([row for row, _ in read.validated], dtype=np.int64)])
        ids += [record["product_id"] for _, record in read.validated]
        texts += [self.identity.text_of(record) for _, record in read.validated]
        order = np.argsort(rows, kind="stable").tolist()  # file order, as the records were read
        return _Products([ids[n] for n in order], [texts[n] for n in order], rows[order])

    def plain_products(self, read: ValidatedBatch) -> tuple[list[str], list[str]]:
        """The ids and texts of the rows validation keeps as read, from their columns."""
        if not len(read.plain):  # the screen vouches for the plain rows' column types, not the others'
            return [], []
        plain = read.batch.take(pa.array(read.plain))
        texts = self.identity.texts_of(plain)
        if texts is None:  # a variant that reads the aspects, as validation reshapes them
            texts = [self.identity.text_of(validate_product(record)) for record in plain.to_pylist()]
        return plain.column("product_id").to_pylist(), texts

    def record(self, read: ValidatedBatch, row: int) -> dict[str, Any]:
        """The validated record of the batch's row `row` (a valid one), for a dead letter."""
        for validated_row, record in read.validated:
            if validated_row == row:
                return record
        return validate_product(read.batch.slice(row, 1).to_pylist()[0])

    def plan(
        self,
        read: ValidatedBatch,
        candidates: KeyIndex,
        kept: dict[str, KeptCopy],
        previous: KeyIndex | None,
        tonight: TonightKeys,
    ) -> Iterator[Any]:
        ids, texts, rows = self.products(read)
        hashes = [content_hash(text) for text in texts]
        keys = np.fromiter(map(id_key, ids), np.uint64, len(ids))
        digests = np.fromiter(map(content_key, hashes), np.uint64, len(texts))
        if previous is not None and self.with_previous:
            once, previous_digests = previous.values_of(keys)
            reusable = once & (previous_digests == digests)
        else:
            reusable = np.zeros(len(keys), dtype=bool)
        planned = np.ones(len(keys), dtype=bool)
        for n in np.flatnonzero(candidates.repeated_each(keys)).tolist():
            copy = kept[ids[n]]
            if copy.position != read.position(int(rows[n])):
                planned[n] = False
                self.duplicates.inc()
                reason = (
                    f"product {ids[n]!r}: duplicate product_id; kept the copy whose canonical JSON sorts "
                    f"first (content hash {copy.content_hash[:12]})"
                )
                record = self.record(read, int(rows[n]))
                yield pvalue.TaggedOutput(DEAD_LETTERS, dead_letter("dedupe", record, reason, ids[n]))
            elif not copy.sole_id:
                reusable[n] = False  # a key another id shares is never matched for reuse
        embed = np.flatnonzero(planned & ~reusable)  # the rest is unchanged: `_ReusedRowsFn` writes it
        self.changed.inc(len(embed))
        chosen = embed.tolist()
        yield from self.batcher.extend(
            [ids[n] for n in chosen], [texts[n] for n in chosen], [hashes[n] for n in chosen]
        )
        if self.with_previous:
            tonight.add(keys[planned], digests[planned])


class _ReusedRowsFn(ArrowDoFn):
    """Previous rows -> the rows `_PlanFn` decided to reuse, as they are; counts reused and dropped."""

    def __init__(self, identity: ModelIdentity) -> None:
        super().__init__()
        self.identity = identity
        self.reused = Metrics.counter(METRICS_NAMESPACE, "products_reused")
        self.dropped = Metrics.counter(METRICS_NAMESPACE, "products_dropped_since_previous")

    def process(self, group: RowGroup, tonight: KeyIndex, previous: KeyIndex) -> Iterator[pa.Table]:
        # Column-wise: the rows kept are sliced out of the Arrow batch and written as they are. As
        # Python dicts, copying 483,334 unchanged rows of 384 floats cost more than embedding the
        # 16,666 changed products of a 500,000-product night (docs/PERFORMANCE.md).
        for batch in read_row_group(group):
            ids = np.fromiter(map(id_key, batch.column("product_id").to_pylist()), np.uint64, batch.num_rows)
            hashes = batch.column("content_hash").to_pylist()
            digests = np.fromiter(map(content_key, hashes), np.uint64, batch.num_rows)
            # The plan's test, seen from this side: both keys unshared and equal.
            once_tonight, tonight_digest = tonight.values_of(ids)
            present = once_tonight | tonight.repeated_each(ids)  # in tonight's catalog, once or more
            self.dropped.inc(int(np.count_nonzero(~present)))
            once_before, previous_digest = previous.values_of(ids)
            take = _reusable_mask(batch, self.identity) & once_tonight & once_before
            take &= (tonight_digest == digests) & (previous_digest == digests)
            if take.any():
                self.reused.inc(int(np.count_nonzero(take)))
                yield embedding_table(batch.filter(pa.array(take)), self.identity.dimension)


def embedding_table(batch: pa.RecordBatch, dimension: int) -> pa.Table:
    """Rows read back from an embed output, in tonight's schema: rows written before the annotation
    columns existed read back without them, and get them empty."""
    schema = embedding_schema(dimension)
    columns = []
    for field in schema:
        if field.name not in batch.schema.names:
            columns.append(pa.nulls(batch.num_rows, field.type))
        else:
            column = batch.column(field.name)
            columns.append(column if column.type == field.type else column.cast(field.type))
    return pa.Table.from_arrays(columns, schema=schema)


class PlanEmbedding(beam.PTransform):
    """{groups: product RowGroups[, previous: previous embedding RowGroups]}
    -> {to_embed: ProductBatches of up to `batch_size`, reused: embedding rows, dead_letters: invalid and
    duplicate products}.

    Without `previous`, every kept product is embedded and `reused` is empty.
    """

    def __init__(self, identity: ModelIdentity, batch_size: int) -> None:
        super().__init__()
        self.identity = identity
        self.batch_size = batch_size

    def expand(self, inputs: dict[str, beam.PCollection]) -> dict[str, beam.PCollection]:
        duplicates = inputs["groups"] | FindDuplicates(self.identity)
        side_inputs: dict[str, Any] = {
            "candidates": as_side_input(duplicates[CANDIDATES]),
            "kept": pvalue.AsDict(duplicates[KEPT]),
        }
        previous_groups = inputs.get("previous")
        if previous_groups is not None:
            previous_index = (
                previous_groups
                | "PreviousKeys" >> beam.ParDo(_PreviousKeysFn(self.identity))
                | "IndexPrevious" >> IndexKeys()
            )
            side_inputs["previous"] = as_side_input(previous_index)
        planned = inputs["groups"] | "Plan" >> beam.ParDo(
            _PlanFn(self.identity, previous_groups is not None, self.batch_size), **side_inputs
        ).with_outputs(TONIGHT, DEAD_LETTERS, main=TO_EMBED)
        if previous_groups is None:
            reused = inputs["groups"].pipeline | "NothingReused" >> beam.Create([])
        else:
            tonight = planned[TONIGHT] | "IndexTonight" >> IndexKeys()
            reused = previous_groups | "ReusedRows" >> beam.ParDo(
                _ReusedRowsFn(self.identity),
                tonight=as_side_input(tonight),
                previous=side_inputs["previous"],
            )
        return {TO_EMBED: planned[TO_EMBED], REUSED: reused, DEAD_LETTERS: planned[DEAD_LETTERS]}
