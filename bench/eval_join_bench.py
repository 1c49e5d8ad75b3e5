"""The evaluation join: Q queries × top-K ranked lists joined with judgments, through `ScoreQueries`.

The evaluate stage's cost at depth 10,000 is not the search but this join: every query's ranked list
(K (product_id, score) pairs) is grouped with its judgments by query id, scored with every metric,
and fanned out into K run rows. This feeds the real `pipelines.evaluate.ScoreQueries` transform with
seeded synthetic ranked lists (product ids "p<n>", scores descending) and --judged judgments per query
(half of them planted inside the ranked list), on the local FnApiRunner (in-memory), and counts its
outputs. The baseline is the same work as a plain Python loop: `evaluate_query` on each query and
one run-row dict per ranked product, without Beam.

    python -m bench.eval_join_bench --queries 1000 --depth 10000
"""

from __future__ import annotations

import argparse
import inspect
import random
from collections.abc import Iterator
from typing import Any

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.util import assert_that, equal_to

from bench.common import report
from bench.support import command_line, measure_memory, shared_machine_note
from pipelines.evaluate import ScoreQueries, cap_cutoffs
from pipelines.evaluation import DEFAULT_METRICS, RelevanceRule, evaluate_query, parse_metrics
from pipelines.runner import make_pipeline


def ranked_list(query: int, depth: int, catalog: int) -> list[tuple[str, float]]:
    """A seeded top-``depth`` list for one query: distinct product ids, scores strictly descending."""
    rng = random.Random(query)
    products = rng.sample(range(catalog), depth)
    return [(f"p{product}", 1.0 - rank / depth) for rank, product in enumerate(products)]


def judgments(query: int, depth: int, catalog: int, judged: int) -> list[dict[str, Any]]:
    """``judged`` graded products; half are drawn from the query's ranked list so metrics are non-trivial."""
    rng = random.Random(query)
    ranked = rng.sample(range(catalog), depth)  # same draw as ranked_list
    inside = rng.sample(ranked, min(depth, judged // 2))
    outside = [rng.randrange(catalog) for _ in range(judged - len(inside))]
    return [
        {"query_id": f"q{query}", "product_id": f"p{product}", "grade": rng.randint(0, 4), "label": None}
        for product in dict.fromkeys(inside + outside)
    ]


def run_beam(args: argparse.Namespace, metrics: tuple, emit_run: bool = True) -> dict[str, int]:
    """The join through ScoreQueries; returns output counts (checked inside the pipeline).

    ``emit_run=False`` (when ScoreQueries has it) skips the run rows: the difference is their cost.
    """
    queries = list(range(args.queries))
    pipeline = make_pipeline(PipelineOptions([]))
    seeds = pipeline | "Queries" >> beam.Create(queries) | beam.Reshuffle()
    ranked = seeds | "Rank" >> beam.Map(lambda q: (f"q{q}", ranked_list(q, args.depth, args.catalog)))
    judged = (
        pipeline
        | "JudgedQueries" >> beam.Create(queries)
        | "Judge" >> beam.FlatMap(lambda q: judgments(q, args.depth, args.catalog, args.judged))
    )
    options = {} if emit_run else {"emit_run": False}
    scored = {"ranked": ranked, "judgments": judged} | ScoreQueries(metrics, RelevanceRule(), **options)
    per_query = scored["per_query"] | "CountScored" >> beam.combiners.Count.Globally()
    run_rows = scored["run"] | "CountRun" >> beam.combiners.Count.Globally()
    assert_that(per_query, equal_to([args.queries]), label="AllQueriesScored")
    expected_run_rows = args.queries * args.depth if emit_run else 0
    assert_that(run_rows, equal_to([expected_run_rows]), label="AllRunRows")
    pipeline.run().wait_until_finish()
    return {"per_query_rows": args.queries, "run_rows": expected_run_rows}


def run_plain(args: argparse.Namespace, metrics: tuple) -> dict[str, int]:
    """The same scoring and run rows in a plain loop: the floor the Beam join is measured against."""
    rule, scored, rows = RelevanceRule(), 0, 0
    for query in range(args.queries):
        ranked = ranked_list(query, args.depth, args.catalog)
        grades = {
            j["product_id"]: j["grade"] for j in judgments(query, args.depth, args.catalog, args.judged)
        }
        run: Iterator[dict[str, Any]] = (
            {"query_id": f"q{query}", "product_id": pid, "rank": rank, "score": score}
            for rank, (pid, score) in enumerate(ranked, start=1)
        )
        rows += sum(1 for _ in run)
        ranked_ids = [pid for pid, _ in ranked]
        evaluate_query(ranked_ids, grades, metrics, rule)
        relevant = {pid for pid, grade in grades.items() if rule.is_positive(grade)}
        _ = [rank for rank, pid in enumerate(ranked_ids, start=1) if pid in relevant]
        scored += 1
    return {"per_query_rows": scored, "run_rows": rows}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--queries", type=int, default=10_000, help="Queries (default: %(default)s)")
    parser.add_argument("--depth", type=int, default=10_000, help="Ranked products per query (%(default)s)")
    parser.add_argument("--judged", type=int, default=20, help="Judgments per query (default: %(default)s)")
    parser.add_argument("--catalog", type=int, default=1_000_000, help="Product id space (%(default)s)")
    parser.add_argument("--quick", action="store_true", help="200 queries × top-1,000")
    args = parser.parse_args(argv)
    if args.quick:
        args.queries, args.depth = min(args.queries, 200), min(args.depth, 1_000)
    metrics = cap_cutoffs(parse_metrics(DEFAULT_METRICS), args.catalog)
    config = {
        "command": command_line("bench.eval_join_bench", argv),
        **vars(args),
        "metrics": [m.key for m in metrics],
        "runner": "FnApiRunner in_memory",
    }
    config.update(shared_machine_note())
    print(f"eval_join_bench: {config}", flush=True)

    beam_counts, beam_s, beam_peak, _ = measure_memory(lambda: run_beam(args, metrics))
    print(f"  Beam ScoreQueries: {beam_s:.1f} s, peak +{beam_peak:.0f} MB", flush=True)
    no_run: dict[str, Any] = {}
    if "emit_run" in inspect.signature(ScoreQueries.__init__).parameters:
        _, no_run_s, no_run_peak, _ = measure_memory(lambda: run_beam(args, metrics, emit_run=False))
        no_run = {
            "beam_without_run_rows_s": round(no_run_s, 2),
            "beam_without_run_rows_peak_mb": round(no_run_peak, 1),
        }
        print(
            f"  Beam ScoreQueries(emit_run=False): {no_run_s:.1f} s, peak +{no_run_peak:.0f} MB", flush=True
        )
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
        **no_run,
        "counts": {"beam": beam_counts, "plain": plain_counts},
        "extrapolated_10k_x_10k_beam_s": round(beam_s * 100_000_000 / pairs, 1),
        "load_average_1min_at_end": shared_machine_note()["load_average_1min_at_start"],
    }
    report("eval_join_quick" if args.quick else "eval_join", config, figures)
    return figures


if __name__ == "__main__":
    main()
