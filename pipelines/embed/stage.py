"""The embed stage: catalog Parquet -> validated products -> embeddings -> Parquet shards.

Composite transforms, each testable alone on a TestPipeline:

    ListRowGroups -> PlanEmbedding (read, validate, dedupe, reuse unchanged rows of --previous)
                  -> EmbedBatches (RunInference on batches of products; a failed batch is retried
                     record by record; rows leave as Arrow tables, `pipelines.embed.batches`)
                  -> WriteEmbeddings (+ the reused rows, + WriteDeadLetters)

`build_embed_pipeline` verifies the model (and --previous) against their manifests first
(`pipelines.storage.verify`), then wires them. `embed_catalog` writes into a fresh staging folder
(`staged_output.fresh_output`: a non-empty --output is refused without --overwrite), checks
that the counts reconcile (read = embedded + reused + dead-lettered), writes the
manifest last, and fails the job when the dead-letter fraction exceeds
--max_dead_letter_fraction; only a run that succeeds moves its files into --output. A
vector that is non-finite or all zeros is a dead letter too (`embedding_defect`).

A catalog file that cannot be opened, lacks a required column, or holds a row group that
cannot be decoded is a dead letter too, and so is a record with invalid UTF-8; none stops
the job (`pipelines.io.catalog_io` gives the counting rule: a file's or row group's rows count
as read and dead-lettered where its footer says how many there are).

Memory stays flat with the catalog size on Beam's local runner, which holds in memory
every PCollection that crosses a GroupByKey or a multi-input Flatten: the products go
from reading to writing in one fused step with neither (embedded and reused rows are
written as two file sets rather than flattened; inference failures leave on a side
output rather than through a second RunInference), and what the plan must know about
the whole catalog comes as small or compact side inputs (`pipelines.embed.incremental`).
Two exceptions stay: --num_shards > 0 makes Beam's writer group all rows by shard, and
dead letters are flattened (they are few, or the job fails anyway).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import NamedTuple

import apache_beam as beam
from apache_beam import pvalue
from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import PipelineOptions

from model import Side, pick_device
from model.hardware import PrecisionChoice
from model.text_encoder import resolve_precision
from pipelines.embed.batches import (
    ROWS,
    EmbedBatches,
    GatherProducts,
    ProductBatchHandler,
)
from pipelines.embed.counts import check_counts, rows_held
from pipelines.embed.incremental import (
    EMBEDDINGS_KIND,
    REUSED,
    TO_EMBED,
    PlanEmbedding,
    previous_pattern,
    reusable_previous,
)
from pipelines.inference import ModelIdentity
from pipelines.io.catalog_io import (
    DEAD_LETTERS,
    REQUIRED_PRODUCT_COLUMNS,
    ListRowGroups,
    WriteDeadLetters,
    catalog_row_count,
)
from pipelines.io.parquet_shards import WriteParquetShards
from pipelines.runner import make_pipeline
from pipelines.settings.options import EmbedSettings, ModelSettings, PredictionThreshold
from pipelines.settings.stage_config import StageOutput, nested, output_setting, settings_record
from pipelines.storage.catalog_fingerprint import CatalogFingerprint
from pipelines.storage.stage_manifests import counter_value, write_stage_manifest
from pipelines.storage.staged_output import fresh_output
from pipelines.storage.verify import model_fingerprint, verify_model
from schemas import embedding_schema

LOGGER = logging.getLogger(__name__)


class EmbedProducts(beam.PTransform):
    """Validated products -> {"rows": Arrow tables of embedding rows, "dead_letters"}: every product
    embedded, no reuse, --batch_size products a batch."""

    def __init__(self, handler: ProductBatchHandler, identity: ModelIdentity):
        super().__init__()
        self.embed = EmbedBatches(handler, identity)

    def expand(self, products: beam.PCollection) -> dict[str, beam.PCollection]:
        size = self.embed.handler.batch_size
        batches = products | "ToBatches" >> beam.ParDo(GatherProducts(self.embed.identity, size))
        return batches | self.embed


class WriteEmbeddings(beam.PTransform):
    """Embedding rows -> `<prefix>-SSSSS-of-NNNNN.parquet` shards; readers take every `embeddings*` file.

    The elements are Arrow tables in the embedding schema (`batched`: the embedded batches, the reused
    rows copied column-wise) or row dicts, gathered into row groups of about `row_group_mb`.
    """

    def __init__(
        self,
        output: str,
        dimension: int,
        num_shards: int = 0,
        row_group_mb: int = 8,
        prefix: str = "embeddings",
        batched: bool = False,
    ) -> None:
        super().__init__()
        self.output = output
        self.prefix = prefix
        self.dimension = dimension
        self.num_shards = num_shards
        self.row_group_bytes = row_group_mb * 1024 * 1024
        self.batched = batched

    def expand(self, rows: beam.PCollection) -> pvalue.PDone:
        return rows | WriteParquetShards(
            FileSystems.join(self.output, self.prefix),
            embedding_schema(self.dimension),
            batched=self.batched,
            num_shards=self.num_shards,
            row_group_bytes=self.row_group_bytes,
            # The vector, then ids, hashes, model names and a few annotations.
            row_bytes=4 * self.dimension + 512,
        )


COUNTERS = (
    "products_read",
    "products_embedded",
    "products_reused",
    "products_dead_lettered",
    "products_dropped_since_previous",
    "products_new_or_changed",
    "embeddings_invalid",
    "inference_batches",
    "files_dead_lettered",
    "row_groups_dead_lettered",
    # Kept, and printed escaped (schemas.terminal_text): text holding control or bidi characters.
    "products_with_control_characters",
)


@dataclass(frozen=True, kw_only=True)
class EmbedConfig(StageOutput):
    """One embed run: the model settings, the embed settings, and where it writes (`StageOutput`).

    Drivers build it and call `embed_catalog`; `madr embed` generates its flags from it (its `nested`
    settings' fields).
    """

    output: str = output_setting("Folder for the embedding shards, dead letters and manifest, local or gs://")
    model: ModelSettings = nested()
    embed: EmbedSettings = nested()
    # embed's own default, 0: every prediction is written (with its confidence); the readers of its values
    # (enrich, export-vertex, search) pick what counts at their DEFAULT_PREDICTION_THRESHOLD.
    threshold: PredictionThreshold = nested(PredictionThreshold, min_confidence=0.0)


class BuiltEmbed(NamedTuple):
    """What the embed manifest records of a built pipeline: the model's identity and the precision it
    encodes at (`--precision auto` resolved once, here, for the handler and the manifest alike)."""

    identity: ModelIdentity
    precision: PrecisionChoice


def build_embed_pipeline(
    config: EmbedConfig, beam_options: PipelineOptions | None = None, folder: str | None = None
) -> tuple[beam.Pipeline, BuiltEmbed]:
    """The embed pipeline, built but not run, on the runner `beam_options` names (local by default).

    It writes into `folder` (`embed_catalog` passes its staging folder), by default `config.output`.
    """
    model, settings = config.model, config.embed
    folder = folder or config.output
    # Inputs are checked here, before anything is built or written; workers trust this check.
    verify_model(model.model, config.verify)
    identity = ModelIdentity.of(model.model)
    precision = resolve_precision(model.precision, pick_device(model.device), model.runtime)
    previous_folder = reusable_previous(settings.previous, model.model, config.verify, precision.precision)
    handler = ProductBatchHandler(
        model,
        Side.DOCUMENT,
        annotate=True,
        num_threads=settings.torch_threads or None,
        abstention=config.threshold.abstention(),
        # Only new or changed products are encoded under --previous: their number is not known here.
        expected_total=None if previous_folder else catalog_row_count(settings.products),
        precision=precision,
    )

    pipeline = make_pipeline(beam_options or PipelineOptions([]))
    products = ListRowGroups(settings.products, REQUIRED_PRODUCT_COLUMNS)
    inputs = {"groups": pipeline | "ListProducts" >> products}
    if previous_folder:
        inputs["previous"] = pipeline | "ListPrevious" >> ListRowGroups(previous_pattern(previous_folder))
    plan = inputs | PlanEmbedding(identity, model.batch_size)
    ahead = settings.encodes_ahead(pick_device(model.device).type)
    embedded = plan[TO_EMBED] | EmbedBatches(handler, identity, ahead)
    write = (folder, identity.dimension, settings.num_shards, settings.row_group_mb)
    _ = embedded[ROWS] | WriteEmbeddings(*write, batched=True)
    if previous_folder:
        _ = plan[REUSED] | "WriteReused" >> WriteEmbeddings(*write, prefix="embeddings-reused", batched=True)
    _ = (
        (plan[DEAD_LETTERS], embedded[DEAD_LETTERS])
        | "AllDeadLetters" >> beam.Flatten()
        | WriteDeadLetters(FileSystems.join(folder, "dead_letters"))
    )
    return pipeline, BuiltEmbed(identity, precision)


def embed_catalog(config: EmbedConfig, beam_options: PipelineOptions | None = None) -> dict[str, int]:
    """Run the embed stage; return its counts after writing the output manifest."""
    with fresh_output(config.output, config.overwrite) as folder:
        # Before reading: what `madr search` compares with the catalog it shows titles from.
        catalog = CatalogFingerprint.maybe(config.embed.products)
        pipeline, (identity, precision) = build_embed_pipeline(config, beam_options, folder)
        result = pipeline.run()
        result.wait_until_finish()
        counts = {name: counter_value(result, name) for name in COUNTERS}
        LOGGER.info("embed counts: %s", counts)
        if counts["files_dead_lettered"] or counts["row_groups_dead_lettered"]:
            LOGGER.warning(
                "%d catalog file(s) and %d row group(s) could not be read; the dead letters name them",
                counts["files_dead_lettered"],
                counts["row_groups_dead_lettered"],
            )
        check_counts(counts, config.embed.max_dead_letter_fraction, folder)
        write_stage_manifest(
            folder,
            kind=EMBEDDINGS_KIND,
            info={
                "model_id": identity.model_id,
                "model_version": identity.model_version,
                # The model's files, as one digest: build-index and evaluate check them against it.
                "model_fingerprint": model_fingerprint(config.model.model),
                "dimension": identity.dimension,
                "precision": precision.as_json(),
                "products": config.embed.products,
                **({"products_fingerprint": catalog.to_dict()} if catalog else {}),
                "previous": config.embed.previous,
                "counts": counts,
                "settings": settings_record(config.model, config.embed, config.threshold),
            },
            rows={"embeddings*.parquet": rows_held(counts)},
        )
    return counts
