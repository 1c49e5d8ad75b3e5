"""The evaluation searched part by part: each worker holds one shard, never the whole catalog.

    parts --SearchPart (queries a side input)--> (query_id, PartHits) --+
    JudgedQuery ---------------------------------------------------------+--CoGroupByKey--> MergeAndScore
        --> per system: per-query metric rows, relevant ranks; run pieces --ByPart--> NameRunRows --> run

A dense part is one shard of an index artifact (ScaNN) or one file of an embed output (exact scoring); a
lexical part is one index shard's BM25 (`corpus_parts`). Each task opens its part, ranks every query,
and emits each query's best `part_depth` candidates: score and product key (`product_keys`), 12 bytes a
candidate, never a product id. A part need not send the whole depth: products are spread over hash
shards at random, so of a query's top 10,000 in 16 shards each holds about 625 (binomial, sd 24);
`part_depth` is twice the even share plus 100 (1,350), and a part whose every candidate made the merged
top `depth` (so it may have held more) is counted (`queries_part_depth_reached`), never silent. Per
query the candidates merge to the global top `depth`, best score first and ties by key; with BM25, the
dense and the BM25 rankings fuse by reciprocal rank (k 60), which is the ranking a server gets from the
artifact (`index_builder.lexical.hybrid_search`). Each system ("dense", "bm25", "fused") is scored like
`SearchAndScore` does; the primary system's run rows are named by a second task per part, which reads
only that part's ids. A worker holds one part; queries × parts × part_depth × 12 bytes cross the shuffle.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import apache_beam as beam
import numpy as np
import pyarrow as pa
from apache_beam import pvalue
from apache_beam.metrics import Metrics

from evaluation.metrics import MetricSpec
from evaluation.ranked import score_query
from evaluation.relevance import RelevanceRule
from index_builder.lexical import reciprocal_rank_fusion
from index_builder.product_keys import id_key, id_keys
from pipelines.evaluate.corpus_parts import CorpusPart
from pipelines.evaluate.transforms import JudgedQuery
from pipelines.io.catalog_io import METRICS_NAMESPACE
from schemas import RUN_SCHEMA

DENSE, BM25, FUSED = "dense", "bm25", "fused"
SYSTEMS = (DENSE, BM25, FUSED)


@dataclass(frozen=True)
class PartHits:
    """One part's ranking of one query: candidates best first, as scores and product keys (int64 views of
    the unsigned keys), and the judged products the part holds (a dense part only)."""

    family: str  # DENSE or BM25
    part: int
    scores: np.ndarray
    keys: np.ndarray
    present: tuple[str, ...] = ()
    # Whether the part sent every candidate it has (its whole size, or every BM25 match), not a cut.
    complete: bool = False


@dataclass(frozen=True)
class Ranked:
    """A merged ranking: keys best first, scores, and where each candidate came from (family, part)."""

    keys: np.ndarray
    scores: np.ndarray
    origins: list[tuple[str, int]] = field(default_factory=list)


class _SearchPartFn(beam.DoFn):
    """A part -> (query_id, PartHits) for every query; the part is opened here and dropped when done."""

    def __init__(self, family: str, depth: int, batch_size: int) -> None:
        self.family = family
        self.depth = depth  # the part's own depth (`part_depth`)
        self.batch_size = batch_size
        self.opened = Metrics.counter(METRICS_NAMESPACE, f"parts_searched_{family}")

    def process(self, part: CorpusPart, queries: Sequence[JudgedQuery]) -> Iterator[tuple[str, PartHits]]:
        self.opened.inc()
        if self.family == BM25:
            lexical = part.open_lexical()
            keys = lexical.keys.view(np.int64)
            for query in queries:
                ranking = lexical.rank(lexical.query_words([query.text])[0], self.depth)
                complete = len(ranking.rows) < self.depth  # every match of the query, not a cut
                hits = PartHits(BM25, part.number, ranking.scores, keys[ranking.rows], complete=complete)
                yield query.query_id, hits
            return
        searcher = part.open_dense()
        ids = list(searcher.ids)
        held = set(ids)
        keys = id_keys(ids).view(np.int64)
        depth = min(self.depth, searcher.size)
        for start in range(0, len(queries), self.batch_size):
            batch = queries[start : start + self.batch_size]
            found = searcher.search(np.stack([q.vector for q in batch]).astype(np.float32), depth)
            for query, rows, scores in zip(batch, found.indices, found.scores, strict=True):
                present = tuple(pid for pid in query.judgments if pid in held)
                complete = depth == searcher.size  # the whole part is ranked
                yield query.query_id, PartHits(DENSE, part.number, scores, keys[rows], present, complete)


PART_DEPTH_FACTOR, PART_DEPTH_MARGIN = 2.0, 100


def part_depth(depth: int, parts: int) -> int:
    """How many candidates of a query a part sends: twice its even share of `depth`, plus 100."""
    return min(depth, math.ceil(PART_DEPTH_FACTOR * depth / max(parts, 1)) + PART_DEPTH_MARGIN)


def part_depth_reached(hits: Sequence[PartHits], merged: Ranked, depth: int) -> bool:
    """Whether a part that sent a cut of its ranking had all of it in the merged top `depth`: it may have
    held more that belong there."""
    if len(merged.keys) < depth:
        return any(not h.complete and len(h.scores) for h in hits)
    last = merged.scores[-1]
    return any(not h.complete and len(h.scores) and h.scores[-1] >= last for h in hits)


def merge_hits(hits: Sequence[PartHits], depth: int) -> Ranked:
    """The parts' candidates as one ranking: best score first, ties by product key, at most `depth`."""
    if not hits:
        return Ranked(np.empty(0, np.int64), np.empty(0, np.float32))
    scores = np.concatenate([h.scores for h in hits]).astype(np.float32, copy=False)
    keys = np.concatenate([h.keys for h in hits])
    origins = np.concatenate([np.full(len(h.keys), i) for i, h in enumerate(hits)])
    order = np.lexsort((keys.view(np.uint64), -scores))[:depth]
    return Ranked(keys[order], scores[order], [(hits[i].family, hits[i].part) for i in origins[order]])


