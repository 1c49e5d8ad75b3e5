"""The evaluation join: Q queries searched to top-K, scored against their judgments, K run rows each.

This runs the evaluate stage's real transforms (`pipelines.evaluate.transforms`): `JoinJudgments`
(query embeddings meet their judgments by query id), `SearchAndScore` (one DoFn searches a batch of
joined queries and scores it) and `WriteRun` (one Arrow table of run rows per batch into Parquet), on
the local FnApiRunner (in-memory). The searcher is synthetic, plugged in through the same `open()` seam
as a real index: it follows index_builder's Searcher protocol over a catalog of --catalog ids and
returns, fast, a seeded ranking of distinct products per query (the query number rides in the first
coordinate of its 128-float embedding), so the figures are the join's and not a search's. Each query
has --judged judgments, half of them planted inside its ranking. The baseline is the same work as a
plain loop without Beam: the same search, `score_query` and `run_table` calls, and a Parquet writer.

    python -m bench.eval_join_bench --queries 10000 --depth 10000
"""

from __future__ import annotations

import argparse
import math
import random
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import apache_beam as beam
import numpy as np
import pyarrow.parquet as pq
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.util import assert_that, equal_to

from bench.common import report
from bench.support import command_line, measure_memory, shared_machine_note
from evaluation import DEFAULT_METRICS, MetricSpec, RelevanceRule, parse_metrics
from evaluation.cutoffs import plan_cutoffs
from evaluation.ranked import CorpusIds, run_table, score_query
from index_builder.searcher import SearchResult, as_query_matrix, effective_k, make_result
from pipelines.evaluate.transforms import JoinJudgments, SearchAndScore, WriteRun
from pipelines.runner import make_pipeline
from schemas import RUN_SCHEMA

DIMENSION = 128  # the demo model's embedding size: what crosses the join per query


def ranked_rows(query: int, depth: int, catalog: int) -> np.ndarray:
    """Query's seeded top-``depth`` corpus rows: distinct, spread over the catalog, in microseconds.

    Rows a + b·j (mod catalog) with b coprime to the catalog size are distinct for j < catalog.
    """
    rng = random.Random(query)
    start, step = rng.randrange(catalog), rng.randrange(1, catalog)
    while math.gcd(step, catalog) != 1:
        step += 1
    return (start + step * np.arange(depth, dtype=np.int64)) % catalog


def query_vector(query: int) -> np.ndarray:
    vector = np.zeros(DIMENSION, dtype=np.float32)
    vector[0] = query  # exact in float32 below 2**24 queries
    return vector


class SyntheticSearcher:
    """index_builder's Searcher protocol (and ``ids``) over products "p0" … "p<catalog-1>"."""

    def __init__(self, catalog: int) -> None:
        self._ids = np.array([f"p{row}" for row in range(catalog)], dtype=object)

    @property
    def dimension(self) -> int:
        return DIMENSION

    @property
    def size(self) -> int:
        return len(self._ids)

    @property
    def ids(self) -> tuple[str, ...]:
        return tuple(self._ids.tolist())

    def search(self, queries: np.ndarray, k: int) -> SearchResult:
        matrix = as_query_matrix(queries, DIMENSION)
        k_eff = effective_k(k, self.size)
        rows = np.stack([ranked_rows(int(vector[0]), k_eff, self.size) for vector in matrix])
        scores = np.broadcast_to(1.0 - np.arange(k_eff, dtype=np.float32) / k_eff, rows.shape)
        return make_result(rows, scores, self._ids)  # the real searchers' result, ids included


@dataclass(frozen=True)
class SyntheticSource:
    """The `SearcherSource` seam: what a worker opens instead of an index artifact."""

    catalog: int

    def open(self) -> SyntheticSearcher:
        return SyntheticSearcher(self.catalog)


