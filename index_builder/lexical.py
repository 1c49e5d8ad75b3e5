"""BM25 over a catalog's text, and reciprocal rank fusion: lexical retrieval beside the dense index.

A team that skips madr has two cheap options: BM25 (bm25s, Lucene's scoring) over the product text,
and BM25 fused with the backbone used zero-shot by reciprocal rank (Cormack, Clarke & Büttcher,
SIGIR 2009: score = Σ 1 / (k + rank), k = 60). The evaluation reports both beside the zero-shot row
(`pipelines.evaluate.lexical`). Fused with an adapted model's own ranking, BM25 puts madr ahead of
both on catalogs it never saw (docs/RESULTS.md), so an index artifact can carry a `Bm25Index` over
the same products (`ScannIndex.with_lexical`), saved as bm25s' own JSON and .npy files (no pickle).

Tokens are lower-cased words with English stop words removed and Snowball's English stemmer applied
(PyStemmer); catalogs in other languages are stemmed the same way, as a one-analyzer Elasticsearch
index would. BM25 returns only products that share a term with the query, as Lucene does, so its
ranking can be shorter than the depth asked for.
"""

from __future__ import annotations

import dataclasses
import json
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import bm25s
import numpy as np
import Stemmer

from index_builder.artifact import REBUILD_HINT, IndexArtifactError, IndexManifest, copy_verified_files
from index_builder.searcher import SearchResult, make_result


class DenseIndex(Protocol):
    """What `hybrid_search` needs of a dense index: its size and a top-k search of query vectors."""

    @property
    def size(self) -> int: ...

    def search(self, queries: np.ndarray, k: int) -> SearchResult: ...


RRF_K = 60  # Cormack et al. 2009; Elasticsearch's and OpenSearch's default rank_constant
SETTINGS_FILE = "bm25.json"


@dataclass(frozen=True)
class Ranking:
    """One query's ranking: corpus rows best first, and their scores."""

    rows: np.ndarray
    scores: np.ndarray


@dataclass(frozen=True)
class Bm25Settings:
    """Lucene's BM25 parameters and the analyzer; the defaults are Elasticsearch's."""

    k1: float = 1.2
    b: float = 0.75
    stemmer: str = "english"  # a Snowball language PyStemmer knows, or "" for none
    stopwords: str = "en"  # bm25s' list, or "" for none

    def __post_init__(self) -> None:
        if self.k1 < 0 or not 0 <= self.b <= 1:
            raise ValueError(f"BM25 needs k1 >= 0 and 0 <= b <= 1, got k1={self.k1}, b={self.b}")
        if self.stemmer and self.stemmer not in Stemmer.algorithms():
            raise ValueError(f"unknown stemmer {self.stemmer!r}; PyStemmer knows {Stemmer.algorithms()}")

    def describe(self) -> str:
        analyzer = f"Snowball {self.stemmer} stemmer" if self.stemmer else "no stemmer"
        return f"BM25 (bm25s, Lucene scoring, k1 {self.k1:g}, b {self.b:g}, {analyzer})"


def _stemmer_of(settings: Bm25Settings) -> Stemmer.Stemmer | None:
    return Stemmer.Stemmer(settings.stemmer) if settings.stemmer else None


class Bm25Index:
    """BM25 over ``texts`` (one per product id); `search` gives each query's matching rows, best first."""

    def __init__(self, product_ids: Sequence[str], texts: Sequence[str], settings: Bm25Settings) -> None:
        if len(product_ids) != len(texts):
            raise ValueError(f"{len(product_ids)} product ids for {len(texts)} texts")
        if not product_ids:
            raise ValueError("BM25 needs at least one product")
        if not any(text.strip() for text in texts):
            raise ValueError("BM25 needs text: every product's text is empty")
        self.settings = settings
        self.product_ids = list(product_ids)
        self._stemmer = _stemmer_of(settings)
        self._retriever = bm25s.BM25(k1=settings.k1, b=settings.b, method="lucene")
        self._retriever.index(self._tokens(texts), show_progress=False)

    def _tokens(self, texts: Sequence[str]) -> list[list[str]]:
        return bm25s.tokenize(
            list(texts),
            stopwords=self.settings.stopwords or None,
            stemmer=self._stemmer,
            return_ids=False,
            show_progress=False,
        )

    def __len__(self) -> int:
        return len(self.product_ids)

    def save(self, directory: str | Path) -> None:
        """bm25s' sparse score matrix and vocabulary (JSON and .npy), and the settings beside them."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        self._retriever.save(str(directory), allow_pickle=False)
        document = {"settings": dataclasses.asdict(self.settings), "count": len(self.product_ids)}
        (directory / SETTINGS_FILE).write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")

    @classmethod
    def load(cls, directory: str | Path, product_ids: Sequence[str]) -> Bm25Index:
        """The index `save` wrote, over `product_ids` in the order it was built with (checked by count)."""
        directory = Path(directory)
        document = json.loads((directory / SETTINGS_FILE).read_text(encoding="utf-8"))
        if document["count"] != len(product_ids):
            raise ValueError(
                f"{directory} indexes {document['count']} products, but {len(product_ids)} ids were given"
            )
        index = cls.__new__(cls)
        index.settings = Bm25Settings(**document["settings"])
        index.product_ids = list(product_ids)
        index._stemmer = _stemmer_of(index.settings)
        index._retriever = bm25s.BM25.load(str(directory), allow_pickle=False)
        return index

    def search(self, queries: Sequence[str], depth: int, batch_size: int = 256) -> list[Ranking]:
        """Each query's matching products (rows of ``product_ids``), best first, at most ``depth``."""
        if depth < 1:
            raise ValueError(f"depth must be >= 1, got {depth}")
        depth = min(depth, len(self.product_ids))
        tokens = self._tokens(queries)
        empty = Ranking(np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float32))
        rankings = [empty] * len(queries)
        # bm25s refuses a query with no token the index knows: such a query simply matches nothing.
        vocabulary = self._retriever.vocab_dict
        known = [i for i, query in enumerate(tokens) if any(token in vocabulary for token in query)]
        for start in range(0, len(known), batch_size):  # a batch's (queries x depth) matrices stay small
            chunk = known[start : start + batch_size]
            rows, scores = self._retriever.retrieve(
                [tokens[i] for i in chunk], k=depth, show_progress=False, n_threads=1
            )
            for i, row, row_scores in zip(chunk, np.asarray(rows), np.asarray(scores), strict=True):
                matched = row_scores > 0
                rankings[i] = Ranking(row[matched].astype(np.int64), row_scores[matched].astype(np.float32))
        return rankings


