"""BM25 beside the dense index, and reciprocal rank fusion: the ranking a search server gets.

A team that skips madr has two cheap options: BM25 over the product text, and BM25 fused with the
backbone used zero-shot by reciprocal rank (Cormack, Clarke & Büttcher, SIGIR 2009: score = Σ 1 / (k +
rank), k = 60). The evaluation reports both beside the zero-shot row (`pipelines.evaluate.lexical`).
Fused with an adapted model's own ranking, BM25 puts madr ahead of both on catalogs it never saw
(docs/RESULTS.md), so an index artifact carries a `Bm25Index` (`index_builder.bm25`) in each of its
shards (`ScannIndex.with_lexical`), scored with the whole catalog's statistics: `ShardedBm25` merges the
shards' BM25 rankings by score into the catalog's, and `hybrid_search` fuses it with the dense ranking.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

import numpy as np

from index_builder.artifact import (
    REBUILD_HINT,
    IndexArtifactError,
    IndexManifest,
    copy_verified_files,
    read_verified_ids,
)
from index_builder.bm25 import EMPTY_RANKING, Bm25Index, Bm25Settings, Ranking
from index_builder.searcher import SearchResult, make_result


class DenseIndex(Protocol):
    """What `hybrid_search` needs of a dense index: its size and a top-k search of query vectors."""

    @property
    def size(self) -> int: ...

    def search(self, queries: np.ndarray, k: int) -> SearchResult: ...


class LexicalIndex(Protocol):
    """What `hybrid_search` needs of BM25: the products in corpus row order, and each query's ranking."""

    @property
    def product_ids(self) -> list[str]: ...

    def search(self, queries: Sequence[str], depth: int) -> list[Ranking]: ...


RRF_K = 60  # Cormack et al. 2009; Elasticsearch's and OpenSearch's default rank_constant


class ShardedBm25:
    """The BM25 indexes of a partitioned index's shards searched as one: each shard's ranking (its rows
    moved by the shard's offset), merged by score, ties by product key, as one index over the catalog
    ranks them (the shards score with the catalog's statistics, `index_builder.bm25`)."""

    def __init__(self, shards: Sequence[Bm25Index], offsets: Sequence[int]) -> None:
        if len(shards) != len(offsets) or not shards:
            raise ValueError(f"{len(shards)} BM25 shards for {len(offsets)} offsets")
        languages = {shard.query_language for shard in shards}
        if len(languages) != 1:
            raise ValueError(f"the shards analyze queries in different languages: {sorted(languages)}")
        if any(shard.statistics != shards[0].statistics for shard in shards):
            raise ValueError("the shards' BM25 were scored with different catalog statistics")
        self.shards = tuple(shards)
        self.offsets = tuple(offsets)
        self.settings = shards[0].settings
        self.query_language = shards[0].query_language
        self.product_ids = [pid for shard in shards for pid in shard.product_ids]

    def __len__(self) -> int:
        return len(self.product_ids)

    def search(self, queries: Sequence[str], depth: int) -> list[Ranking]:
        words = self.shards[0].query_words(queries)  # one analysis: every shard analyzes queries alike
        return [self._merged([s.rank(w, depth) for s in self.shards], depth) for w in words]

    def _merged(self, rankings: Sequence[Ranking], depth: int) -> Ranking:
        parts = zip(rankings, self.offsets, self.shards, strict=True)
        found = [(ranking, offset, shard) for ranking, offset, shard in parts if len(ranking.rows)]
        if not found:
            return EMPTY_RANKING
        rows = np.concatenate([ranking.rows + offset for ranking, offset, _ in found])
        scores = np.concatenate([ranking.scores for ranking, _, _ in found])
        keys = np.concatenate([shard.keys[ranking.rows] for ranking, _, shard in found])
        order = np.lexsort((keys, -scores))[:depth]  # ties by product key, as each shard orders them
        return Ranking(rows[order], scores[order])


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


def load_lexical(
    directory: Path, manifest: IndexManifest, ids: Sequence[str], counts: bool = False
) -> Bm25Index | None:
    """The artifact's BM25 index, loaded from a private copy of the bytes its manifest vouches for (with
    `counts`, its term counts too: what the next build of the shard reuses)."""
    if not any(name.startswith(f"{LEXICAL_DIR}/") for name in manifest.files):
        return None
    with tempfile.TemporaryDirectory(prefix="madr-lexical-") as private:
        copy_verified_files(directory, manifest, f"{LEXICAL_DIR}/", Path(private))
        try:
            return Bm25Index.load(Path(private) / LEXICAL_DIR, ids, counts)
        except (OSError, ValueError, KeyError) as err:
            raise IndexArtifactError(
                f"{directory / LEXICAL_DIR} cannot be loaded: {err}; {REBUILD_HINT}"
            ) from err


def load_shard_lexical(directory: Path, counts: bool = False) -> Bm25Index | None:
    """One index artifact's BM25 and ids, verified, without its vectors: what a worker that ranks a shard
    by BM25 only needs (`pipelines.evaluate.sharded`), or with `counts` what the shard's next build reuses."""
    manifest, ids = read_verified_ids(directory)
    return load_lexical(directory, manifest, ids, counts)


def hybrid_search(
    index: DenseIndex, lexical: LexicalIndex | None, queries: np.ndarray, texts: Sequence[str], k: int
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
    "LexicalIndex",
    "Ranking",
    "ShardedBm25",
    "hybrid_search",
    "load_lexical",
    "load_shard_lexical",
    "reciprocal_rank_fusion",
]
