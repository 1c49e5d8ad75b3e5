"""`madr enrich`: fill the catalog's aspect gaps with the model's predictions, with provenance.

    catalog --ReadCatalogAspects--> (product_id, catalog aspects)  \\
                                                                     CoGroupByKey --> FillAspects --> Parquet
    embedding rows --KeyPredictions--> (product_id, predictions)  /

The predictions are the annotations `madr embed` already wrote beside each vector (aspect_values
and aspect_confidences), so no model runs here. A catalog value is never overwritten; a predicted
value is written only at or above `min_confidence` and keeps its confidence. Every product read is
written once or dead-lettered, and per aspect: from catalog + predicted + empty = products written.

The catalog is read as `madr embed` reads it (`pipelines.io.catalog_io`: `ListRowGroups`,
`ReadValidatedFn`), so a file that cannot be read, lacks product_id, or holds a string that is not
valid UTF-8 becomes dead letters naming the file, counted by that module's rule, and never stops
the job.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import apache_beam as beam
from apache_beam import pvalue
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics import Metrics
from apache_beam.options.pipeline_options import PipelineOptions

from pipelines.embed.agreement import AgreementWithCatalog, JoinWithAgreement, merged_catalog
from pipelines.embed.gap_fill import fill_or_withhold
from pipelines.io.catalog_io import (
    DEAD_LETTERS,
    METRICS_NAMESPACE,
    ListRowGroups,
    ReadValidatedFn,
    WriteDeadLetters,
    dead_letter,
)
from pipelines.runner import make_pipeline
from pipelines.settings.options import (
    PredictionThreshold,
)
from pipelines.settings.stage_config import StageOutput, nested, output_setting, setting
from pipelines.storage.stage_manifests import counter_value, write_stage_manifest
from pipelines.storage.staged_output import fresh_output
from pipelines.storage.verify import verified_stage_manifest
from schemas import (
    ECOMMERCE_ASPECTS,
    ENRICHED_PRODUCT_SCHEMA,
    PROVENANCE_CATALOG,
    PROVENANCE_PREDICTED,
    AspectSchema,
    InvalidRecord,
)
from schemas.validation import clean_id, normalise_aspects

LOGGER = logging.getLogger(__name__)

ENRICHED_KIND = "madr-enriched-catalog"
PREDICTION_COLUMNS = ["product_id", "aspect_values", "aspect_confidences"]
# The catalog columns enrich and export-vertex read; a file without product_id is a dead letter as a
# whole, one without aspects is read (its products have no catalog aspects).
CATALOG_COLUMNS = ("product_id", "aspects")
REQUIRED_CATALOG_COLUMNS = ("product_id",)
# The per-aspect counters, `<aspect>_<kind>`: where each product's value came from, or that it has none
# ("withheld": a gap a prediction would have filled, for an aspect whose predictions disagree with the
# catalog's own values).
FILL_KINDS = ("from_catalog", "predicted", "withheld", "empty")
_KIND_OF_PROVENANCE = {PROVENANCE_CATALOG: "from_catalog", PROVENANCE_PREDICTED: "predicted"}


def _as_dict(pairs: Any) -> dict[str, Any]:
    # Parquet reads a map as (key, value) pairs; tests and DoFns may pass a dict.
    return dict(pairs) if pairs else {}


def catalog_aspects(product: Mapping[str, Any]) -> tuple[str, dict[str, list[str]]]:
    """(product_id, normalised aspects) of a catalog row, by the id rules of validation (I1-I3).

    Raises `InvalidRecord` for a row whose id or aspects do not parse.
    """
    product_id = clean_id(product.get("product_id"), "product_id", "product")
    return product_id, normalise_aspects(product.get("aspects"), "product", product_id)


class KeyCatalog(beam.DoFn):
    """Product row -> (product_id, normalised aspects); a row that does not parse is a dead letter."""

    def __init__(self, stage: str) -> None:
        self.stage = stage
        self.read = Metrics.counter(METRICS_NAMESPACE, "products_read")
        self.rejected = Metrics.counter(METRICS_NAMESPACE, "products_dead_lettered")

    def process(self, product: Mapping[str, Any]) -> Iterator[Any]:
        self.read.inc()
        try:
            yield catalog_aspects(product)
        except InvalidRecord as error:
            self.rejected.inc()
            yield pvalue.TaggedOutput(
                DEAD_LETTERS, dead_letter(self.stage, product, str(error), error.record_id)
            )


class ReadCatalogAspects(beam.PTransform):
    """A catalog Parquet pattern (local or gs://) -> {"valid": (product_id, normalised aspects),
    DEAD_LETTERS: DEAD_LETTER_SCHEMA rows}.

    Reads through `catalog_io.ListRowGroups` and `ReadValidatedFn`, as `madr embed` does: a row whose
    id or aspects do not parse, a record with invalid UTF-8, and a file that cannot be read or has no
    product_id column are dead letters (the last three name the file), counted in `products_read` and
    `products_dead_lettered` (and `files_dead_lettered`, `row_groups_dead_lettered`) by the rule in
    `pipelines.io.catalog_io`.
    """

    def __init__(self, file_pattern: str) -> None:
        super().__init__()
        self.file_pattern = file_pattern

    def expand(self, root: pvalue.PBegin) -> dict[str, beam.PCollection]:
        read = (
            root
            | "ListRowGroups" >> ListRowGroups(self.file_pattern, REQUIRED_CATALOG_COLUMNS)
            | "ReadAspects"
            >> beam.ParDo(ReadValidatedFn("product", catalog_aspects, CATALOG_COLUMNS)).with_outputs(
                DEAD_LETTERS, main="valid"
            )
        )
        return {
            "valid": read.valid | "DropPositions" >> beam.Map(lambda positioned: positioned.record),
            DEAD_LETTERS: read[DEAD_LETTERS],
        }


def key_predictions(row: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    return row["product_id"], {
        "values": _as_dict(row.get("aspect_values")),
        "confidences": _as_dict(row.get("aspect_confidences")),
    }


class _FillFn(beam.DoFn):
    def __init__(self, aspects: Sequence[str], min_confidence: float, min_agreement: float) -> None:
        self.aspects = tuple(aspects)
        self.min_confidence, self.min_agreement = min_confidence, min_agreement
        self.written = Metrics.counter(METRICS_NAMESPACE, "enriched_products_written")
        self.without_product = Metrics.counter(METRICS_NAMESPACE, "embeddings_without_product")
        self.counters = {
            (aspect, kind): Metrics.counter(METRICS_NAMESPACE, f"{aspect}_{kind}")
            for aspect in self.aspects
            for kind in FILL_KINDS
        }

    def process(
        self, joined: tuple[str, Mapping[str, Iterable[Any]]], agreement: Mapping[str, tuple[int, int]]
    ) -> Iterator[dict[str, Any]]:
        product_id, groups = joined
        catalog_rows, predictions = list(groups["products"]), list(groups["predictions"])
        if not catalog_rows:
            self.without_product.inc()  # a product deleted since the embed run: nothing to enrich
            return
        catalog = merged_catalog(catalog_rows)
        prediction = predictions[0] if predictions else {}
        withheld = AgreementWithCatalog.from_sums(agreement).withheld(self.min_agreement)
        fill = (
            catalog,
            prediction.get("values"),
            prediction.get("confidences"),
            self.aspects,
            self.min_confidence,
        )
        filled, held_back = fill_or_withhold(*fill, withheld=withheld)
        for aspect in self.aspects:
            if aspect in filled:
                kind = _KIND_OF_PROVENANCE[filled[aspect].provenance]
            else:
                kind = "withheld" if aspect in held_back else "empty"
            self.counters[(aspect, kind)].inc(len(catalog_rows))
        self.written.inc(len(catalog_rows))
        aspects = [filled[a].as_row(a) for a in self.aspects if a in filled]
        for _ in catalog_rows:  # one output row per catalog row read, so the counts reconcile
            yield {"product_id": product_id, "aspects": aspects}


class FillAspectGaps(beam.PTransform):
    """{"products": catalog rows, "predictions": embedding rows} -> {"rows": enriched rows, "agreement":
    (aspect, (checked, agreed)) pairs, dead letters}.

    With `keyed`, "products" are (product_id, aspects) pairs already read and checked
    (`ReadCatalogAspects`, which has the dead letters and counts them): no dead-letter output then.
    A prediction fills a gap at or above `threshold.min_confidence`; an aspect whose predictions agree with
    the catalog's own values less than `threshold.min_agreement` of the time has its gaps left unfilled
    (`AgreementWithCatalog`).
    """

    def __init__(self, aspects: Sequence[str], threshold: PredictionThreshold, keyed: bool = False) -> None:
        super().__init__()
        self.aspects, self.threshold, self.keyed = tuple(aspects), threshold, keyed

    def expand(self, inputs: Mapping[str, beam.PCollection]) -> dict[str, beam.PCollection]:
        if self.keyed:
            products, dead_letters = inputs["products"], None
        else:
            keyed = inputs["products"] | "KeyCatalog" >> beam.ParDo(KeyCatalog("enrich")).with_outputs(
                DEAD_LETTERS, main="valid"
            )
            products, dead_letters = keyed.valid, keyed[DEAD_LETTERS]
        predictions = inputs["predictions"] | "KeyPredictions" >> beam.Map(key_predictions)
        by_product = {"products": products, "predictions": predictions}
        min_confidence, min_agreement = self.threshold.min_confidence, self.threshold.min_agreement
        matched = by_product | JoinWithAgreement(self.aspects, min_confidence)
        joined, agreement = matched["joined"], matched["agreement"]
        rows = joined | "FillAspects" >> beam.ParDo(
            _FillFn(self.aspects, min_confidence, min_agreement), beam.pvalue.AsDict(agreement)
        )
        outputs = {"rows": rows, "agreement": agreement}
        return outputs if dead_letters is None else {**outputs, DEAD_LETTERS: dead_letters}


def counted(aspects: Sequence[str]) -> list[str]:
    per_aspect = [f"{a}_{kind}" for a in aspects for kind in (*FILL_KINDS, "checked", "agreed")]
    totals = [
        "products_read",
        "products_dead_lettered",
        "enriched_products_written",
        "embeddings_without_product",
        "files_dead_lettered",
        "row_groups_dead_lettered",
    ]
    return [*totals, *per_aspect]


@dataclass(frozen=True, kw_only=True)
class EnrichConfig(StageOutput):
    """One enrich run: the catalog, the embed output holding its predictions, which aspects, at which
    threshold (`--min_confidence`, `--min_agreement`), and where it writes."""

    output: str = output_setting("Folder for enriched-*.parquet and its manifest")
    products: str = setting("", "Catalog Parquet file or glob", required=True)
    embeddings: str = setting("", "Embedding folder written by `madr embed`", required=True)
    aspects: tuple[str, ...] = setting(tuple(ECOMMERCE_ASPECTS), "Aspects to fill")
    # docs/RESULTS.md measures the precision of the fills at each threshold.
    threshold: PredictionThreshold = nested(PredictionThreshold)

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "aspects", AspectSchema(tuple(self.aspects)).names)


def enrich_catalog(config: EnrichConfig, beam_options: PipelineOptions | None = None) -> dict[str, int]:
    """Write `output/enriched-*.parquet` and its manifest; return the counts.

    An aspect whose predictions agree with the catalog's own values on less than `min_agreement` of the
    products that have one is not filled (`pipelines.embed.agreement`): its gaps count as withheld.

    A non-empty output is refused unless the config says `overwrite`; the files appear there only when
    the run succeeds (`staged_output.fresh_output`). `beam_options` choose the runner.
    """
    with fresh_output(config.output, config.overwrite) as folder:
        return _enrich(config, folder, beam_options or PipelineOptions([]))


def _enrich(config: EnrichConfig, output: str, options: PipelineOptions) -> dict[str, int]:
    products, embeddings, aspects = config.products, config.embeddings, config.aspects
    embed_manifest = verified_stage_manifest(embeddings, "madr-embeddings", config.verify)
    pipeline = make_pipeline(options)
    catalog = pipeline | "ReadProducts" >> ReadCatalogAspects(products)
    enriched = {
        "products": catalog["valid"],
        "predictions": pipeline
        | "ReadPredictions"
        >> beam.io.ReadFromParquet(
            FileSystems.join(embeddings, "embeddings*.parquet"), columns=PREDICTION_COLUMNS
        ),
    } | FillAspectGaps(aspects, config.threshold, keyed=True)
    _ = enriched["rows"] | "WriteEnriched" >> beam.io.WriteToParquet(
        FileSystems.join(output, "enriched"),
        schema=ENRICHED_PRODUCT_SCHEMA,
        shard_name_template="-SSSSS-of-NNNNN",
        file_name_suffix=".parquet",
        codec="snappy",
    )
    _ = catalog[DEAD_LETTERS] | WriteDeadLetters(FileSystems.join(output, "dead_letters"))
    result = pipeline.run()
    result.wait_until_finish()
    counts = {name: counter_value(result, name) for name in counted(aspects)}
    check_reconciled(counts, aspects)
    if counts["files_dead_lettered"] or counts["row_groups_dead_lettered"]:
        LOGGER.warning(
            "%d catalog file(s) and %d row group(s) could not be read; the dead letters name them",
            counts["files_dead_lettered"],
            counts["row_groups_dead_lettered"],
        )
    write_stage_manifest(
        output,
        kind=ENRICHED_KIND,
        info={
            "products": products,
            "embeddings": embeddings,
            "model_id": embed_manifest.get("model_id"),
            "model_version": embed_manifest.get("model_version"),
            "min_confidence": config.threshold.min_confidence,
            "min_agreement": config.threshold.min_agreement,
            "aspects": list(aspects),
            "counts": counts,
        },
        rows={"enriched*.parquet": counts["enriched_products_written"]},
    )
    return counts


def check_reconciled(counts: Mapping[str, int], aspects: Sequence[str]) -> None:
    """Products in = written + dead letters; per aspect, catalog + predicted + empty = written."""
    written = counts["enriched_products_written"]
    if counts["products_read"] != written + counts["products_dead_lettered"]:
        raise RuntimeError(f"enrich lost products: {dict(counts)}")
    for aspect in aspects:
        total = sum(counts[f"{aspect}_{kind}"] for kind in FILL_KINDS)
        if total != written:
            raise RuntimeError(
                f"enrich counted {total} {aspect} fills for {written} products: {dict(counts)}"
            )


def format_counts(counts: Mapping[str, int], aspects: Sequence[str]) -> str:
    lines = [
        f"products read {counts['products_read']}, written {counts['enriched_products_written']}, "
        f"dead letters {counts['products_dead_lettered']}",
        f"{'aspect':<10}" + "".join(f"{kind:>10}" for kind in FILL_KINDS) + "   agreement with the catalog",
    ]
    for aspect in aspects:
        row = "".join(f"{counts[f'{aspect}_{kind}']:>10}" for kind in FILL_KINDS)
        checked, agreed = counts.get(f"{aspect}_checked", 0), counts.get(f"{aspect}_agreed", 0)
        agreement = f"{agreed}/{checked} = {agreed / checked:.2f}" if checked else "-"
        lines.append(f"{aspect:<10}{row}   {agreement}")
    return "\n".join(lines)
