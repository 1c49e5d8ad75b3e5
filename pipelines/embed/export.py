"""Export embeddings for Vertex AI Vector Search: JSON records with aspect restricts.

    catalog --ReadCatalogAspects--> (product_id, aspects)   \\
                                                              CoGroupByKey --> ToVertexRecord --> JSON lines
    embedding rows --KeyEmbeddings--> (product_id, vector)  /

The record format is Vertex AI Vector Search's batch input format, as documented on
"Input data format and structure" (cloud.google.com/vertex-ai/docs/vector-search/setup/
format-structure): one JSON object per line, ``{"id": "1", "embedding": [1,1,1]}``,
with the optional ``restricts`` field, an array of ``{"namespace": ..., "allow": [...]}``
token restricts ("Filter vector matches", cloud.google.com/vertex-ai/docs/vector-search/
filtering#specify-namespaces-tokens; its sample data line is
``{"id": "42", "embedding": [0.5, 1.0], "restricts": [{"namespace": "class", "allow":
["cat", "pet"]}, ...]}``, also used verbatim by the Terraform google provider's
``google_vertex_ai_index`` example). The same page says that an object without a value
for a namespace omits that namespace, so a product without aspects gets no
``restricts`` at all. The format page also fixes the folder rules this module obeys:
data files sit directly under the batch root and are named ``*.json`` (not ``.jsonl``),
at most 5,000 files, and no other subdirectories. Beam's temporary files therefore
never go inside the target folder: the files are written to a sibling staging folder
(`staged_output.fresh_output`, which every stage uses) and moved into the target once the
pipeline has succeeded. For the same reason the folder carries no manifest.json (Vertex
would read it as a data file), and a non-empty target is refused unless --overwrite
replaces it: Vertex would import every file in it.

The catalog is read as `madr embed` reads it (`pipelines.embed.enrich.ReadCatalogAspects`, over
`pipelines.io.catalog_io`): a file that cannot be read, lacks product_id, or holds a string that is
not valid UTF-8 never stops the export. With no room for dead letters in the folder, each is
counted in `vertex_products_rejected` (once per dead letter: a row, or a file or row group that
cannot be read) and logged as a warning that names the file.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import apache_beam as beam
import numpy as np
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics import Metrics
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.runners.runner import PipelineResult

from pipelines.embed.agreement import AgreementWithCatalog, JoinWithAgreement, merged_catalog
from pipelines.embed.enrich import (
    PREDICTION_COLUMNS,
    ReadCatalogAspects,
    catalog_aspects,
    key_predictions,
)
from pipelines.embed.gap_fill import SOURCES, fill_or_withhold
from pipelines.io.catalog_io import DEAD_LETTERS, METRICS_NAMESPACE
from pipelines.runner import make_pipeline
from pipelines.settings.options import (
    ExportSettings,
    PredictionThreshold,
)
from pipelines.settings.stage_config import StageOutput, nested, output_setting, setting
from pipelines.storage.stage_manifests import counter_value, list_files
from pipelines.storage.staged_output import fresh_output
from pipelines.storage.verify import verified_stage_manifest
from schemas import ECOMMERCE_ASPECTS, PROVENANCE_PREDICTED, AspectSchema, InvalidRecord

LOGGER = logging.getLogger(__name__)

VERTEX_FILE_PREFIX = "vectors"
# Vertex picks the parser by suffix: .json (JSON lines), .csv or .avro.
VERTEX_FILE_SUFFIX = ".json"
# "There is a limit of 5000 objects (files) in the batch root directory."
COUNTERS = (
    "vertex_records_written",
    "vertex_records_with_restricts",
    "vertex_embeddings_without_product",
    "vertex_products_without_embedding",
    "vertex_products_rejected",
    "vertex_restricts_from_catalog",
    "vertex_restricts_from_predictions",
    # --restricts both: gaps of an aspect whose predictions contradict the catalog's values (agreement.py)
    "vertex_restricts_withheld",
)


def vertex_restricts(aspects: Mapping[str, Sequence[str]], names: Sequence[str]) -> list[dict[str, Any]]:
    """Token restricts for the named aspects a product has: ``[{"namespace", "allow"}]``, in ``names`` order.

    Values keep their catalog order with repeats removed; an aspect without values is left
    out (Vertex: omit a namespace the object has no token for).
    """
    restricts = []
    for name in names:
        values = list(dict.fromkeys(value for value in aspects.get(name) or () if value))
        if values:
            restricts.append({"namespace": name, "allow": values})
    return restricts


def vertex_record(product_id: str, embedding: Sequence[float], restricts: list[dict[str, Any]]) -> str:
    """One JSON line. Each float32 is written in its shortest exact form ("0.1", not "0.10000000149")."""
    vector = np.asarray(embedding, dtype=np.float32)
    if vector.ndim != 1 or vector.size == 0 or not np.isfinite(vector).all():
        raise ValueError(f"product {product_id!r}: the embedding must be a non-empty finite vector")
    fields = [f'"id": {json.dumps(product_id)}', f'"embedding": [{", ".join(map(str, vector))}]']
    if restricts:
        fields.append(f'"restricts": {json.dumps(restricts)}')
    return "{" + ", ".join(fields) + "}"


class _KeyProducts(beam.DoFn):
    """Product row -> (product_id, normalised aspects); rows whose aspects do not parse are counted."""

    def __init__(self) -> None:
        self.rejected = Metrics.counter(METRICS_NAMESPACE, "vertex_products_rejected")

    def process(self, product: Mapping[str, Any]) -> Iterator[tuple[str, dict[str, list[str]]]]:
        try:
            yield catalog_aspects(product)
        except InvalidRecord as error:
            # The embed stage dead-lettered such a product already, so it has no vector to export.
            self.rejected.inc()
            LOGGER.warning("not exported: %s", error)


class _CountRejected(beam.DoFn):
    """A catalog dead letter (`ReadCatalogAspects`) -> nothing: counted, and its reason logged.

    Vertex's folder may hold only data files, so the reason (which names the file for a file, row
    group or string that cannot be read) goes to the log.
    """

    def __init__(self) -> None:
        self.rejected = Metrics.counter(METRICS_NAMESPACE, "vertex_products_rejected")

    def process(self, letter: Mapping[str, Any]) -> Iterator[None]:
        self.rejected.inc()
        LOGGER.warning("not exported: %s", letter["reason"])
        return iter(())


class _ToVertexRecord(beam.DoFn):
    def __init__(
        self,
        names: Sequence[str],
        dimension: int | None,
        source: str,
        min_confidence: float,
        min_agreement: float,
    ) -> None:
        self.names = tuple(names)
        self.dimension = dimension
        self.source = source
        self.min_confidence, self.min_agreement = min_confidence, min_agreement
        self.counters = {name: Metrics.counter(METRICS_NAMESPACE, name) for name in COUNTERS}

    def process(
        self, joined: tuple[str, Mapping[str, Iterable[Any]]], agreement: Mapping[str, tuple[int, int]]
    ) -> Iterator[str]:
        product_id, groups = joined
        vectors, aspect_rows = list(groups["predictions"]), list(groups["products"])
        if not vectors:
            self.counters["vertex_products_without_embedding"].inc()
            return
        if len(vectors) > 1:
            # "A single ID should only appear once in a batch": Vertex would keep an arbitrary one.
            raise ValueError(f"product {product_id!r} has {len(vectors)} embedding rows; ids must be unique")
        predictions = vectors[0]
        vector = predictions["embedding"]
        if self.dimension is not None and len(vector) != self.dimension:
            raise ValueError(
                f"product {product_id!r}: embedding of {len(vector)} values, expected {self.dimension}"
            )
        if not aspect_rows:
            self.counters["vertex_embeddings_without_product"].inc()
        aspects = merged_catalog(aspect_rows, distinct=True)
        fill = (aspects, predictions["values"], predictions["confidences"], self.names, self.min_confidence)
        withheld = frozenset()
        if self.source == "both":  # filling the catalog's gaps: only with predictions that agree with it
            withheld = AgreementWithCatalog.from_sums(agreement).withheld(self.min_agreement)
        filled, held_back = fill_or_withhold(*fill, source=self.source, withheld=withheld)
        self.counters["vertex_restricts_withheld"].inc(len(held_back))
        restricts = vertex_restricts({name: a.values for name, a in filled.items()}, self.names)
        for aspect in filled.values():
            source = "predictions" if aspect.provenance == PROVENANCE_PREDICTED else "catalog"
            self.counters[f"vertex_restricts_from_{source}"].inc()
        self.counters["vertex_records_written"].inc()
        if restricts:
            self.counters["vertex_records_with_restricts"].inc()
        yield vertex_record(product_id, vector, restricts)


class ExportVertexJsonl(beam.PTransform):
    """{"products": product rows, "embeddings": embedding rows} -> Vertex AI JSON lines (str).

    One line per embedded product; its ``restricts`` come, per `source`
    (`pipelines.embed.gap_fill.fill_aspects`), from the product's ``aspects`` map ("catalog"), from the
    predictions `madr embed` wrote beside the vector at or above `threshold.min_confidence` ("predicted"), or
    from the catalog with predictions filling its gaps ("both"): one namespace per name in
    ``aspects`` (an `AspectSchema`'s names). Products without an embedding are not exported;
    embeddings without a catalog row are, with predicted restricts only. All are counted, and so is
    each restrict's source. With `keyed_products`, "products" are (product_id, aspects) pairs already
    read and checked (`ReadCatalogAspects`).
    """

    def __init__(
        self,
        aspects: Sequence[str] = ECOMMERCE_ASPECTS,
        dimension: int | None = None,
        source: str = "catalog",
        threshold: PredictionThreshold | None = None,
        keyed_products: bool = False,
    ) -> None:
        super().__init__()
        if source not in SOURCES:
            raise ValueError(f"restricts source must be one of {SOURCES}, got {source!r}")
        self.aspects = AspectSchema(tuple(aspects)).names
        self.dimension = dimension
        self.source = source
        self.threshold = threshold or PredictionThreshold()
        self.keyed_products = keyed_products

    def expand(self, inputs: Mapping[str, beam.PCollection]) -> beam.PCollection:
        products = inputs["products"]
        if not self.keyed_products:
            products = products | "KeyProducts" >> beam.ParDo(_KeyProducts())
        # The vector rides along with its predictions, through the join the agreement is counted on.
        embeddings = inputs["embeddings"] | "KeyEmbeddings" >> beam.Map(_predictions_and_vector)
        min_confidence, min_agreement = self.threshold.min_confidence, self.threshold.min_agreement
        to_record = _ToVertexRecord(self.aspects, self.dimension, self.source, min_confidence, min_agreement)
        by_product = {"products": products, "predictions": embeddings}
        matched = by_product | JoinWithAgreement(self.aspects, min_confidence)
        joined, agreement = matched["joined"], matched["agreement"]
        return joined | "ToVertexRecord" >> beam.ParDo(to_record, beam.pvalue.AsDict(agreement))


def _predictions_and_vector(row: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    product_id, predictions = key_predictions(row)
    return product_id, {**predictions, "embedding": row["embedding"]}


@dataclass(frozen=True, kw_only=True)
class ExportVertexConfig(StageOutput):
    """One export: the catalog (for the restricts), the embed output, what to export and where."""

    output: str = output_setting("Folder for the export files (nothing else is put there)")
    products: str = setting("", "Product Parquet file or glob, for the aspect restricts", required=True)
    embeddings: str = setting("", "Embedding folder written by `madr embed`", required=True)
    export: ExportSettings = nested(ExportSettings)
    # Predicted restricts count at or above --min_confidence.
    threshold: PredictionThreshold = nested(PredictionThreshold)


def export_vertex(config: ExportVertexConfig, beam_options: PipelineOptions | None = None) -> dict[str, int]:
    """Write ``output/vectors-SSSSS-of-NNNNN.json`` for Vertex AI Vector Search; return the counts.

    The config's ``products`` is a catalog Parquet file or glob, ``embeddings`` an embed stage folder,
    ``output`` a new or empty folder (or, with ``overwrite``, one to replace) that will hold only the
    export files. ``beam_options`` choose the runner.
    """
    settings = config.export
    aspects = AspectSchema.parse(",".join(settings.vertex_aspects)).names
    with fresh_output(config.output, config.overwrite) as staging:
        embed_manifest = verified_stage_manifest(config.embeddings, "madr-embeddings", config.verify)
        dimension = int(embed_manifest["dimension"])
        restricts, threshold = settings.restricts, config.threshold
        export = ExportVertexJsonl(aspects, dimension, restricts, threshold, keyed_products=True)
        options = beam_options or PipelineOptions([])
        result = _run_export(
            config.products, config.embeddings, staging, export, settings.vertex_num_files, options
        )
        written = list_files(staging, f"{VERTEX_FILE_PREFIX}-*{VERTEX_FILE_SUFFIX}")
    counts = {name: counter_value(result, name) for name in COUNTERS}
    counts["vertex_files"] = len(written)
    LOGGER.info("exported to %s: %s", config.output, counts)
    return counts


def _run_export(
    products: str,
    embeddings: str,
    staging: str,
    export: ExportVertexJsonl,
    num_files: int,
    options: PipelineOptions,
) -> PipelineResult:
    pipeline = make_pipeline(options)
    catalog = pipeline | "ReadProducts" >> ReadCatalogAspects(products)
    _ = catalog[DEAD_LETTERS] | "CountRejected" >> beam.ParDo(_CountRejected())
    inputs = {
        "products": catalog["valid"],
        "embeddings": pipeline
        | "ReadEmbeddings"
        >> beam.io.ReadFromParquet(
            FileSystems.join(embeddings, "embeddings*.parquet"), columns=[*PREDICTION_COLUMNS, "embedding"]
        ),
    }
    _ = (
        inputs
        | export
        | "WriteJson"
        >> beam.io.WriteToText(
            FileSystems.join(staging, VERTEX_FILE_PREFIX),
            file_name_suffix=VERTEX_FILE_SUFFIX,
            shard_name_template="-SSSSS-of-NNNNN",
            num_shards=num_files,
        )
    )
    result = pipeline.run()
    result.wait_until_finish()
    return result
