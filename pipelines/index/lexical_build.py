"""BM25 in every shard of an index: the catalog's text analyzed, its statistics combined, each shard's BM25.

    products --AnalyzeProducts--> (shard, ProductWords) --+--> CoGroupByKey with the vectors --> BuildShard
                                                           +--> statistics --CombineStatistics--> side input

Each product's text (`model.text.document_text`: title, bullet points, description) is analyzed in its
locale's language (`index_builder.analyzer`) once; the analyzed words go to the product's shard, and the
statistics of every chunk combine into the catalog's (document count, total length, each word's
document frequency, the languages), which each shard's BM25 is scored with (`index_builder.bm25`). So a
product's BM25 score is the same at any shard count, and the shards' rankings merge by score.

The statistics are the catalog's products with a title (those `--products` holds, whether or not a
vector was made of each); an indexed product the catalog lacks is found by its vector only (counted).
A one-shard build on the local runner does the same in this process (`catalog_words`).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import apache_beam as beam
from apache_beam.metrics import Metrics
from apache_beam.transforms.window import GlobalWindow
from apache_beam.utils.windowed_value import WindowedValue

from index_builder.analyzer import analyzer, product_language
from index_builder.bm25 import Bm25Index, Bm25Settings, LexicalStatistics
from index_builder.product_keys import shard_of
from model.text import document_text
from pipelines.artifacts import parquet_pattern, parquet_rows
from pipelines.catalog_io import METRICS_NAMESPACE

LOGGER = logging.getLogger(__name__)
PRODUCT_COLUMNS = ["product_id", "title", "bullet_points", "description", "locale"]
# Products analyzed per chunk that crosses the shuffle (as the vectors' chunks do, `partitioned.CHUNK_ROWS`).
CHUNK_PRODUCTS = 4_096


@dataclass(frozen=True)
class ProductWords:
    """Analyzed products of one shard: ids, each one's words, and the language each was analyzed in."""

    ids: list[str]
    words: list[list[str]]
    languages: list[str]

    def statistics(self) -> LexicalStatistics:
        return LexicalStatistics.of(self.words, self.languages)


def _analyzed(row: Mapping[str, Any], language: str) -> tuple[str, list[str], str] | None:
    """A catalog row's id, words and language; None for a row without an id or a title (no text)."""
    if not row.get("product_id") or not row.get("title"):
        return None
    chosen = product_language(language, row.get("locale"))
    return str(row["product_id"]), analyzer(chosen).words(document_text(row)), chosen


class AnalyzeProducts(beam.DoFn):
    """Catalog rows -> (shard, `ProductWords`) chunks; a row without an id or a title is counted only."""

    def __init__(self, num_shards: int, language: str) -> None:
        self.num_shards = num_shards
        self.language = language
        self.analyzed = Metrics.counter(METRICS_NAMESPACE, "lexical_products_analyzed")
        self.untitled = Metrics.counter(METRICS_NAMESPACE, "lexical_products_without_text")
        self.buffers: dict[int, list[tuple[str, list[str], str]]] = {}

    def start_bundle(self) -> None:
        self.buffers = {}

    def process(self, row: Mapping[str, Any]) -> Iterator[tuple[int, ProductWords]]:
        found = _analyzed(row, self.language)
        if found is None:
            self.untitled.inc()
            return
        self.analyzed.inc()
        shard = shard_of(found[0], self.num_shards)
        buffer = self.buffers.setdefault(shard, [])
        buffer.append(found)
        if len(buffer) >= CHUNK_PRODUCTS:
            yield shard, _chunk(self.buffers.pop(shard))

    def finish_bundle(self) -> Iterator[WindowedValue]:
        for shard in list(self.buffers):
            chunk = (shard, _chunk(self.buffers.pop(shard)))
            yield WindowedValue(chunk, GlobalWindow().max_timestamp(), [GlobalWindow()])


def _chunk(rows: Sequence[tuple[str, list[str], str]]) -> ProductWords:
    return ProductWords([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows])


