"""`madr search`: what an index artifact returns for a query in words, with the products' annotations,
optionally filtered by aspect values the way a store's search page filters (brand = Nike, colour = red).

The query is encoded as the pipeline encodes queries (`EncoderModelHandler`, query side); the index is
searched with its schedule's entry for k (`ScannIndex.search`), and where the artifact carries BM25
(`madr build-index --products`) that ranking is fused with BM25's by reciprocal rank (`search_hybrid`).
Each result shows its title and, per aspect, the catalog's value or else the model's prediction at or
above the enrich threshold, with its confidence (`pipelines.embed.gap_fill.fill_aspects`, the rule
enrich and export-vertex follow). Filters match those same values, so a filter finds what `madr enrich`
would write.

Filtering, over-fetching and fusing are `serving.search.search_one`'s, which `madr serve` answers with
too; the catalog view is `serving.catalog.Catalog`, here read from the catalog and the embed output.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np
from apache_beam.io.filesystems import FileSystems

from index_builder import open_index
from index_builder.numpy_exact import NumpyExactSearcher
from model import Side
from pipelines.embed.gap_fill import FilledAspect, fill_aspects
from pipelines.inference import TextToEncode, load_text_encoder
from pipelines.io.parquet_reading import parquet_rows, read_embeddings
from pipelines.settings.options import ConfidenceThreshold, ModelSettings
from pipelines.storage.catalog_fingerprint import CatalogFingerprint
from pipelines.storage.stage_manifests import read_stage_manifest
from pipelines.storage.verify import check_same_model
from schemas.manifest import ArtifactError
from schemas.terminal_text import for_terminal
from serving.catalog import NOT_IN_PRODUCTS, Catalog
from serving.search import search_one

ANNOTATED_ASPECTS = ("category", "brand", "color")


def parse_filter(text: str) -> tuple[str, str]:
    """`brand=Nike` as (aspect, value); ValueError for anything else."""
    aspect, sep, value = text.partition("=")
    if not sep or not aspect.strip() or not value.strip():
        raise ValueError(f"--filter takes ASPECT=VALUE, e.g. --filter brand=Nike, got {text!r}")
    return aspect.strip().casefold(), value.strip()


@dataclass(frozen=True)
class SearchConfig:
    """One `madr search`: the artifact, the model that built it, what to search and how to filter."""

    index: str
    model: str
    queries: tuple[TextToEncode, ...]
    k: int = 10
    filters: tuple[tuple[str, str], ...] = ()
    products: str | None = None  # default: the products the index's embeddings were made from
    threshold: ConfidenceThreshold = field(default_factory=ConfidenceThreshold)
    # Fuse BM25's ranking with the dense one when the artifact carries BM25 (`build-index --products`).
    lexical: bool = True

    def __post_init__(self) -> None:
        if self.k < 1:
            raise ValueError(f"--k must be >= 1, got {self.k}")
        if not self.queries:
            raise ValueError("nothing to search: give --query TEXT or --queries FILE")


@dataclass(frozen=True)
class Hit:
    rank: int
    score: float
    product_id: str
    title: str
    aspects: dict[str, FilledAspect]


@dataclass(frozen=True)
class QueryHits:
    query_id: str
    text: str
    hits: list[Hit]
    seconds: float
    how: str  # "index", "index, over-fetched 40" or "exact over the 12 matching products"
    matching: int | None = None  # products the filters keep (None: no filter)


def load_catalog(index_ids: Sequence[str], embeddings: str, products: str, min_confidence: float) -> Catalog:
    """Titles and annotations of the indexed products: catalog values from `products`, predictions
    from the embed output's rows."""
    predicted: dict[str, tuple[dict, dict]] = {}
    for row in parquet_rows(embeddings, ["product_id", "aspect_values", "aspect_confidences"]):
        values, confidences = row["aspect_values"] or (), row["aspect_confidences"] or ()
        predicted[row["product_id"]] = (dict(values), dict(confidences))
    wanted = set(index_ids)
    titles: dict[str, str] = {}
    stated: dict[str, dict[str, list[str]]] = {}
    for row in parquet_rows(products, ["product_id", "title", "aspects"]):
        if row["product_id"] in wanted:
            titles[row["product_id"]] = row["title"]
            stated[row["product_id"]] = {k: list(v or ()) for k, v in (row["aspects"] or ())}
    aspects = []
    for pid in index_ids:
        values, confidences = predicted.get(pid, ({}, {}))
        names = sorted({*ANNOTATED_ASPECTS, *values, *stated.get(pid, {})})
        aspects.append(fill_aspects(stated.get(pid, {}), values, confidences, names, min_confidence))
    missing = len(wanted) - len(titles)
    if missing == len(wanted):
        raise ArtifactError(
            f"none of the index's {len(wanted):,} products is in --products {products}: give the catalog "
            "the index was built from"
        )
    titles_by_row = [titles.get(pid, NOT_IN_PRODUCTS) for pid in index_ids]
    return Catalog(index_ids, titles_by_row, aspects, partial(embedding_rows, embeddings, index_ids))


def embedding_rows(embeddings: str, index_ids: Sequence[str]) -> np.ndarray:
    """The embed output's vectors in the index's row order."""
    ids, matrix, _ = read_embeddings(embeddings)
    position = {pid: i for i, pid in enumerate(ids)}
    return matrix[[position[pid] for pid in index_ids]]


