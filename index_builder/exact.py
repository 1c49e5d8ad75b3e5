"""Exact top-k by dot product: the ground truth the ScaNN index is measured against.

It must be right before it is fast, so ties are resolved exactly (by corpus index,
even at the k-th place), and memory is bounded: queries are scored in blocks against
chunks of the corpus, never as the whole (q × n) matrix, which at 10k queries × 1M
products would be 40 GB.

How it is fast (issue 12): one float32 ``torch.mm`` per (query block × corpus chunk),
on torch's threads, as FAISS ``IndexFlatIP`` does with its BLAS. A chunk is never
ranked: only its scores strictly above each query's cut survive (found by a max over
runs of 64 scores while survivors are rare, else by one numpy comparison and
``flatnonzero``, far cheaper than ``torch.topk`` over the chunk), and the survivors,
few once the cut is good, are merged into the top-k whenever k of them wait. The cut
is the current k-th score, seeded by the first chunk's; for large k it starts higher,
from a strided sample of the corpus (`_BlockSearch._sample_threshold`), and the few
queries that sample misleads are searched again without it.

Tie order: score descending, then corpus row ascending, exactly. Every candidate is
ranked by one int64 key, the score's bits made order-preserving and inverted in the
high half and its corpus row in the low half, so that ``torch.topk`` and ``np.sort``
of keys settle ties by row with no special case. A later chunk's score equal to the
current k-th would lose its tie (its row is higher), so survivors need only beat the
cut strictly: duplicated products do not flood the merges.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence

import numpy as np
import torch

from index_builder.searcher import (
    CorpusRows,
    SearchResult,
    as_corpus,
    as_query_matrix,
    effective_k,
    make_result,
)

# Working memory per query block: scores, survivor extraction and top-k keys (see `_bytes_per_query`).
DEFAULT_BLOCK_BYTES = 512 * 1024 * 1024
# Corpus rows per matrix product and queries per block. A 1024 × 2048 score tile (8 MB) keeps the
# product compute-bound, stays in cache for the survivor filter, and is few enough products that the
# per-call costs (Python, thread wake-ups) stay small; 512 × 2048 and 1024 × 4096 measured about the same.
DEFAULT_CHUNK_SIZE = 2048
MAX_QUERY_BLOCK = 1024
# Seeded from the first chunk, a query keeps about k·ln(n / chunk) survivors; from the sample, about
# k + (8 + 4·sqrt(k·s/n + 4))·n/s for a sample of s rows. The sample's extra product and top-k pay off
# from a few hundred k.
SAMPLE_MIN_K = 256
# At most an eighth of the corpus, at least the first chunk: a sample of 8192 rows costs 4 % more
# products at 200k rows and halves the survivors against one of 2048 (the default first chunk).
SAMPLE_ROWS = 8192
# How the survivors of a chunk are found depends on how many the previous chunk had (`_Survivors.add`):
# while at most a quarter of the runs of `_SEGMENT` scores hold one, by the max of each run (one cheap
# pass), then only in the runs whose max beats the cut; else by comparing every score.
_SEGMENT = 64
_HOT_FRACTION = 0.25
# Bytes per query: per score (float32), per chunk score when every one survives (a bool mask, a
# float32 copy, then seven int64 arrays: flat index, row, column, place, key and temporaries), and per
# top-k key (in the top-k, the merge matrix, and torch.topk's int64 values and indices).
_SCORE_BYTES = 4
_SURVIVOR_BYTES = 1 + 4 + 7 * 8
_KEY_BYTES = 4 * 8
# Keys hold the corpus row in their low 32 bits; row 2^32 - 1 marks padding, so a corpus holds fewer.
_ROW_BITS = 32
_ROW_MASK = (1 << _ROW_BITS) - 1
# |q·e| <= d · max|q| · max|e|; below this no score (nor partial sum) can overflow float32, so no score
# is ±inf or NaN and -inf is free to mark padding.
_SCORE_LIMIT = 1e38


class ExactSearcher(CorpusRows):
    """Brute-force top-k over an in-memory corpus; same contract as `ScannIndex.search`.

    Args:
        embeddings: (n, d) float vectors, stored as float32.
        ids: n unique product ids; ``ids[i]`` names row i.
        max_block_bytes: working-memory budget per query block.
        chunk_size: corpus rows scored per matrix product.
    """

    def __init__(
        self,
        embeddings: np.ndarray,
        ids: Sequence[str],
        *,
        max_block_bytes: int = DEFAULT_BLOCK_BYTES,
        chunk_size: int = DEFAULT_CHUNK_SIZE,
    ) -> None:
        self._embeddings, self._ids = as_corpus(embeddings, ids)
        if max_block_bytes < 1:
            raise ValueError(f"max_block_bytes must be positive, got {max_block_bytes}")
        if chunk_size < 1:
            raise ValueError(f"chunk_size must be positive, got {chunk_size}")
        if self.size >= _ROW_MASK:
            raise ValueError(f"at most {_ROW_MASK - 1} embeddings, got {self.size}")
        self._max_block_bytes = max_block_bytes
        self._chunk_size = chunk_size
        self._largest = max(float(self._embeddings.max()), -float(self._embeddings.min()))

    @property
    def dimension(self) -> int:
        return int(self._embeddings.shape[1])

    @property
    def size(self) -> int:
        return int(self._embeddings.shape[0])

    @property
    def corpus(self) -> np.ndarray:
        """The float32 [n, dim] matrix it scores (row i is ``ids[i]``); not a copy."""
        return self._embeddings

    def __repr__(self) -> str:
        return f"ExactSearcher({self.size} × {self.dimension})"

    @property
    def corpus_chunk_size(self) -> int:
        """Corpus rows scored per matrix product (the first chunk widens to k when k is larger)."""
        return min(self._chunk_size, self.size)

    @property
    def query_block_size(self) -> int:
        """Queries scored at once for k = 1 (at least 1, at most `MAX_QUERY_BLOCK`)."""
        return self.query_block_size_for(1)

    def query_block_size_for(self, k: int) -> int:
        """Queries scored at once for top-``k`` so that one block's working memory fits the budget."""
        per_query = self._bytes_per_query(effective_k(k, self.size))
        return max(1, min(MAX_QUERY_BLOCK, self._max_block_bytes // per_query))

    def _bytes_per_query(self, k: int) -> int:
        first = self._first_width(k)
        scores = _SCORE_BYTES * max(first, self._sample_size(k))
        # Every score of the (first) chunk may survive; a merge holds up to k + first keys.
        return scores + _SURVIVOR_BYTES * first + _KEY_BYTES * (2 * k + first)

    def _sample_size(self, k: int) -> int:
        """Rows of the corpus sample that sets the first cut for large k; 0: no sample."""
        first = self._first_width(k)
        if k < SAMPLE_MIN_K or self.size < 8 * first:
            return 0
        return max(first, min(SAMPLE_ROWS, self.size // 8))

    def _first_width(self, k: int) -> int:
        # The first chunk seeds the top-k, so it must hold at least k rows.
        return min(self.size, max(self.corpus_chunk_size, k))

    def search(self, queries: np.ndarray, k: int) -> SearchResult:
        """Top-min(k, n) corpus rows per query by dot product, ties broken by lower row index."""
        matrix = as_query_matrix(queries, self.dimension)
        k_eff = effective_k(k, self.size)
        if matrix.size and self.dimension * float(np.abs(matrix).max()) * self._largest >= _SCORE_LIMIT:
            raise ValueError("queries and embeddings this large could overflow float32 scores")
        indices = np.empty((matrix.shape[0], k_eff), dtype=np.int64)
        scores = np.empty((matrix.shape[0], k_eff), dtype=np.float32)
        block = self.query_block_size_for(k_eff)
        search = _BlockSearch(self, k_eff, min(block, matrix.shape[0]))
        for start in range(0, matrix.shape[0], block):
            stop = min(matrix.shape[0], start + block)
            scores[start:stop], indices[start:stop] = search.run(matrix[start:stop])
        return make_result(indices, scores, self._ids)


class _BlockSearch:
    """The top-k of one block of queries at a time, with buffers reused across blocks and chunks."""

    def __init__(self, searcher: ExactSearcher, k: int, rows: int) -> None:
        self.k = k
        self.n = searcher.size
        self.chunk = searcher.corpus_chunk_size
        self.first = searcher._first_width(k)
        self.embeddings = searcher._embeddings
        # A fresh tensor per product would cost its page faults every time.
        sample_size = searcher._sample_size(k)
        self.score_buffer = torch.empty(rows * max(self.first, sample_size), dtype=torch.float32)
        self.mask_buffer = np.empty(rows * self.first, dtype=bool)
        # Below "highest", torch may multiply float32 in bfloat16 on CPUs that have it (TF32 on
        # GPUs): the ground truth would silently round. numpy's BLAS never does.
        self.exact_torch = torch.get_float32_matmul_precision() == "highest"
        self.sample: np.ndarray | None = None
        if sample_size:
            # Every stride-th row: spread over the whole corpus, whatever order it was written in.
            self.sample = np.ascontiguousarray(self.embeddings[:: math.ceil(self.n / sample_size)])

    def run(self, queries: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(scores, rows) of each query's top-k, sorted by score descending then row ascending."""
        threshold = None if self.sample is None else self._sample_threshold(queries)
        top = self._stream(queries, threshold)
        if threshold is not None:
            # A query whose sampled threshold overshot its true k-th score kept fewer than k rows.
            short = np.flatnonzero((top == _PADDING).any(axis=1))
            if short.size:
                top[short] = self._stream(queries[short], None)
        ordered = np.sort(top, axis=1)
        return _score_of(ordered), ordered & _ROW_MASK

    def _score(self, queries: np.ndarray, start: int, stop: int, *, sample: bool = False) -> torch.Tensor:
        """(queries × corpus rows start:stop) scores, written into the front of the score buffer."""
        rows, width = queries.shape[0], stop - start
        out = self.score_buffer[: rows * width].view(rows, width)
        corpus = self.sample if sample else self.embeddings
        assert corpus is not None
        if self.exact_torch:
            with warnings.catch_warnings():
                # A read-only (memory-mapped) corpus: torch only reads it here, so its warning that writing
                # through the tensor is undefined says nothing, and it printed in adapt, evaluate and search.
                warnings.filterwarnings("ignore", "The given NumPy array is not writable", UserWarning)
                left, block = torch.from_numpy(queries), torch.from_numpy(corpus[start:stop])
            torch.mm(left, block.T, out=out)
        else:
            np.matmul(queries, corpus[start:stop].T, out=out.numpy())
        return out

    def _sample_threshold(self, queries: np.ndarray) -> np.ndarray:
        """Per query, a score that at least k corpus rows beat, for all but a few queries in ten thousand.

        A sample of s of the n rows holds about j = k·s/n of the query's top k. About r·n/s corpus rows
        score above the sample's r-th best, give or take sqrt(r)·n/s; r = j + 8 + 4·sqrt(j + 4) solves
        r - 4·sqrt(r) = j, so fewer than k rows beat it only four standard deviations down. `run`
        searches such queries again without a threshold.
        """
        assert self.sample is not None
        size = self.sample.shape[0]
        expected = self.k * size / self.n
        rank = min(size, math.ceil(expected + 8 + 4 * math.sqrt(expected + 4)))
        scores = self._score(queries, 0, size, sample=True)
        return torch.topk(scores, rank, dim=1, sorted=False).values.amin(dim=1, keepdim=True).numpy()

    def _stream(self, queries: np.ndarray, threshold: np.ndarray | None) -> np.ndarray:
        """The keys of each query's exact top-k, unordered; with a ``threshold``, of rows above it only.

        Without one, the first chunk seeds the top-k. With one, the top-k starts as padding and a
        query left with padding had fewer than k rows above its threshold.
        """
        rows, k = queries.shape[0], self.k
        survivors = _Survivors(rows, self.mask_buffer)
        if threshold is None:
            scores = self._score(queries, 0, self.first)
            # Everything at least as high as the first chunk's k-th score: the ties with it too,
            # among which the keys pick the lowest rows.
            kth = torch.topk(scores, k, dim=1, sorted=False).values.amin(dim=1, keepdim=True)
            survivors.add(scores, kth.numpy(), 0, inclusive=True)
            top = survivors.merge(np.empty((rows, 0), dtype=np.int64), k)
            begin = self.first
        else:
            top = np.full((rows, k), _PADDING)
            begin = 0
        cut = _cut(top, threshold)
        for start in range(begin, self.n, self.chunk):
            stop = min(self.n, start + self.chunk)
            widest = survivors.add(self._score(queries, start, stop), cut, start)
            # Merging once k survivors wait keeps the merge cost linear in what survives, while the
            # k-th score (the cut) is raised often enough to keep the survivors few.
            if widest >= k:
                top = survivors.merge(top, k)
                cut = _cut(top, threshold)
        return survivors.merge(top, k) if survivors.waiting else top


def _key(scores: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """int64 keys that sort ascending as (score descending, row ascending); ``rows`` broadcasts."""
    # + 0.0 turns -0.0 into +0.0: equal scores, so their order must come from the row alone.
    bits = (scores + np.float32(0.0)).view(np.int32)
    # Negative floats sort backwards by their bits; flipping all but the sign bit fixes that.
    ordered = np.where(bits < 0, bits ^ np.int32(0x7FFFFFFF), bits)
    return ((~ordered).astype(np.int64) << _ROW_BITS) | rows


def _score_of(keys: np.ndarray) -> np.ndarray:
    """The float32 scores that ``keys`` were made from (bit for bit)."""
    ordered = ~(keys >> _ROW_BITS).astype(np.int32)
    return np.where(ordered < 0, ordered ^ np.int32(0x7FFFFFFF), ordered).view(np.float32)


# After every real key; reads back as a score of -inf, so a row of padding lets every score through.
_PADDING = int(_key(np.array([-np.inf], dtype=np.float32), np.array([_ROW_MASK]))[0])


def _smallest(keys: np.ndarray, k: int) -> np.ndarray:
    """Each row's k smallest keys, unordered (torch.topk: threaded, and faster than np.partition)."""
    return torch.topk(torch.from_numpy(keys), k, dim=1, largest=False, sorted=False).values.numpy()


def _cut(top: np.ndarray, threshold: np.ndarray | None) -> np.ndarray:
    """Each query's survival cut: its current k-th score, or its threshold when that is higher."""
    kth = _score_of(top.max(axis=1, keepdims=True))
    return kth if threshold is None else np.maximum(kth, threshold)


class _Survivors:
    """Keys of the scores that beat the cut, kept flat with their place in their query's row.

    The bookkeeping is numpy: its ``flatnonzero`` and comparisons run several times faster than
    torch's on these sizes, and small arrays cost it less per call.
    """

    def __init__(self, rows: int, mask_buffer: np.ndarray) -> None:
        self.rows = rows
        self.mask_buffer = mask_buffer
        self.filled = np.zeros(rows, dtype=np.int64)
        self.parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self.density = 0.0

    @property
    def waiting(self) -> bool:
        return bool(self.parts)

    def add(self, scores: torch.Tensor, cut: np.ndarray, offset: int, *, inclusive: bool = False) -> int:
        """Keep the scores above ``cut`` (or equal, if ``inclusive``); return the fullest row's count."""
        rows, width = scores.shape
        beats = np.greater_equal if inclusive else np.greater
        if self.density * _SEGMENT <= _HOT_FRACTION and width % _SEGMENT == 0:
            row, column, value = _above_by_segments(scores, cut, beats)
        else:
            mask = self.mask_buffer[: rows * width].reshape(rows, width)
            beats(scores.numpy(), cut, out=mask)
            flat = np.flatnonzero(mask)
            row, column = np.divmod(flat, width)
            value = scores.numpy().ravel()[flat]
        # Judged on this chunk, for the next: survivors per score.
        self.density = row.size / (rows * width)
        if row.size:
            counts = np.bincount(row, minlength=rows)
            # Survivors come row by row, so a survivor's place in its row is its rank in the list
            # minus the survivors of the rows before, after those this row already holds.
            before = np.cumsum(counts) - counts - self.filled
            place = np.arange(row.size) - before[row]
            self.parts.append((row, place, _key(value, column + offset)))
            self.filled += counts
        return int(self.filled.max())

    def merge(self, top: np.ndarray, k: int) -> np.ndarray:
        """The exact top-k of the keys in ``top`` and of the waiting survivors; empties the wait."""
        held = top.shape[1]
        keys = np.full((self.rows, held + int(self.filled.max())), _PADDING)
        keys[:, :held] = top
        row, place, key = (np.concatenate(part) for part in zip(*self.parts, strict=True))
        keys[row, place + held] = key
        self.parts.clear()
        self.filled[:] = 0
        return _smallest(keys, k)


def _above_by_segments(
    scores: torch.Tensor, cut: np.ndarray, beats: np.ufunc
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(row, column, score) of the scores that ``beats`` the cut, row by row, via segment maxima.

    One max over each run of `_SEGMENT` scores reads the chunk once, about a quarter of what a
    comparison of every score costs; only the runs whose max beats the cut are searched.
    """
    rows, width = scores.shape
    runs = width // _SEGMENT
    maxima = scores.view(rows, runs, _SEGMENT).amax(dim=2).numpy()
    hot = np.flatnonzero(beats(maxima, cut))
    segments = scores.numpy().reshape(rows * runs, _SEGMENT)[hot]
    found = np.flatnonzero(beats(segments, cut[hot // runs]))
    which, lane = np.divmod(found, _SEGMENT)
    row, run = np.divmod(hot[which], runs)
    return row, run * _SEGMENT + lane, segments.ravel()[found]
