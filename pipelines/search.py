"""`madr search`: what an index artifact returns for a query in words, with the products' annotations,
optionally filtered by aspect values the way a store's search page filters (brand = Nike, colour = red).

The query is encoded as the pipeline encodes queries (`EncoderModelHandler`, query side); the index is
searched with its schedule's entry for k (`ScannIndex.search`), and where the artifact carries BM25
(`madr build-index --products`) that ranking is fused with BM25's by reciprocal rank (`search_hybrid`).
Each result shows its title and, per aspect, the catalog's value or else the model's prediction at or
above the enrich threshold, with its confidence (`pipelines.embed.gap_fill.fill_aspects`, the rule
enrich and export-vertex follow). Filters match those same values, so a filter finds what `madr enrich`
would write.

A filter leaves a share of the catalog. The index is asked for k / share x `OVERFETCH` neighbours and
the matching ones kept; where that finds fewer than k though more match, or the share is below
`EXACT_BELOW_SHARE`, the matching products are scored exactly (their vectors from the embed output),
so a selective filter still returns k results when k exist.
"""

from __future__ import annotations

import difflib
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from apache_beam.io.filesystems import FileSystems

from index_builder import ExactSearcher, open_index
from model.abstention import folded_words
from model.aspects.vocabulary import normalise_value
from pipelines.artifacts import parquet_rows, read_embeddings, read_stage_manifest
from pipelines.catalog_fingerprint import CatalogFingerprint
from pipelines.embed.gap_fill import FilledAspect, fill_aspects
from pipelines.evaluate.calibration import encode_queries
from pipelines.inference import TextToEncode
from pipelines.options import DEFAULT_PREDICTION_THRESHOLD, ModelSettings
from pipelines.verify import check_same_model
from schemas.manifest import ArtifactError
from schemas.terminal_text import for_terminal

# Ask the index for this many times k / (share of products a filter keeps).
OVERFETCH = 2.0
# Below this share of the catalog, a filter's products are scored exactly instead of over-fetched.
EXACT_BELOW_SHARE = 0.01
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
    min_confidence: float = DEFAULT_PREDICTION_THRESHOLD
    # Fuse BM25's ranking with the dense one when the artifact carries BM25 (`build-index --products`).
    lexical: bool = True

    def __post_init__(self) -> None:
        if self.k < 1:
            raise ValueError(f"--k must be >= 1, got {self.k}")
        if not self.queries:
            raise ValueError("nothing to search: give --query TEXT or --queries FILE")
        if not 0 <= self.min_confidence <= 1:
            raise ValueError(f"--min_confidence must be in [0, 1], got {self.min_confidence}")


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


def filter_key(value: str) -> str:
    """A value as --filter compares it: case, accents and punctuation aside ("creme" is "Crème", "t shirt"
    is "T-Shirt"), as `--help` says; a value of no letters or digits by its case-folded spelling."""
    return folded_words(value).strip() or normalise_value(value)


# The title shown for an indexed product the catalog no longer has.
NOT_IN_PRODUCTS = "(not in --products)"


@dataclass
class Catalog:
    """The indexed products' titles and annotated aspect values, row i being the index's row i."""

    ids: Sequence[str]
    titles: list[str]
    aspects: list[dict[str, FilledAspect]]
    embeddings: str
    _vectors: np.ndarray | None = field(default=None, repr=False)
    # Said on stderr before the results: the catalog shown is not the one the vectors were made from.
    warning: str | None = None

    def matching(self, filters: Sequence[tuple[str, str]]) -> np.ndarray:
        """Rows whose value of every filtered aspect is the filter's (case and accents aside)."""
        keep = np.ones(len(self.ids), dtype=bool)
        for aspect, value in filters:
            self.check_filter(aspect, value)
            wanted = filter_key(value)
            keep &= np.array(
                [
                    aspect in row and any(filter_key(v) == wanted for v in row[aspect].values)
                    for row in self.aspects
                ],
                dtype=bool,
            )
        return np.flatnonzero(keep)

    def known_values(self, aspect: str) -> dict[str, str]:
        """Normalised -> spelt value of `aspect` over the catalog."""
        values: dict[str, str] = {}
        for row in self.aspects:
            for value in row[aspect].values if aspect in row else ():
                values.setdefault(filter_key(value), value)
        return values

    def check_filter(self, aspect: str, value: str) -> None:
        known_aspects = sorted({name for row in self.aspects for name in row})
        if aspect not in known_aspects:
            raise ValueError(
                f"unknown aspect {aspect!r} in --filter: the catalog's products have {known_aspects}"
            )
        values = self.known_values(aspect)
        if filter_key(value) not in values:
            close = difflib.get_close_matches(filter_key(value), list(values), n=5, cutoff=0.6)
            hint = f"; nearest known values: {', '.join(values[c] for c in close)}" if close else ""
            raise ValueError(
                f"no product has {aspect} = {value!r} ({len(values)} known {aspect} values){hint}"
            )

    def vectors(self, rows: np.ndarray) -> np.ndarray:
        """The embeddings of `rows` (read from the embed output once, on first use)."""
        if self._vectors is None:
            ids, matrix, _ = read_embeddings(self.embeddings)
            position = {pid: i for i, pid in enumerate(ids)}
            self._vectors = matrix[[position[pid] for pid in self.ids]]
        return self._vectors[rows]


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
    return Catalog(
        index_ids, [titles.get(pid, NOT_IN_PRODUCTS) for pid in index_ids], aspects, embeddings
    )


