"""BM25 in every shard of an index: the catalog's text keyed by shard, counted, the statistics combined.

    products --KeyTexts--> (shard, ProductTexts) --GroupByKey--> CountShardTerms --> (shard, ShardTerms)
        (shard, ShardTerms) --+--> CoGroupByKey with the vectors --> BuildShard (BM25 scored)
                              +--> statistics --CombineStatistics--> side input

Each product's text (`model.text.document_text`: title, bullet points, description) goes to its shard
with its locale's language (`index_builder.analyzer`) and the text's fingerprint. A shard's products are
counted once (`index_builder.term_counts`): a product whose fingerprint the shard's previous build holds
keeps last night's counts, the others are analyzed, so a night re-analyzes only new and changed text.
The statistics of every shard combine into the catalog's (document count, total length, each word's
document frequency, the languages), which each shard's BM25 is scored with (`index_builder.bm25`): a
product's BM25 score is the same at any shard count, and the shards' rankings merge by score.

The statistics are the catalog's products with a title (those `--products` holds, whether or not a
vector was made of each); an indexed product the catalog lacks is found by its vector only (counted).
A one-shard build on the local runner does the same in this process (`catalog_terms`).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import apache_beam as beam
import numpy as np
from apache_beam.metrics import Metrics
from apache_beam.transforms.window import GlobalWindow
from apache_beam.utils.windowed_value import WindowedValue

from index_builder.analyzer import ANALYZER_VERSION, analyzer, product_language
from index_builder.artifact import IndexArtifactError
from index_builder.bm25 import Bm25Index, Bm25Settings, LexicalStatistics
from index_builder.lexical import load_shard_lexical
from index_builder.product_keys import shard_of
from index_builder.term_counts import TermCounts, counted, text_fingerprint
from model.text import document_text
from pipelines.io.catalog_io import METRICS_NAMESPACE
from pipelines.io.parquet_reading import parquet_pattern, parquet_rows

LOGGER = logging.getLogger(__name__)
PRODUCT_COLUMNS = ["product_id", "title", "bullet_points", "description", "locale"]
# Products per chunk that crosses the shuffle (as the vectors' chunks do, `partitioned.CHUNK_ROWS`).
CHUNK_PRODUCTS = 4_096


@dataclass(frozen=True)
class ProductTexts:
    """Products of one shard: ids, each one's text, the language it is analyzed in, its fingerprint."""

    ids: list[str]
    texts: list[str]
    languages: list[str]
    fingerprints: list[int]

    @classmethod
    def join(cls, chunks: Iterable[ProductTexts]) -> ProductTexts:
        chunks = list(chunks)
        return cls(*([value for chunk in chunks for value in getattr(chunk, name)] for name in _TEXT_FIELDS))


_TEXT_FIELDS = ("ids", "texts", "languages", "fingerprints")


@dataclass(frozen=True)
class ShardTerms:
    """A shard's products counted: ids, the language each was analyzed in, their `TermCounts` (a row per
    id), and how many were analyzed tonight and how many kept last night's counts."""

    ids: list[str]
    languages: list[str]
    terms: TermCounts
    analyzed: int = 0
    reused: int = 0

    def statistics(self) -> LexicalStatistics:
        return LexicalStatistics(
            len(self.ids),
            int(self.terms.lengths.sum()),
            self.terms.document_frequency,
            dict(Counter(self.languages)),
        )

    def subset(self, positions: Sequence[int]) -> ShardTerms:
        """The products at `positions`, in that order."""
        picked = np.asarray(positions, dtype=np.int64)
        ids, languages = [self.ids[i] for i in positions], [self.languages[i] for i in positions]
        return ShardTerms(ids, languages, self.terms.take(picked))


def _text_of(row: Mapping[str, Any], language: str) -> tuple[str, str, str, int] | None:
    """A catalog row's id, text, language and fingerprint; None for a row without an id or a title."""
    if not row.get("product_id") or not row.get("title"):
        return None
    chosen = product_language(language, row.get("locale"))
    text = document_text(row)
    return str(row["product_id"]), text, chosen, text_fingerprint(f"{ANALYZER_VERSION}:{chosen}", text)


def _texts(rows: Sequence[tuple[str, str, str, int]]) -> ProductTexts:
    return ProductTexts(*(list(column) for column in zip(*rows, strict=True)) if rows else ([], [], [], []))


class KeyTexts(beam.DoFn):
    """Catalog rows -> (shard, `ProductTexts`) chunks; a row without an id or a title is counted only."""

    def __init__(self, num_shards: int, language: str) -> None:
        self.num_shards = num_shards
        self.language = language
        self.untitled = Metrics.counter(METRICS_NAMESPACE, "lexical_products_without_text")
        self.buffers: dict[int, list[tuple[str, str, str, int]]] = {}

    def start_bundle(self) -> None:
        self.buffers = {}

    def process(self, row: Mapping[str, Any]) -> Iterator[tuple[int, ProductTexts]]:
        found = _text_of(row, self.language)
        if found is None:
            self.untitled.inc()
            return
        shard = shard_of(found[0], self.num_shards)
        buffer = self.buffers.setdefault(shard, [])
        buffer.append(found)
        if len(buffer) >= CHUNK_PRODUCTS:
            yield shard, _texts(self.buffers.pop(shard))

    def finish_bundle(self) -> Iterator[WindowedValue]:
        for shard in list(self.buffers):
            chunk = (shard, _texts(self.buffers.pop(shard)))
            yield WindowedValue(chunk, GlobalWindow().max_timestamp(), [GlobalWindow()])


