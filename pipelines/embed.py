"""The embed stage: catalog Parquet -> validated products -> embeddings -> Parquet shards.

Composite transforms, each testable alone on a TestPipeline:
`ReadProducts` -> `EmbedProducts` -> `WriteEmbeddings`; `run_embed` wires them
and writes the shard manifest once the pipeline has succeeded.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import apache_beam as beam
from apache_beam import pvalue
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics import Metrics
from apache_beam.ml.inference.base import PredictionResult, RunInference
from apache_beam.options.pipeline_options import PipelineOptions

from model import Side, content_hash, document_text
from model.config import read_config_dict
from pipelines.artifacts import counter_value, write_stage_manifest
from pipelines.catalog_io import (
    DEAD_LETTERS,
    METRICS_NAMESPACE,
    ValidateRecords,
    WriteDeadLetters,
    dead_letter,
)
from pipelines.inference import EncoderModelHandler, TextToEncode
from pipelines.options import EmbedOptions, ModelOptions, OutputOptions
from pipelines.runner import make_pipeline, require_options
from schemas import embedding_schema, validate_product

LOGGER = logging.getLogger(__name__)


@dataclass(frozen=True)
class ModelIdentity:
    model_id: str
    model_version: str
    dimension: int

    @classmethod
    def of(cls, model_dir: str) -> ModelIdentity:
        config = read_config_dict(model_dir)
        return cls(config["model_id"], str(config["model_version"]), int(config["projection_dim"]))


class ReadProducts(beam.PTransform):
    """Parquet files -> (`valid` products, `dead_letters`)."""

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

    def process(self, result: PredictionResult) -> Any:
        self.embedded.inc()
        example: TextToEncode = result.example
        yield {
            "product_id": example.key,
            "embedding": result.inference.tolist(),
            "model_id": self.identity.model_id,
            "model_version": self.identity.model_version,
            "content_hash": content_hash(example.text),
        }


class _FailedBatchToDeadLetters(beam.DoFn):
    """A batch whose inference raised: every product in it becomes a dead letter.

    RunInference reports failures per batch; Beam retries nothing here, so the
    reason is recorded on each product and the counts still reconcile.
    """

    def __init__(self) -> None:
        self.rejected = Metrics.counter(METRICS_NAMESPACE, "products_dead_lettered")

    def process(self, failure: Any) -> Any:
        batch, error = failure
        for example in batch:
            self.rejected.inc()
            yield dead_letter(
                "embed", {"product_id": example.key, "text": example.text}, repr(error), example.key
            )


class EmbedProducts(beam.PTransform):
    """Validated products -> {"rows": embedding rows, "dead_letters": products of failed batches}."""

    def __init__(self, handler: EncoderModelHandler, identity: ModelIdentity) -> None:
        super().__init__()
        self.handler = handler
        self.identity = identity

    def expand(self, products: beam.PCollection) -> dict[str, beam.PCollection]:
        results, failures = (
            products
            | "ToText" >> beam.Map(lambda p: TextToEncode(p["product_id"], document_text(p)))
            | RunInference(self.handler).with_exception_handling()
        )
        return {
            "rows": results | "ToRows" >> beam.ParDo(_ToEmbeddingRow(self.identity)),
            "dead_letters": failures.failed_inferences | beam.ParDo(_FailedBatchToDeadLetters()),
        }


class WriteEmbeddings(beam.PTransform):
    def __init__(self, output: str, dimension: int, num_shards: int = 0) -> None:
        super().__init__()
        self.output = output
        self.dimension = dimension
        self.num_shards = num_shards

    def expand(self, rows: beam.PCollection) -> pvalue.PDone:
        return rows | beam.io.WriteToParquet(
            FileSystems.join(self.output, "embeddings"),
            schema=embedding_schema(self.dimension),
            num_shards=self.num_shards,
            shard_name_template="-SSSSS-of-NNNNN",
            file_name_suffix=".parquet",
            codec="snappy",
        )


def run_embed(options: PipelineOptions) -> dict[str, int]:
    """Run the embed pipeline; return its counts after writing the output manifest."""
    opts, model, output = (options.view_as(c) for c in (EmbedOptions, ModelOptions, OutputOptions))
    require_options(opts, "products")
    require_options(model, "model")
    require_options(output, "output")
    identity = ModelIdentity.of(model.model)
    handler = EncoderModelHandler(
        model.model, Side.DOCUMENT, model.batch_size, model.chunk_size, model.device
    )
    pipeline = make_pipeline(options)
    products = pipeline | "ReadProducts" >> ReadProducts(opts.products)
    embedded = products.valid | EmbedProducts(handler, identity)
    _ = embedded["rows"] | WriteEmbeddings(output.output, identity.dimension, opts.num_shards)
    _ = (
        (products[DEAD_LETTERS], embedded["dead_letters"])
        | "AllDeadLetters" >> beam.Flatten()
        | WriteDeadLetters(FileSystems.join(output.output, "dead_letters"))
    )
    result = pipeline.run()
    result.wait_until_finish()
    counts = {
        "products_read": counter_value(result, "products_read"),
        "products_embedded": counter_value(result, "products_embedded"),
        "products_dead_lettered": counter_value(result, "products_dead_lettered"),
    }
    unaccounted = counts["products_read"] - counts["products_embedded"] - counts["products_dead_lettered"]
    if unaccounted:
        LOGGER.error("counts do not reconcile: %d products neither embedded nor dead-lettered", unaccounted)
    write_stage_manifest(
        output.output,
        kind="madr-embeddings",
        info={
            "model_id": identity.model_id,
            "model_version": identity.model_version,
            "dimension": identity.dimension,
            "products": opts.products,
            "counts": counts,
        },
    )
    return counts