def open_search(config: SearchConfig) -> tuple[Any, Catalog]:
    """The index (refused when another model made it) and its catalog view."""
    min_confidence = config.threshold.min_confidence
    return open_index_and_catalog(config.index, config.model, config.products, min_confidence)


def open_index_and_catalog(
    index_dir: str, model: str, products: str | None, min_confidence: float
) -> tuple[Any, Catalog]:
    """The dense index at `index_dir` (refused when another model than `model` made it) and its catalog
    view: `products` (default: the catalog its embeddings were made from, with a warning if it changed)."""
    manifest_path = FileSystems.join(index_dir, "manifest.json")
    if not FileSystems.exists(manifest_path):
        raise ArtifactError(
            f"--index {index_dir} has no manifest.json: give the folder `madr build-index` wrote"
        )
    check_same_model(model, {"--index": index_dir})
    # Exact scoring in NumPy, as `madr serve` scores: a few queries need no blocked torch products, and one
    # scorer means a server ranks near-tied products as this command does (torch's and NumPy's float32
    # products round differently).
    index = open_index(index_dir, exact=NumpyExactSearcher)
    if not hasattr(index, "dimension"):
        raise ArtifactError(
            f"--index {index_dir} is a sparse (UHD) inverted index: madr search reads dense ones"
        )
    manifest = index.manifest
    embeddings = (manifest.extra if manifest is not None else {}).get("embeddings")
    if not embeddings:
        raise ArtifactError(f"--index {index_dir} does not record the embeddings it was built from")
    if products:  # named by the user: shown as it is now, no warning
        return index, load_catalog(index.ids, embeddings, products, min_confidence)
    recorded = read_stage_manifest(embeddings, "madr-embeddings")
    catalog = load_catalog(index.ids, embeddings, recorded["products"], min_confidence)
    catalog.warning = catalog_changed(recorded, catalog)
    return index, catalog


def catalog_changed(embed_manifest: Mapping[str, Any], catalog: Catalog) -> str | None:
    """A warning when the catalog the embed stage read was rewritten since (its files' fingerprint, which
    the stage recorded): the titles and values shown are today's beside the vectors of then."""
    recorded = embed_manifest.get("products_fingerprint")
    if not recorded:
        return None
    then = CatalogFingerprint.from_dict(recorded)
    now = CatalogFingerprint.maybe(then.pattern)
    difference = "its files are gone" if now is None else then.difference(now)
    if not difference:
        return None
    missing = catalog.titles.count(NOT_IN_PRODUCTS)
    return (
        f"warning: the catalog {then.pattern} changed since this index's products were embedded "
        f"({difference}); titles and catalog values shown are today's, and {missing:,} of the index's "
        f"{len(catalog.ids):,} products are no longer in it. Pass --products to name the catalog to show, "
        "or rebuild the index"
    )


def run_search(config: SearchConfig, index: Any, catalog: Catalog) -> list[QueryHits]:
    """Encode the queries, search, filter; one `QueryHits` per query, in order."""
    allowed = catalog.matching(config.filters) if config.filters else None  # a bad filter fails first
    # fp32 whatever the CPU: a handful of queries gains nothing from bf16, whose rounding reorders near-tied
    # products, and fp32 is what a serving bundle's graph encodes (`madr serve` answers these results).
    texts = [query.text for query in config.queries]
    vectors = load_text_encoder(ModelSettings(config.model, precision="fp32")).encode(texts, Side.QUERY)
    results = []
    for query, vector in zip(config.queries, vectors, strict=True):
        started = time.perf_counter()
        hybrid = query.text if config.lexical and index.lexical is not None else None
        rows, scores, how = search_one(index, catalog, vector[None, :], config.k, allowed, hybrid)
        seconds = time.perf_counter() - started
        hits = [
            Hit(rank, float(score), catalog.ids[row], catalog.titles[row], catalog.aspects[row])
            for rank, (row, score) in enumerate(zip(rows, scores, strict=True), start=1)
        ]
        matching = None if allowed is None else len(allowed)
        results.append(QueryHits(query.key, query.text, hits, seconds, how, matching))
    return results


def format_hits(result: QueryHits) -> str:
    """The lines `madr search` prints for one query."""
    matching = "" if not result.matching else f"; {result.matching:,} products match the filters"
    took = f"{result.seconds * 1000:.1f} ms"
    results = f"{len(result.hits)} result{'' if len(result.hits) == 1 else 's'}"
    # Query texts, ids, titles and values come from files and a model: each is escaped and cut.
    lines = [f'query "{for_terminal(result.text)}": {results} in {took} ({result.how}{matching})']
    for hit in result.hits:
        product, title = for_terminal(hit.product_id), for_terminal(hit.title)
        lines.append(f"{hit.rank:>4}  {hit.score:.4f}  {product}  {title}")
        notes = []
        for aspect, filled in sorted(hit.aspects.items()):
            value = for_terminal("/".join(filled.values))
            source = "catalog" if filled.confidence is None else f"predicted {filled.confidence:.2f}"
            notes.append(f"{aspect}={value} ({source})")
        if notes:
            lines.append("              " + "; ".join(notes))
    return "\n".join(lines)


def hits_table_rows(results: Sequence[QueryHits]) -> list[Mapping[str, Any]]:
    """Rows of `schemas.RUN_SCHEMA` (query_id, product_id, rank, score) for --output."""
    return [
        {"query_id": r.query_id, "product_id": h.product_id, "rank": h.rank, "score": h.score}
        for r in results
        for h in r.hits
    ]