def reciprocal_rank_fusion(rankings: Sequence[np.ndarray], depth: int, k: int = RRF_K) -> Ranking:
    """Fuse rankings of corpus rows: score(d) = Σ 1 / (k + rank of d in each), best ``depth`` first.

    Ties keep the row order of the first ranking that holds them (a stable sort on the fused score).
    """
    if k < 0:
        raise ValueError(f"the RRF constant must be >= 0, got {k}")
    if depth < 1:
        raise ValueError(f"depth must be >= 1, got {depth}")
    rows = np.concatenate([np.asarray(r, dtype=np.int64) for r in rankings] or [np.empty(0, np.int64)])
    contributions = np.concatenate(
        [1.0 / (k + np.arange(1, len(r) + 1, dtype=np.float64)) for r in rankings] or [np.empty(0)]
    )
    unique, first_seen, inverse = np.unique(rows, return_index=True, return_inverse=True)
    fused = np.bincount(inverse, weights=contributions, minlength=unique.size)
    order = np.lexsort((first_seen, -fused))[:depth]
    return Ranking(unique[order], fused[order].astype(np.float32))


LEXICAL_DIR = "lexical"  # inside an index artifact: the Bm25Index over the artifact's own products
FUSION_DEPTH = 100  # each ranking fused to at least this depth: RRF's terms past it are ≤ 1/160


def load_lexical(directory: Path, manifest: IndexManifest, ids: Sequence[str]) -> Bm25Index | None:
    """The artifact's BM25 index, loaded from a private copy of the bytes its manifest vouches for."""
    if not any(name.startswith(f"{LEXICAL_DIR}/") for name in manifest.files):
        return None
    with tempfile.TemporaryDirectory(prefix="madr-lexical-") as private:
        copy_verified_files(directory, manifest, f"{LEXICAL_DIR}/", Path(private))
        try:
            return Bm25Index.load(Path(private) / LEXICAL_DIR, ids)
        except (OSError, ValueError, KeyError) as err:
            raise IndexArtifactError(
                f"{directory / LEXICAL_DIR} cannot be loaded: {err}; {REBUILD_HINT}"
            ) from err


def hybrid_search(
    index: DenseIndex, lexical: Bm25Index | None, queries: np.ndarray, texts: Sequence[str], k: int
) -> SearchResult:
    """`index`'s ranking (at least `FUSION_DEPTH` deep) fused with BM25's for each query's text by
    reciprocal rank (k 60): the top min(k, n) rows, scored by the fused score."""
    if lexical is None:
        raise ValueError("this index carries no BM25 index: build it with `madr build-index --products`")
    k_eff = min(k, index.size)
    depth = min(index.size, max(k_eff, FUSION_DEPTH))
    dense = index.search(queries, depth).indices
    if len(texts) != dense.shape[0]:
        raise ValueError(f"{len(texts)} query texts for {dense.shape[0]} query vectors")
    # BM25 ranks the same rows as the dense index: the artifact builds it over its ids, in their order.
    found = lexical.search(texts, depth)
    # Each fused ranking holds at least the dense ranking's depth >= k_eff rows.
    fused = [
        reciprocal_rank_fusion([rows, words.rows], k_eff) for rows, words in zip(dense, found, strict=True)
    ]
    indices = np.stack([ranking.rows for ranking in fused])
    scores = np.stack([ranking.scores for ranking in fused])
    return make_result(indices, scores, np.asarray(lexical.product_ids, dtype=object))


__all__ = [
    "FUSION_DEPTH",
    "LEXICAL_DIR",
    "RRF_K",
    "Bm25Index",
    "Bm25Settings",
    "Ranking",
    "hybrid_search",
    "load_lexical",
    "reciprocal_rank_fusion",
]
