"""BM25 over a catalog's text, and reciprocal rank fusion: the baselines a search team builds first.

A team that skips madr has two cheap options: BM25 (bm25s, Lucene's scoring) over the product text,
and BM25 fused with the backbone used zero-shot by reciprocal rank (Cormack, Clarke & Büttcher,
SIGIR 2009: score = Σ 1 / (k + rank), k = 60). A trained model is worth shipping when it is ahead of
both, so the evaluation reports them beside the zero-shot row (`pipelines.evaluate.lexical`).

Tokens are lower-cased words with English stop words removed and Snowball's English stemmer applied
(PyStemmer); catalogs in other languages are stemmed the same way, as a one-analyzer Elasticsearch
index would. BM25 returns only products that share a term with the query, as Lucene does, so its
ranking can be shorter than the depth asked for.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import bm25s
import numpy as np
import Stemmer

RRF_K = 60  # Cormack et al. 2009; Elasticsearch's and OpenSearch's default rank_constant


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


class Bm25Index:
    """BM25 over ``texts`` (one per product id); `search` gives each query's matching rows, best first."""

    def __init__(self, product_ids: Sequence[str], texts: Sequence[str], settings: Bm25Settings) -> None:
        if len(product_ids) != len(texts):
            raise ValueError(f"{len(product_ids)} product ids for {len(texts)} texts")
        if not product_ids:
            raise ValueError("BM25 needs at least one product")
        self.settings = settings
        self.product_ids = list(product_ids)
        self._stemmer = Stemmer.Stemmer(settings.stemmer) if settings.stemmer else None
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


__all__ = ["RRF_K", "Bm25Index", "Bm25Settings", "Ranking", "reciprocal_rank_fusion"]
