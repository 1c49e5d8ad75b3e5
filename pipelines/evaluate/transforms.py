"""The Beam transforms of the evaluation stage: join judgments to query embeddings, then search and score.

    (query_id, embedding) + judgments --JoinJudgments--> JudgedQuery --SearchAndScore--> per_query,
                                                                                          relevant_ranks,
                                                                                          run (Arrow tables)

The join is on the small side of the problem: a query's embedding (128 floats) and its judgments (~20)
meet by query_id *before* search. One DoFn then searches a batch of joined queries and scores it in
place, so the 10,000-deep rankings never cross a shuffle and are never coded element by element; they
leave the DoFn only as one Arrow table of run rows per batch (see evaluation/ranked.py).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import apache_beam as beam
import numpy as np
from apache_beam import pvalue
from apache_beam.metrics import Metrics
from apache_beam.utils import shared

from evaluation.metrics import MetricSpec
from evaluation.ranked import CorpusIds, run_table, score_query
from evaluation.relevance import RelevanceRule
from pipelines.evaluate.searchers import CorpusSearcher, SearcherSource
from pipelines.io.catalog_io import METRICS_NAMESPACE
from schemas import RUN_SCHEMA


@dataclass(frozen=True)
class JudgedQuery:
    """A query of the evaluated split: its embedding, its judgments ({} when it has none) and its text
    (what BM25 reads; "" when the join was given no texts)."""

    query_id: str
    vector: np.ndarray
    judgments: Mapping[str, int]
    text: str = ""


def _judged_query(joined: tuple[str, Mapping[str, Any]]) -> Iterator[JudgedQuery]:
    query_id, groups = joined
    # A judged query outside the evaluated split has no embedding: nothing is searched, nothing scored.
    for vector in list(groups["embedded"])[:1]:
        judgments = {product_id: grade for product_id, grade in groups["judgments"]}
        text = next(iter(groups.get("texts", ())), "")
        yield JudgedQuery(query_id, vector, judgments, text)


class JoinJudgments(beam.PTransform):
    """{"embedded": (query_id, embedding), "judgments": judgment records[, "texts": (query_id, text)]} ->
    one JudgedQuery per query."""

    def expand(self, inputs: Mapping[str, beam.PCollection]) -> beam.PCollection:
        judgments = inputs["judgments"] | "ByQuery" >> beam.Map(
            lambda j: (j["query_id"], (j["product_id"], j["grade"]))
        )
        grouped = {"embedded": inputs["embedded"], "judgments": judgments}
        if "texts" in inputs:
            grouped["texts"] = inputs["texts"]
        return (
            grouped
            | beam.CoGroupByKey()
            | beam.FlatMap(_judged_query).with_output_types(JudgedQuery)
        )


class _SearchAndScoreFn(beam.DoFn):
    RUN = "run"
    RANKS = "relevant_ranks"

    def __init__(
        self,
        source: SearcherSource,
        depth: int,
        metrics: Sequence[MetricSpec],
        rule: RelevanceRule,
        emit_run: bool,
        counter_suffix: str,
    ) -> None:
        self.source = source
        self.depth = depth
        self.metrics = tuple(metrics)
        self.rule = rule
        self.emit_run = emit_run
        # One searcher per worker process, however many DoFn instances the runner makes (threads,
        # bundles, a second search of the same source): at 100M products a copy is about 51 GB.
        self.shared_searcher = shared.Shared()
        self.searcher: CorpusSearcher | None = None
        self.corpus: CorpusIds | None = None
        self.searched = Metrics.counter(METRICS_NAMESPACE, "queries_searched" + counter_suffix)
        self.unjudged = Metrics.counter(METRICS_NAMESPACE, "queries_without_judgments" + counter_suffix)
        self.scored = Metrics.counter(METRICS_NAMESPACE, "queries_scored" + counter_suffix)
        # Judged products the searched catalog lacks (removed since judging, or never in it): a miss that
        # no model could avoid, so they are left out of the scores and counted instead.
        self.not_in_catalog = Metrics.counter(METRICS_NAMESPACE, "judgments_not_in_catalog" + counter_suffix)

    def setup(self) -> None:
        self.searcher = self.shared_searcher.acquire(self.source.open, tag=repr(self.source))
        self.corpus = CorpusIds(self.searcher.ids)

    def process(self, batch: Sequence[JudgedQuery]) -> Iterator[Any]:
        assert self.searcher is not None and self.corpus is not None, "setup() opens the searcher"
        vectors = np.stack([query.vector for query in batch]).astype(np.float32, copy=False)
        found = self.searcher.search(vectors, min(self.depth, self.searcher.size))
        self.searched.inc(len(batch))
        if self.emit_run:
            query_ids = [query.query_id for query in batch]
            yield pvalue.TaggedOutput(
                self.RUN, run_table(query_ids, found.indices, found.scores, self.corpus)
            )
        for query, ranked_rows in zip(batch, found.indices, strict=True):
            judgments = {pid: grade for pid, grade in query.judgments.items() if pid in self.corpus}
            self.not_in_catalog.inc(len(query.judgments) - len(judgments))
            if not judgments:
                self.unjudged.inc()  # searched and in the run, but there is nothing to score it against
                continue
            self.scored.inc()
            per_query, relevant_ranks = score_query(
                query.query_id, ranked_rows, judgments, self.corpus, self.metrics, self.rule
            )
            yield per_query
            yield pvalue.TaggedOutput(self.RANKS, relevant_ranks)


class SearchAndScore(beam.PTransform):
    """JudgedQuery -> {"per_query": metric rows, "relevant_ranks": rows, "run": `RUN_SCHEMA` Arrow tables}.

    ``source.open()`` gives the searcher, once per worker process (a Beam `Shared` handle: every copy of
    the DoFn a runner unpickles in a process shares it); queries are searched ``batch_size`` at a time to
    ``depth``, capped at the corpus size. ``emit_run=False`` skips the run tables of a searcher whose
    run is not kept; ``counter_suffix`` names the counters of a second searcher in the same job.
    """

    def __init__(
        self,
        source: SearcherSource,
        depth: int,
        metrics: Sequence[MetricSpec],
        rule: RelevanceRule,
        batch_size: int,
        emit_run: bool = True,
        counter_suffix: str = "",
    ) -> None:
        super().__init__()
        self.fn = _SearchAndScoreFn(source, depth, metrics, rule, emit_run, counter_suffix)
        self.batch_size = batch_size

    def expand(self, queries: beam.PCollection) -> dict[str, beam.PCollection]:
        scored = (
            queries
            | beam.BatchElements(min_batch_size=1, max_batch_size=self.batch_size)
            | beam.ParDo(self.fn).with_outputs(
                _SearchAndScoreFn.RUN, _SearchAndScoreFn.RANKS, main="per_query"
            )
        )
        return {
            "per_query": scored.per_query,
            "relevant_ranks": scored[_SearchAndScoreFn.RANKS],
            "run": scored[_SearchAndScoreFn.RUN],
        }


class WriteRun(beam.PTransform):
    """`RUN_SCHEMA` Arrow tables -> ``<prefix>-SSSSS-of-NNNNN.parquet`` (snappy), each table written as is."""

    def __init__(self, prefix: str) -> None:
        super().__init__()
        self.prefix = prefix

    def expand(self, tables: beam.PCollection) -> beam.pvalue.PDone:
        return tables | beam.io.WriteToParquetBatched(
            self.prefix,
            schema=RUN_SCHEMA,
            shard_name_template="-SSSSS-of-NNNNN",
            file_name_suffix=".parquet",
            codec="snappy",
        )


__all__ = ["JoinJudgments", "JudgedQuery", "SearchAndScore", "WriteRun"]