def open_search(config: SearchConfig) -> tuple[Any, Catalog]:
    """The index (refused when another model made it) and its catalog view."""
    manifest_path = FileSystems.join(config.index, "manifest.json")
    if not FileSystems.exists(manifest_path):
        raise ArtifactError(
            f"--index {config.index} has no manifest.json: give the folder `madr build-index` wrote"
        )
    check_same_model(config.model, {"--index": config.index})
    index = open_index(config.index)
    if not hasattr(index, "dimension"):
        raise ArtifactError(
            f"--index {config.index} is a sparse (UHD) inverted index: madr search reads dense ones"
        )
    manifest = index.manifest
    embeddings = (manifest.extra if manifest is not None else {}).get("embeddings")
    if not embeddings:
        raise ArtifactError(f"--index {config.index} does not record the embeddings it was built from")
    if config.products:  # named by the user: shown as it is now, no warning
        return index, load_catalog(index.ids, embeddings, config.products, config.min_confidence)
    recorded = read_stage_manifest(embeddings, "madr-embeddings")
    catalog = load_catalog(index.ids, embeddings, recorded["products"], config.min_confidence)
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
    vectors = encode_queries(list(config.queries), ModelSettings(config.model))
    results = []
    for query, vector in zip(config.queries, vectors, strict=True):
        started = time.perf_counter()
        hybrid = query.text if config.lexical and index.lexical is not None else None
        rows, scores, how = _search_one(index, catalog, vector[None, :], config.k, allowed, hybrid)
        seconds = time.perf_counter() - started
        hits = [
            Hit(rank, float(score), catalog.ids[row], catalog.titles[row], catalog.aspects[row])
            for rank, (row, score) in enumerate(zip(rows, scores, strict=True), start=1)
        ]
        matching = None if allowed is None else len(allowed)
        results.append(QueryHits(query.key, query.text, hits, seconds, how, matching))
    return results


def _search_one(
    index: Any,
    catalog: Catalog,
    query: np.ndarray,
    k: int,
    allowed: np.ndarray | None,
    text: str | None = None,
) -> tuple[list[int], list[float], str]:
    """Rows and scores of one query's results, and how they were found. With `text`, the index's
    ranking is fused with its BM25 ranking of the text (scores then the fused ones)."""
    n = len(catalog.ids)
    if text is not None:
        index_search, source = (lambda q, depth: index.search_hybrid(q, [text], depth)), "index + BM25, RRF"
    else:
        index_search, source = index.search, "index"
    if allowed is None:
        found = index_search(query, k)
        return found.indices[0].tolist(), found.scores[0].tolist(), source
    want = min(k, len(allowed))
    if not want:
        return [], [], "no product matches every filter"
    share = len(allowed) / n
    if share >= EXACT_BELOW_SHARE:
        fetch = min(n, math.ceil(k / share * OVERFETCH))
        found = index_search(query, fetch)
        keep = np.isin(found.indices[0], allowed)
        rows, scores = found.indices[0][keep][:k], found.scores[0][keep][:k]
        if len(rows) >= want:
            return rows.tolist(), scores.tolist(), f"{source}, over-fetched {fetch:,}"
    exact = ExactSearcher(catalog.vectors(allowed), [catalog.ids[row] for row in allowed])
    found = exact.search(query, want)
    rows = allowed[found.indices[0]]
    return rows.tolist(), found.scores[0].tolist(), f"scored exactly over the {len(allowed):,} matching"


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