def fuse(dense: Ranked, lexical: Ranked, depth: int) -> Ranked:
    """The dense and the BM25 ranking fused by reciprocal rank, in key space (the rows of two corpora need
    not agree: an exact search over zero-shot vectors fuses with the index's BM25)."""
    keys = np.concatenate([dense.keys, lexical.keys])
    unique, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    fused = reciprocal_rank_fusion([inverse[: len(dense.keys)], inverse[len(dense.keys) :]], depth)
    origins = dense.origins + lexical.origins
    return Ranked(unique[fused.rows], fused.scores, [origins[first[row]] for row in fused.rows])


class _JudgedKeys:
    """What `score_query` asks of a corpus, over the judged products a part reported holding."""

    def __init__(self, present: set[str]) -> None:
        self._keys = {pid: np.int64(np.uint64(id_key(pid)).view(np.int64)) for pid in present}

    def __contains__(self, product_id: object) -> bool:
        return product_id in self._keys

    def rows(self, product_ids: Sequence[str]) -> np.ndarray:
        return np.asarray([self._keys[pid] for pid in product_ids], dtype=np.int64)


class _MergeAndScoreFn(beam.DoFn):
    RUN = "run_pieces"

    def __init__(self, systems: Sequence[str], primary: str, depth: int, metrics: Sequence[MetricSpec],
                 rule: RelevanceRule, emit_run: bool, counter_suffix: str) -> None:  # fmt: skip
        self.systems, self.primary, self.depth = tuple(systems), primary, depth
        self.metrics, self.rule, self.emit_run = tuple(metrics), rule, emit_run
        # The primary system's counters carry `counter_suffix` alone (`SearchAndScore`'s names), the others
        # their system's name too.
        suffix = {s: counter_suffix + ("" if s == primary else f"_{s}") for s in self.systems}

        def counters(name: str) -> dict[str, Any]:
            return {s: Metrics.counter(METRICS_NAMESPACE, f"{name}{suffix[s]}") for s in self.systems}

        self.searched, self.scored = counters("queries_searched"), counters("queries_scored")
        self.unjudged = counters("queries_without_judgments")
        self.not_in_catalog = Metrics.counter(METRICS_NAMESPACE, f"judgments_not_in_catalog{counter_suffix}")
        self.cut_short = Metrics.counter(METRICS_NAMESPACE, f"queries_part_depth_reached{counter_suffix}")

    def process(self, joined: tuple[str, Mapping[str, Any]]) -> Iterator[Any]:
        query_id, groups = joined
        queries, hits = list(groups["query"]), list(groups["hits"])
        if not queries:
            return
        query = queries[0]
        families = {family: [h for h in hits if h.family == family] for family in (DENSE, BM25)}
        dense = merge_hits(families[DENSE], self.depth)
        rankings = {DENSE: dense}
        if BM25 in self.systems or FUSED in self.systems:
            lexical = merge_hits(families[BM25], self.depth)
            rankings.update({BM25: lexical, FUSED: fuse(dense, lexical, self.depth)})
        cut = [part_depth_reached(families[f], rankings[f], self.depth) for f in families if f in rankings]
        if any(cut):
            self.cut_short.inc()
        present = {pid for h in hits for pid in h.present}
        judgments = {pid: grade for pid, grade in query.judgments.items() if pid in present}
        self.not_in_catalog.inc(len(query.judgments) - len(judgments))
        corpus = _JudgedKeys(set(judgments))
        for system in self.systems:
            ranked = rankings[system]
            self.searched[system].inc()
            if system == self.primary and self.emit_run:
                yield from _run_pieces(query_id, ranked)
            if not judgments:
                self.unjudged[system].inc()
                continue
            self.scored[system].inc()
            per_query, ranks = score_query(query_id, ranked.keys, judgments, corpus, self.metrics, self.rule)
            yield pvalue.TaggedOutput(f"per_query_{system}", per_query)
            yield pvalue.TaggedOutput(f"ranks_{system}", ranks)


