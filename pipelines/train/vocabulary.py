"""Aspect vocabularies from a catalog, as one composite Beam transform.

`BuildAspectVocabulary` reads validated product (and, when a dataset annotates
them, query) records, counts in how many records each aspect value occurs, drops
values seen fewer than `min_count` times (madral-kdd22 §8.1) and yields a single
`AspectVocabulary`. Products and queries are counted together when the caller
flattens both into the input, as MURAL pre-trains on their mixture (mural-wsdm24 §5.3.1).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import apache_beam as beam
from apache_beam.metrics import Metrics
from apache_beam.options.pipeline_options import PipelineOptions

from model.aspects.vocabulary import (
    AspectVocabulary,
    Granularity,
    Tokenize,
    most_frequent_spelling,
    record_spellings,
    record_units,
)
from model.backbone import load_tokenizer
from pipelines.io.catalog_io import METRICS_NAMESPACE, ValidateRecords
from pipelines.runner import make_pipeline
from schemas import validate_product, validate_query
from schemas.splits import HeldOutProducts


class _AspectUnits(beam.DoFn):
    """One record -> (aspect, unit) for each distinct unit it is annotated with."""

    def __init__(self, aspects: Sequence[str], granularity: Granularity, tokenizer_dir: str | None) -> None:
        self.aspects = tuple(aspects)
        self.granularity = granularity
        self.tokenizer_dir = tokenizer_dir
        self.tokenize: Tokenize | None = None
        self.records = Metrics.counter(METRICS_NAMESPACE, "vocabulary_records")
        self.annotated = Metrics.counter(METRICS_NAMESPACE, "vocabulary_annotated_records")

    def setup(self) -> None:
        # Wordpieces come from the model's own tokenizer, so token classes match its vocabulary.
        if self.granularity is Granularity.TOKEN:
            self.tokenize = load_tokenizer(self.tokenizer_dir).tokenize

    def process(self, record: Mapping[str, Any]) -> Iterator[tuple[tuple[str, str], str]]:
        """((aspect, unit), the record's spelling of it): whole phrases keep the catalog's spelling."""
        self.records.inc()
        annotations = record.get("aspects") or {}
        if any(annotations.get(name) for name in self.aspects):
            self.annotated.inc()
        for name in self.aspects:
            values = annotations.get(name) or ()
            spelled = record_spellings(values) if self.granularity is Granularity.PHRASE else {}
            for unit in record_units(values, self.granularity, self.tokenize):
                yield (name, unit), spelled.get(unit, unit)


def _unit_count(
    unit: tuple[str, str], spellings: Iterable[tuple[str, int]]
) -> tuple[tuple[str, str], int, str]:
    """(unit, records carrying it, its most frequent spelling) from the per-spelling counts."""
    counted = dict(spellings)
    return unit, sum(counted.values()), most_frequent_spelling(counted)


def _vocabulary(
    counted: Iterable[tuple[tuple[str, str], int, str]],
    aspects: Sequence[str],
    min_count: int,
    granularity: Granularity,
) -> AspectVocabulary:
    counts: dict[str, dict[str, int]] = {name: {} for name in aspects}
    spellings: dict[str, dict[str, str]] = {name: {} for name in aspects}
    for (name, unit), count, spelling in counted:
        counts[name][unit] = count
        spellings[name][unit] = spelling
    keep = spellings if Granularity(granularity) is Granularity.PHRASE else None
    return AspectVocabulary.from_counts(counts, min_count, granularity, keep)


class BuildAspectVocabulary(beam.PTransform):
    """Validated records (field `aspects`: name -> list of values) -> one `AspectVocabulary`.

    Args:
        aspects: the aspect names to count, in the order the model config lists them.
        min_count: keep values carried by at least this many records.
        granularity: phrase, word or token units (mural-wsdm24 §5.3.1).
        tokenizer_dir: backbone folder whose tokenizer splits values at token granularity
            (the bundled MiniLM by default).
    """

    def __init__(
        self,
        aspects: Sequence[str],
        min_count: int = 1,
        granularity: Granularity = Granularity.PHRASE,
        tokenizer_dir: str | None = None,
    ) -> None:
        super().__init__()
        if not aspects:
            raise ValueError("BuildAspectVocabulary needs at least one aspect name")
        if min_count < 1:
            raise ValueError(f"min_count must be >= 1, got {min_count}")
        self.aspects = tuple(aspects)
        self.min_count = min_count
        self.granularity = Granularity(granularity)
        self.tokenizer_dir = tokenizer_dir

    def expand(self, records: beam.PCollection) -> beam.PCollection:
        min_count = self.min_count
        return (
            records
            | "AspectUnits" >> beam.ParDo(_AspectUnits(self.aspects, self.granularity, self.tokenizer_dir))
            | "CountSpellings" >> beam.combiners.Count.PerElement()
            | "ByUnit" >> beam.Map(lambda counted: (counted[0][0], (counted[0][1], counted[1])))
            | "GroupSpellings" >> beam.GroupByKey()
            | "CountUnits" >> beam.MapTuple(_unit_count)
            # Filter before gathering: only the kept values travel to the single worker that builds.
            | "DropRare" >> beam.Filter(lambda counted: counted[1] >= min_count)
            | "Gather" >> beam.combiners.ToList()
            | "Build" >> beam.Map(_vocabulary, self.aspects, self.min_count, self.granularity)
        )


def run_build_vocabulary(
    product_pattern: str,
    queries_path: str | None,
    aspects: Sequence[str],
    min_count: int,
    output_path: str,
    held_out: HeldOutProducts | None = None,
    query_splits: Sequence[str] | None = ("train",),
) -> AspectVocabulary:
    """Count the aspect values of a catalog (and its queries); save and return the vocabulary.

    Only what training reads counts: products outside `held_out`, and queries of `query_splits` (None:
    every split). A value seen only in validation or test queries, or only on held-out products, is
    then unknown to the model, as it would be on a catalog it never saw, and its accuracy on them is
    not inflated. A Beam pipeline, so it scales with the catalog; only the kept values reach the driver.
    """
    pipeline = make_pipeline(PipelineOptions([]))
    products = (
        pipeline
        | "ReadProducts" >> beam.io.ReadFromParquet(product_pattern)
        | "ValidateProducts" >> ValidateRecords("product", validate_product)
    )
    trained_on = products.valid
    if held_out is not None and held_out.fraction:
        trained_on = trained_on | "SkipHeldOut" >> beam.Filter(lambda product: not held_out.holds(product))
    records = [trained_on]
    if queries_path:
        queries = (
            pipeline
            | "ReadQueries" >> beam.io.ReadFromParquet(queries_path)
            | "ValidateQueries" >> ValidateRecords("query", validate_query)
        )
        splits = None if query_splits is None else frozenset(query_splits)
        records.append(
            queries.valid
            | "TrainingSplits" >> beam.Filter(lambda query: splits is None or query["split"] in splits)
        )
    _ = (
        records
        | "AllRecords" >> beam.Flatten()
        | BuildAspectVocabulary(aspects, min_count)
        | "Save" >> beam.Map(lambda vocabulary: vocabulary.save(output_path))
    )
    pipeline.run().wait_until_finish()
    return AspectVocabulary.load(output_path)
