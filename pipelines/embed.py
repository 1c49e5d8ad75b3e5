"""The embed stage: catalog Parquet -> validated products -> embeddings -> Parquet shards.

Composite transforms, each testable alone on a TestPipeline:

    ReadProducts -> PlanEmbedding (dedupe, reuse unchanged rows of --previous)
                 -> EmbedTexts (RunInference; a failed batch is retried one by one)
                 -> WriteEmbeddings (+ WriteDeadLetters)

`run_embed` wires them, checks that the counts reconcile
(read = embedded + reused + dead-lettered), writes the manifest last, and fails
the job when the dead-letter fraction exceeds --max_dead_letter_fraction.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import apache_beam as beam
from apache_beam import pvalue
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics import Metrics
from apache_beam.ml.inference.base import PredictionResult, RunInference
from apache_beam.options.pipeline_options import PipelineOptions

from model import Side, content_hash
from model.annotations import ANNOTATION_COLUMNS
from pipelines.artifacts import counter_value, previous_embeddings_folder, write_stage_manifest
from pipelines.catalog_io import (
    DEAD_LETTERS,
    METRICS_NAMESPACE,
    ValidateRecords,
    WriteDeadLetters,
    dead_letter,
)
from pipelines.incremental import REUSED, TO_EMBED, PlanEmbedding
from pipelines.inference import AnnotatedEmbedding, EncoderModelHandler, ModelIdentity, TextToEncode
from pipelines.options import EmbedOptions, ModelOptions, OutputOptions
from pipelines.runner import make_pipeline, require_options
from schemas import embedding_schema, validate_product

LOGGER = logging.getLogger(__name__)
EMBEDDINGS_KIND = "madr-embeddings"


class DeadLetterThresholdExceeded(RuntimeError):
    """More records were rejected than --max_dead_letter_fraction allows."""


class ReadProducts(beam.PTransform):
    """Parquet files (local or gs://) -> (`valid` products, `dead_letters`)."""

    def __init__(self, file_pattern: str) -> None:
        super().__init__()
        self.file_pattern = file_pattern

    def expand(self, root: beam.pvalue.PBegin) -> pvalue.DoOutputsTuple:
        return (
            root | beam.io.ReadFromParquet(self.file_pattern) | ValidateRecords("product", validate_product)
        )


class _ToEmbeddingRow(beam.DoFn):
    def __init__(self, identity: ModelIdentity) -> None:
        self.identity = identity
        self.embedded = Metrics.counter(METRICS_NAMESPACE, "products_embedded")

    def process(self, result: PredictionResult) -> Iterator[dict[str, Any]]:
        self.embedded.inc()
        example: TextToEncode = result.example
        if isinstance(result.inference, AnnotatedEmbedding):
            vector, annotations = result.inference.embedding, result.inference.annotations.as_row()
        else:  # a handler built without annotate=True
            vector, annotations = result.inference, dict.fromkeys(ANNOTATION_COLUMNS)
        yield {
            "product_id": example.key,
            "embedding": vector.tolist(),
            "model_id": self.identity.model_id,
            "model_version": self.identity.model_version,
            "content_hash": content_hash(example.text),
            **annotations,
        }


class _FailedAloneToDeadLetter(beam.DoFn):
    """A product whose inference failed even in a batch of its own."""

    def __init__(self) -> None:
        self.rejected = Metrics.counter(METRICS_NAMESPACE, "products_dead_lettered")

    def process(self, failure: tuple[list[TextToEncode], Exception]) -> Iterator[dict[str, Any]]:
        batch, error = failure
        for example in batch:
            self.rejected.inc()
            record = {"product_id": example.key, "text": example.text}
            yield dead_letter("embed", record, f"inference failed: {error!r}", example.key)


class EmbedTexts(beam.PTransform):
    """TextToEncode -> {"rows": embedding rows, "dead_letters": products that cannot be embedded}.

    A batch that raises must not take its good records down with it: its examples
    go through a second RunInference one at a time, and only those that fail alone
    become dead letters. The first stage's threshold is therefore 1.0 on purpose;
    the second stage's is the job's real limit.
    """

    def __init__(
        self, handler: EncoderModelHandler, identity: ModelIdentity, max_failed_fraction: float
    ) -> None:
        super().__init__()
        self.handler = handler
        self.identity = identity
        self.max_failed_fraction = max_failed_fraction

    def expand(self, texts: beam.PCollection) -> dict[str, beam.PCollection]:
        results, failures = texts | "Encode" >> RunInference(self.handler).with_exception_handling(
            threshold=1.0
        )
        retried, failed_alone = (
            failures.failed_inferences
            | "RetryOneByOne" >> beam.FlatMap(lambda failure: failure[0])
            | "EncodeAlone"
            >> RunInference(self.handler.one_at_a_time()).with_exception_handling(
                threshold=self.max_failed_fraction
            )
        )
        return {
            "rows": (results, retried)
            | "AllResults" >> beam.Flatten()
            | "ToRows" >> beam.ParDo(_ToEmbeddingRow(self.identity)),
            "dead_letters": failed_alone.failed_inferences | beam.ParDo(_FailedAloneToDeadLetter()),
        }


class EmbedProducts(beam.PTransform):
    """Validated products -> {"rows", "dead_letters"}: every product embedded, no reuse."""

    def __init__(
        self, handler: EncoderModelHandler, identity: ModelIdentity, max_failed_fraction: float = 1.0
    ):
        super().__init__()
        self.embed = EmbedTexts(handler, identity, max_failed_fraction)

    def expand(self, products: beam.PCollection) -> dict[str, beam.PCollection]:
        identity = self.embed.identity
        texts = products | "ToText" >> beam.Map(lambda p: TextToEncode(p["product_id"], identity.text_of(p)))
        return texts | self.embed


class WriteEmbeddings(beam.PTransform):
    def __init__(self, output: str, dimension: int, num_shards: int = 0, row_group_mb: int = 64) -> None:
        super().__init__()
        self.output = output
        self.dimension = dimension
        self.num_shards = num_shards
        self.row_group_bytes = row_group_mb * 1024 * 1024

    def expand(self, rows: beam.PCollection) -> pvalue.PDone:
        return rows | beam.io.WriteToParquet(
            FileSystems.join(self.output, "embeddings"),
            schema=embedding_schema(self.dimension),
            num_shards=self.num_shards,
            row_group_buffer_size=self.row_group_bytes,
            shard_name_template="-SSSSS-of-NNNNN",
            file_name_suffix=".parquet",
            codec="snappy",
        )


COUNTERS = (
    "products_read",
    "products_embedded",
    "products_reused",
    "products_dead_lettered",
    "products_dropped_since_previous",
    "products_new_or_changed",
    "inference_batches",
)


def check_counts(counts: dict[str, int], max_dead_letter_fraction: float) -> None:
    """Records in = embedded + reused + dead-lettered, and not too many dead letters."""
    accounted = counts["products_embedded"] + counts["products_reused"] + counts["products_dead_lettered"]
    if accounted != counts["products_read"]:
        raise RuntimeError(f"counts do not reconcile: read {counts['products_read']}, accounted {accounted}")
    read, dead = counts["products_read"], counts["products_dead_lettered"]
    if read and dead > max_dead_letter_fraction * read:
        raise DeadLetterThresholdExceeded(
            f"{dead} of {read} products are dead letters, more than --max_dead_letter_fraction="
            f"{max_dead_letter_fraction}; see the dead_letters-*.jsonl files"
        )


def run_embed(options: PipelineOptions) -> dict[str, int]:
    """Run the embed pipeline; return its counts after writing the output manifest."""
    opts, model, output = (options.view_as(c) for c in (EmbedOptions, ModelOptions, OutputOptions))
    require_options(opts, "products")
    require_options(model, "model")
    require_options(output, "output")
    if not 0 <= opts.max_dead_letter_fraction <= 1:
        raise ValueError("--max_dead_letter_fraction must be in [0, 1]")
    identity = ModelIdentity.of(model.model)
    handler = EncoderModelHandler(
        model.model, Side.DOCUMENT, model.batch_size, model.chunk_size, model.device, annotate=True
    )

    pipeline = make_pipeline(options)
    products = pipeline | "ReadProducts" >> ReadProducts(opts.products)
    if opts.previous:
        previous = pipeline | "ReadPrevious" >> beam.io.ReadFromParquet(
            FileSystems.join(previous_embeddings_folder(opts.previous), "embeddings-*.parquet")
        )
    else:
        previous = pipeline | "NoPrevious" >> beam.Create([])
    plan = {"products": products.valid, "previous": previous} | PlanEmbedding(identity)
    embedded = plan[TO_EMBED] | EmbedTexts(handler, identity, opts.max_dead_letter_fraction)
    _ = (
        (embedded["rows"], plan[REUSED])
        | "AllRows" >> beam.Flatten()
        | WriteEmbeddings(output.output, identity.dimension, opts.num_shards, opts.row_group_mb)
    )
    _ = (
        (products[DEAD_LETTERS], plan[DEAD_LETTERS], embedded["dead_letters"])
        | "AllDeadLetters" >> beam.Flatten()
        | WriteDeadLetters(FileSystems.join(output.output, "dead_letters"))
    )
    result = pipeline.run()
    result.wait_until_finish()
    counts = {name: counter_value(result, name) for name in COUNTERS}
    LOGGER.info("embed counts: %s", counts)
    check_counts(counts, opts.max_dead_letter_fraction)
    write_stage_manifest(
        output.output,
        kind=EMBEDDINGS_KIND,
        info={
            "model_id": identity.model_id,
            "model_version": identity.model_version,
            "dimension": identity.dimension,
            "products": opts.products,
            "previous": opts.previous,
            "counts": counts,
        },
    )
    return counts
