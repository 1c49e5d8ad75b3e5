"""Scoring one search batch while its rankings stay (queries × k) corpus-row and score matrices.

At depth 10,000 a batch of 256 queries ranks 2.56 million products. Turning each into a Python
(product_id, score) pair, a dict per run row, or a position dict per query costs far more than the
search itself, so here nothing per ranked product is a Python object:

* a query's judged products (~20) are mapped to corpus rows once (`CorpusIds.rows`), then found in
  its row of the index matrix with numpy (`judged_ranks`), and the metrics take those ranks
  (`evaluate_ranks`);
* the run rows of the whole batch are one Arrow table (`run_table`): product ids are gathered from
  the corpus id column by row index in C++, in the `schemas.RUN_SCHEMA` layout.

Pure functions, no Beam: the evaluation stage's DoFn and the join benchmark's plain loop share them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from evaluation.metrics import MetricSpec, evaluate_ranks
from evaluation.relevance import RelevanceRule
from schemas import RUN_SCHEMA

NOT_IN_CORPUS = -1  # the corpus row of a judged product the searcher does not hold: never retrieved


class CorpusIds:
    """A searcher's product ids: an Arrow column to gather run rows from, and id -> corpus row."""

    def __init__(self, ids: Sequence[str]) -> None:
        self.column = pa.array(ids, type=pa.string())
        self._rows = {product_id: row for row, product_id in enumerate(ids)}

    def __len__(self) -> int:
        return len(self.column)

    def __contains__(self, product_id: object) -> bool:
        return product_id in self._rows

    def rows(self, product_ids: Iterable[str]) -> np.ndarray:
        """Corpus row of each product id, `NOT_IN_CORPUS` for ids the corpus lacks."""
        return np.fromiter((self._rows.get(pid, NOT_IN_CORPUS) for pid in product_ids), dtype=np.int64)


def judged_ranks(ranked_rows: np.ndarray, judged_rows: np.ndarray) -> np.ndarray:
    """1-based rank of each judged corpus row within one ranking (a row of corpus indices), inf if absent.

    A ranking holds each corpus row at most once; a judged row of `NOT_IN_CORPUS` is never found.
    Binary search of the k ranked rows among the few sorted judged rows: O(k log j), no Python loop.
    """
    ranks = np.full(judged_rows.shape, np.inf)
    if judged_rows.size == 0 or ranked_rows.size == 0:
        return ranks
    order = np.argsort(judged_rows, kind="stable")
    judged_sorted = judged_rows[order]
    slot = np.minimum(np.searchsorted(judged_sorted, ranked_rows), judged_sorted.size - 1)
    positions = np.flatnonzero(judged_sorted[slot] == ranked_rows)
    ranks[order[slot[positions]]] = positions + 1
    return ranks


def score_query(
    query_id: str,
    ranked_rows: np.ndarray,
    judgments: Mapping[str, int],
    corpus: CorpusIds,
    metrics: Sequence[MetricSpec],
    rule: RelevanceRule,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """One judged query's metric row and relevant-ranks row (`RELEVANT_RANKS_SCHEMA`).

    The relevant ranks (ascending ranks of the relevant judged products retrieved, and how many are
    relevant) are enough for recall at any k: the recall@k curve is drawn from them.
    """
    ranks = judged_ranks(ranked_rows, corpus.rows(judgments))
    values = evaluate_ranks(judgments, ranks, metrics, rule)
    relevant = np.fromiter((rule.is_positive(grade) for grade in judgments.values()), dtype=bool)
    found = np.sort(ranks[relevant & np.isfinite(ranks)]).astype(np.int64)
    return (
        {"query_id": query_id, **values},
        {"query_id": query_id, "num_relevant": int(relevant.sum()), "ranks": found.tolist()},
    )


def run_table(
    query_ids: Sequence[str], indices: np.ndarray, scores: np.ndarray, corpus: CorpusIds
) -> pa.Table:
    """A batch's run rows as one `RUN_SCHEMA` table: query i's row j is its rank j + 1 product."""
    num_queries, depth = indices.shape
    if len(query_ids) != num_queries or scores.shape != indices.shape:
        raise ValueError(f"{len(query_ids)} query ids, indices {indices.shape}, scores {scores.shape}")
    # A dictionary column decoded once is ~6x faster than gathering the query ids string by string.
    query_of_row = np.repeat(np.arange(num_queries, dtype=np.int32), depth)
    query_column = pa.DictionaryArray.from_arrays(
        pa.array(query_of_row), pa.array(list(query_ids), type=pa.string())
    ).cast(pa.string())
    product_column = corpus.column.take(pa.array(indices.reshape(-1).astype(np.int64, copy=False)))
    rank_column = pa.array(np.tile(np.arange(1, depth + 1, dtype=np.int32), num_queries))
    score_column = pa.array(scores.reshape(-1).astype(np.float32, copy=False))
    return pa.Table.from_arrays([query_column, product_column, rank_column, score_column], schema=RUN_SCHEMA)


__all__ = ["NOT_IN_CORPUS", "CorpusIds", "judged_ranks", "run_table", "score_query"]