def _previous_terms(folder: str | None) -> tuple[list[str], TermCounts] | None:
    """The ids and term counts of a previous build's shard, verified; None when it has none to give."""
    if not folder:
        return None
    try:
        lexical = load_shard_lexical(Path(folder), counts=True)
    except (IndexArtifactError, OSError, ValueError) as err:
        LOGGER.warning(
            "BM25: the previous shard %s cannot be reused (%s): every product is analyzed", folder, err
        )
        return None
    if lexical is None or lexical.terms is None:  # built without BM25, or before counts were saved
        return None
    return lexical.product_ids, lexical.terms


def count_terms(texts: ProductTexts, previous_folder: str | None = None) -> ShardTerms:
    """A shard's products counted, reusing the counts of the previous build's shard at `previous_folder`
    for every product whose text fingerprint it holds."""

    def analyze(positions: list[int]) -> list[list[str]]:
        return [analyzer(texts.languages[i]).words(texts.texts[i]) for i in positions]

    found = counted(texts.ids, texts.texts, texts.fingerprints, analyze, _previous_terms(previous_folder))
    return ShardTerms(texts.ids, texts.languages, found.terms, found.analyzed, found.reused)


class CountShardTerms(beam.DoFn):
    """(shard, `ProductTexts` chunks) -> (shard, `ShardTerms`), reusing the shard's previous counts."""

    def __init__(self, previous_shards: Sequence[str | None]) -> None:
        self.previous_shards = tuple(previous_shards)
        self.analyzed = Metrics.counter(METRICS_NAMESPACE, "lexical_products_analyzed")
        self.reused = Metrics.counter(METRICS_NAMESPACE, "lexical_products_reused")

    def process(self, element: tuple[int, Iterable[ProductTexts]]) -> Iterator[tuple[int, ShardTerms]]:
        shard, chunks = element
        previous = self.previous_shards[shard] if shard < len(self.previous_shards) else None
        terms = count_terms(ProductTexts.join(chunks), previous)
        self.analyzed.inc(terms.analyzed)
        self.reused.inc(terms.reused)
        LOGGER.info("BM25 shard %d: %d products analyzed, %d unchanged", shard, terms.analyzed, terms.reused)
        yield shard, terms


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
    """The catalog at `products` -> {"terms": (shard, ShardTerms), "statistics": one LexicalStatistics};
    shard i reuses the counts of `previous_shards[i]` (a previous build's shard folder, or None)."""

    def __init__(
        self,
        products: str,
        num_shards: int,
        settings: Bm25Settings,
        previous_shards: Sequence[str | None] = (),
    ) -> None:
        super().__init__()
        self.products = products
        self.num_shards = num_shards
        self.settings = settings
        self.previous_shards = tuple(previous_shards)

    def expand(self, pipeline: beam.Pipeline) -> dict[str, beam.PCollection]:
        terms = (
            pipeline
            | "ReadProducts"
            >> beam.io.ReadFromParquet(parquet_pattern(self.products), columns=PRODUCT_COLUMNS)
            | "KeyTexts" >> beam.ParDo(KeyTexts(self.num_shards, self.settings.language))
            | "GroupTexts" >> beam.GroupByKey()
            | "CountShardTerms" >> beam.ParDo(CountShardTerms(self.previous_shards))
        )
        statistics = (
            terms
            | "ShardStatistics" >> beam.Map(lambda keyed: keyed[1].statistics())
            | "CatalogStatistics" >> beam.CombineGlobally(CombineStatistics())
        )
        return {"terms": terms, "statistics": statistics}


def catalog_terms(
    products: str, settings: Bm25Settings, previous_folder: str | None = None
) -> tuple[ShardTerms, LexicalStatistics]:
    """`CatalogLexical` in this process, for a one-shard build: every product counted, and the statistics."""
    rows: list[tuple[str, str, str, int]] = []
    untitled = 0
    for row in parquet_rows(products, PRODUCT_COLUMNS):
        found = _text_of(row, settings.language)
        if found is None:
            untitled += 1
        else:
            rows.append(found)
    if untitled:
        LOGGER.warning("BM25: %d products of %s have no id or title: not indexed", untitled, products)
    terms = count_terms(_texts(rows), previous_folder)
    if terms.reused:
        LOGGER.info(
            "BM25: %d products analyzed, %d unchanged since %s", terms.analyzed, terms.reused, previous_folder
        )
    return terms, terms.statistics()


def shard_bm25(
    ids: Sequence[str],
    shard: ShardTerms | None,
    statistics: LexicalStatistics,
    settings: Bm25Settings,
    products: str,
) -> Bm25Index:
    """BM25 over one shard's indexed products `ids` (in their row order), from the catalog's counted
    products of that shard and the catalog's statistics; an indexed product the catalog lacks has no
    words."""
    if not statistics.documents:
        raise ValueError(
            f"--products {products} holds no product with a title: give the catalog the "
            "embeddings were made from, or build without BM25 (--lexical false)"
        )
    row_of = {pid: row for row, pid in enumerate(shard.ids)} if shard is not None else {}
    order = np.fromiter((row_of.get(pid, -1) for pid in ids), dtype=np.int64, count=len(ids))
    missing = int((order < 0).sum())
    if shard is None or missing == len(ids):
        raise ValueError(
            f"--products {products} holds none of the {len(ids):,} indexed products (such as "
            f"{next(iter(ids), '?')!r}) with a title: give the catalog the embeddings were made from"
        )
    if missing:
        LOGGER.warning("BM25: %d of %d indexed products have no title in %s", missing, len(ids), products)
    return Bm25Index.of_terms(ids, shard.terms.take(order), statistics, settings)


__all__ = [
    "CatalogLexical",
    "CombineStatistics",
    "CountShardTerms",
    "KeyTexts",
    "ProductTexts",
    "ShardTerms",
    "catalog_terms",
    "count_terms",
    "shard_bm25",
]