def _run_pieces(query_id: str, ranked: Ranked) -> Iterator[pvalue.TaggedOutput]:
    """(origin, (query id, ranks, keys, scores)): the run rows each part names (`_NameRunRowsFn`)."""
    by_origin: dict[tuple[str, int], list[int]] = {}
    for position, origin in enumerate(ranked.origins):
        by_origin.setdefault(origin, []).append(position)
    for origin, positions in by_origin.items():
        at = np.asarray(positions)
        piece = (query_id, at + 1, ranked.keys[at], ranked.scores[at])
        yield pvalue.TaggedOutput(_MergeAndScoreFn.RUN, (origin, piece))


class _NameRunRowsFn(beam.DoFn):
    """(origin, pieces) -> one `RUN_SCHEMA` table of those run rows, named by the part's own ids."""

    def __init__(self, parts: Mapping[tuple[str, int], CorpusPart]) -> None:
        self.parts = dict(parts)

    def process(self, element: tuple[tuple[str, int], Sequence[tuple]]) -> Iterator[pa.Table]:
        origin, pieces = element
        ids = self.parts[origin].ids()
        name_of = dict(zip(id_keys(ids).view(np.int64).tolist(), ids, strict=True))
        columns: dict[str, list[Any]] = {"query_id": [], "product_id": [], "rank": [], "score": []}
        for query_id, ranks, keys, scores in pieces:
            columns["query_id"] += [query_id] * len(ranks)
            columns["product_id"] += [name_of[key] for key in keys.tolist()]
            columns["rank"] += ranks.tolist()
            columns["score"] += scores.tolist()
        yield pa.Table.from_pydict(columns, schema=RUN_SCHEMA)


class SearchPartsAndScore(beam.PTransform):
    """JudgedQuery -> {"per_query_<system>", "ranks_<system>", "run"} for each of `systems`, searching the
    dense `parts` (and the `lexical` parts for "bm25" and "fused") one task a part."""

    def __init__(self, parts: Sequence[CorpusPart], lexical: Sequence[CorpusPart], systems: Sequence[str],
                 primary: str, depth: int, metrics: Sequence[MetricSpec], rule: RelevanceRule,
                 batch_size: int, emit_run: bool = True, counter_suffix: str = "") -> None:  # fmt: skip
        super().__init__()
        if set(systems) - set(SYSTEMS) or primary not in systems or (set(systems) - {DENSE} and not lexical):
            raise ValueError(f"systems {systems} (primary {primary}) need BM25 parts for bm25 and fused")
        self.parts, self.lexical, self.systems = tuple(parts), tuple(lexical), tuple(systems)
        self.merge = _MergeAndScoreFn(systems, primary, depth, metrics, rule, emit_run, counter_suffix)
        self.depth, self.batch_size = depth, batch_size

    def expand(self, queries: beam.PCollection) -> dict[str, beam.PCollection]:
        everyone = beam.pvalue.AsList(queries)
        families = [(DENSE, self.parts)] + ([(BM25, self.lexical)] if set(self.systems) - {DENSE} else [])
        found = []
        for family, parts in families:
            search = _SearchPartFn(family, part_depth(self.depth, len(parts)), self.batch_size)
            found.append(
                queries.pipeline
                | f"Parts-{family}" >> beam.Create(list(parts))
                | f"Spread-{family}" >> beam.Reshuffle()
                | f"Search-{family}" >> beam.ParDo(search, everyone)
            )
        hits = found | "AllHits" >> beam.Flatten()
        keyed = queries | "ByQueryId" >> beam.Map(lambda query: (query.query_id, query))
        tags = [f"{kind}_{system}" for system in self.systems for kind in ("per_query", "ranks")]
        merged = (
            {"query": keyed, "hits": hits}
            | "GatherHits" >> beam.CoGroupByKey()
            | "MergeAndScore" >> beam.ParDo(self.merge).with_outputs(_MergeAndScoreFn.RUN, *tags)
        )
        origins = {(DENSE, p.number): p for p in self.parts} | {(BM25, p.number): p for p in self.lexical}
        run = (
            merged[_MergeAndScoreFn.RUN]
            | "ByPart" >> beam.GroupByKey()
            | "NameRunRows" >> beam.ParDo(_NameRunRowsFn(origins))
        )
        return {"run": run, **{tag: merged[tag] for tag in tags}}


__all__ = [
    "BM25",
    "DENSE",
    "FUSED",
    "SYSTEMS",
    "PartHits",
    "SearchPartsAndScore",
    "fuse",
    "merge_hits",
    "part_depth",
    "part_depth_reached",
]