class CombineStatistics(beam.CombineFn):
    """`LexicalStatistics` of disjoint parts -> the whole's, merged into mutable counters."""

    def create_accumulator(self) -> list[Any]:
        return [0, 0, Counter(), Counter()]

    def add_input(self, accumulator: list[Any], part: LexicalStatistics) -> list[Any]:
        accumulator[0] += part.documents
        accumulator[1] += part.total_length
        accumulator[2].update(part.document_frequency)
        accumulator[3].update(part.languages)
        return accumulator

    def merge_accumulators(self, accumulators: Iterable[list[Any]]) -> list[Any]:
        merged = self.create_accumulator()
        for documents, total, frequency, languages in accumulators:
            merged[0] += documents
            merged[1] += total
            merged[2].update(frequency)
            merged[3].update(languages)
        return merged

    def extract_output(self, accumulator: list[Any]) -> LexicalStatistics:
        documents, total, frequency, languages = accumulator
        return LexicalStatistics(documents, total, dict(frequency), dict(languages))


class CatalogLexical(beam.PTransform):
    """The catalog at `products` -> {"words": (shard, ProductWords), "statistics": one LexicalStatistics}."""

    def __init__(self, products: str, num_shards: int, settings: Bm25Settings) -> None:
        super().__init__()
        self.products = products
        self.num_shards = num_shards
        self.settings = settings

    def expand(self, pipeline: beam.Pipeline) -> dict[str, beam.PCollection]:
        words = (
            pipeline
            | "ReadProducts"
            >> beam.io.ReadFromParquet(parquet_pattern(self.products), columns=PRODUCT_COLUMNS)
            | "AnalyzeProducts" >> beam.ParDo(AnalyzeProducts(self.num_shards, self.settings.language))
        )
        statistics = (
            words
            | "ChunkStatistics" >> beam.Map(lambda keyed: keyed[1].statistics())
            | "CatalogStatistics" >> beam.CombineGlobally(CombineStatistics())
        )
        return {"words": words, "statistics": statistics}


def catalog_words(products: str, settings: Bm25Settings) -> tuple[list[ProductWords], LexicalStatistics]:
    """`CatalogLexical` in this process, for a one-shard build: every product's words and the statistics."""
    rows: list[tuple[str, list[str], str]] = []
    untitled = 0
    for row in parquet_rows(products, PRODUCT_COLUMNS):
        found = _analyzed(row, settings.language)
        if found is None:
            untitled += 1
        else:
            rows.append(found)
    if untitled:
        LOGGER.warning("BM25: %d products of %s have no id or title: not indexed", untitled, products)
    chunk = _chunk(rows)
    return [chunk], chunk.statistics()


def shard_bm25(
    ids: Sequence[str],
    words: Iterable[ProductWords],
    statistics: LexicalStatistics,
    settings: Bm25Settings,
    products: str,
) -> Bm25Index:
    """BM25 over one shard's indexed products `ids` (in their row order), from the catalog's analyzed words
    of that shard and the catalog's statistics; an indexed product the catalog lacks gets no words."""
    by_id = {pid: found for chunk in words for pid, found in zip(chunk.ids, chunk.words, strict=True)}
    if not statistics.documents:
        raise ValueError(f"--products {products} holds no product with a title: give the catalog the "
                         "embeddings were made from, or build without BM25 (--lexical false)")
    missing = sum(pid not in by_id for pid in ids)
    if missing == len(ids):
        raise ValueError(
            f"--products {products} holds none of the {len(ids):,} indexed products (such as "
            f"{next(iter(ids), '?')!r}) with a title: give the catalog the embeddings were made from"
        )
    if missing:
        LOGGER.warning("BM25: %d of %d indexed products have no title in %s", missing, len(ids), products)
    return Bm25Index.of_words(ids, [by_id.get(pid, []) for pid in ids], statistics, settings)


__all__ = [
    "AnalyzeProducts",
    "CatalogLexical",
    "CombineStatistics",
    "ProductWords",
    "catalog_words",
    "shard_bm25",
]