def judgments(query: int, depth: int, catalog: int, judged: int) -> list[dict[str, Any]]:
    """``judged`` graded products; half are drawn from the query's ranking so metrics are non-trivial."""
    rng = random.Random(-1 - query)
    ranked = ranked_rows(query, depth, catalog)
    inside = [int(ranked[rank]) for rank in rng.sample(range(depth), min(depth, judged // 2))]
    outside = [rng.randrange(catalog) for _ in range(judged - len(inside))]
    return [
        {"query_id": f"q{query}", "product_id": f"p{product}", "grade": rng.randint(0, 4), "label": None}
        for product in dict.fromkeys(inside + outside)
    ]


def run_beam(
    args: argparse.Namespace, metrics: tuple[MetricSpec, ...], emit_run: bool = True
) -> dict[str, int]:
    """The stage's transforms on the FnApiRunner; output counts are checked inside the pipeline."""
    queries = list(range(args.queries))
    with tempfile.TemporaryDirectory(prefix="eval-join-") as output:
        pipeline = make_pipeline(PipelineOptions([]))
        seeds = pipeline | "Queries" >> beam.Create(queries) | beam.Reshuffle()
        embedded = seeds | "Embed" >> beam.Map(lambda q: (f"q{q}", query_vector(q)))
        judged = (
            pipeline
            | "JudgedQueries" >> beam.Create(queries)
            | "Judge" >> beam.FlatMap(lambda q: judgments(q, args.depth, args.catalog, args.judged))
        )
        joined = {"embedded": embedded, "judgments": judged} | JoinJudgments()
        scored = joined | SearchAndScore(
            SyntheticSource(args.catalog), args.depth, metrics, RelevanceRule(), args.batch_size, emit_run
        )
        per_query = scored["per_query"] | "CountScored" >> beam.combiners.Count.Globally()
        assert_that(per_query, equal_to([args.queries]), label="AllQueriesScored")
        if emit_run:
            _ = scored["run"] | WriteRun(str(Path(output) / "run"))
        pipeline.run().wait_until_finish()
        run_rows = sum(pq.read_metadata(path).num_rows for path in Path(output).glob("run-*.parquet"))
    expected_run_rows = args.queries * args.depth if emit_run else 0
    if run_rows != expected_run_rows:
        raise AssertionError(f"{run_rows} run rows written, expected {expected_run_rows}")
    return {"per_query_rows": args.queries, "run_rows": run_rows}


def run_plain(args: argparse.Namespace, metrics: tuple[MetricSpec, ...]) -> dict[str, int]:
    """The same search, scoring and Parquet run file in a plain loop: the floor Beam is measured against."""
    rule, scored, rows = RelevanceRule(), 0, 0
    searcher = SyntheticSource(args.catalog).open()
    corpus = CorpusIds(searcher.ids)
    with tempfile.TemporaryDirectory(prefix="eval-join-") as output:
        writer = pq.ParquetWriter(Path(output) / "run.parquet", RUN_SCHEMA, compression="snappy")
        for start in range(0, args.queries, args.batch_size):
            batch = range(start, min(args.queries, start + args.batch_size))
            grades = [
                {j["product_id"]: j["grade"] for j in judgments(q, args.depth, args.catalog, args.judged)}
                for q in batch
            ]
            query_ids = [f"q{q}" for q in batch]
            found = searcher.search(np.stack([query_vector(q) for q in batch]), args.depth)
            table = run_table(query_ids, found.indices, found.scores, corpus)
            writer.write_table(table)
            rows += table.num_rows
            for query_id, ranked, judged in zip(query_ids, found.indices, grades, strict=True):
                score_query(query_id, ranked, judged, corpus, metrics, rule)
                scored += 1
        writer.close()
    return {"per_query_rows": scored, "run_rows": rows}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--queries", type=int, default=10_000, help="Queries (default: %(default)s)")
    parser.add_argument("--depth", type=int, default=10_000, help="Ranked products per query (%(default)s)")
    parser.add_argument("--judged", type=int, default=20, help="Judgments per query (default: %(default)s)")
    parser.add_argument("--catalog", type=int, default=1_000_000, help="Product id space (%(default)s)")
    parser.add_argument("--batch_size", type=int, default=256, help="Queries per search (%(default)s)")
    parser.add_argument("--quick", action="store_true", help="200 queries × top-1,000")
    args = parser.parse_args(argv)
    if args.quick:
        args.queries, args.depth = min(args.queries, 200), min(args.depth, 1_000)
    metrics = plan_cutoffs(parse_metrics(DEFAULT_METRICS), args.depth, args.catalog).metrics
    config = {
        "command": command_line("bench.eval_join_bench", argv),
        **vars(args),
        "metrics": [m.key for m in metrics],
        "runner": "FnApiRunner in_memory",
        "stage": "JoinJudgments + SearchAndScore (synthetic searcher) + WriteRun (Parquet, snappy)",
    }
    config.update(shared_machine_note())
    print(f"eval_join_bench: {config}", flush=True)

    beam_counts, beam_s, beam_peak, _ = measure_memory(lambda: run_beam(args, metrics))
    print(
        f"  Beam JoinJudgments + SearchAndScore + WriteRun: {beam_s:.1f} s, peak +{beam_peak:.0f} MB",
        flush=True,
    )
    _, no_run_s, no_run_peak, _ = measure_memory(lambda: run_beam(args, metrics, emit_run=False))
    print(f"  Beam, SearchAndScore(emit_run=False): {no_run_s:.1f} s, peak +{no_run_peak:.0f} MB", flush=True)
    plain_counts, plain_s, plain_peak, _ = measure_memory(lambda: run_plain(args, metrics))
    print(f"  plain loop: {plain_s:.1f} s, peak +{plain_peak:.0f} MB", flush=True)
    pairs = args.queries * args.depth
    figures = {
        "beam_s": round(beam_s, 2),
        "beam_peak_rss_delta_mb": round(beam_peak, 1),
        "beam_ranked_pairs_per_s": round(pairs / beam_s, 1),
        "plain_loop_s": round(plain_s, 2),
        "plain_loop_peak_rss_delta_mb": round(plain_peak, 1),
        "beam_vs_plain_time": round(beam_s / plain_s, 2),
        "beam_without_run_rows_s": round(no_run_s, 2),
        "beam_without_run_rows_peak_mb": round(no_run_peak, 1),
        "counts": {"beam": beam_counts, "plain": plain_counts},
        "extrapolated_10k_x_10k_beam_s": round(beam_s * 100_000_000 / pairs, 1),
        "load_average_1min_at_end": shared_machine_note()["load_average_1min_at_start"],
    }
    report("eval_join_quick" if args.quick else "eval_join", config, figures)
    return figures


if __name__ == "__main__":
    main()
