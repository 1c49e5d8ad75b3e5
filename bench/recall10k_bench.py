"""Recall@10k cost: top-10,000 retrieval through the index (our `for_corpus` settings) against exact search.

The evaluation stage retrieves 10,000 products per query (madral-kdd22's Recall@10k). For that depth
`ScannIndex.search` widens the search of a `ScannIndexBuilder.for_corpus(n, d, depth=10_000)` index
to 0.06·k^0.3 of the leaves (all but 5 % at k = 10,000) and re-ranks 8·k AH candidates exactly;
from k = n/20 on `for_corpus` picks brute force outright. This measures what that costs and keeps:
the index's time and its overlap with the exact top-k at several depths, against `ExactSearcher` on
the same queries, plus the rule it replaced (leaves holding 10·k vectors, 4·k re-ranked), to show why.

    python -m bench.recall10k_bench --n 1000000 --queries 10000
"""

from __future__ import annotations

import argparse
import gc
import math
from typing import Any

import numpy as np

from bench.common import report
from bench.support import (
    add_vector_arguments,
    clustered_unit_vectors,
    command_line,
    describe_generator,
    measure_memory,
    recall_at_k,
    shared_machine_note,
)
from index_builder import ExactSearcher, ScannIndexBuilder

K = 10_000
DEPTHS = (10, 100, 1_000, 10_000)


def _recalls(found: np.ndarray, truth: np.ndarray) -> dict[str, float]:
    k_eff = truth.shape[1]
    return {f"recall@{d}": round(recall_at_k(found, truth, d), 4) for d in DEPTHS if d <= k_eff}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_vector_arguments(parser, queries=10_000)
    parser.add_argument(
        "--no_overrides", action="store_true", help="Skip the search with the previous rule's settings"
    )
    parser.add_argument("--quick", action="store_true", help="1,000 queries over 100,000 vectors")
    args = parser.parse_args(argv)
    if args.quick:
        args.n, args.queries, args.no_overrides = min(args.n, 100_000), min(args.queries, 1_000), True

    everything = clustered_unit_vectors(args.n + args.queries, args.dim, noise=args.noise, seed=args.seed)
    data, queries = everything[: args.n], everything[args.n :]
    ids = [f"v{i}" for i in range(args.n)]
    builder = ScannIndexBuilder.for_corpus(args.n, args.dim, depth=K)
    index_config = builder.create_config()
    config = {
        "command": command_line("bench.recall10k_bench", argv),
        **vars(args),
        "k": K,
        "data": describe_generator(args.dim, noise=args.noise),
        "index_config": index_config.to_dict(),
        "search_leaves_at_k": index_config.search_leaves(min(K, args.n)),
        "search_reorder_at_k": index_config.search_reorder(min(K, args.n)),
        **shared_machine_note(),
    }
    print(f"recall10k_bench: {config}\n{index_config}", flush=True)

    exact = ExactSearcher(data, ids)
    truth_result, exact_s, exact_peak, _ = measure_memory(lambda: exact.search(queries, K))
    truth = truth_result.indices
    del truth_result
    gc.collect()
    print(f"  exact: {exact_s:.1f} s, peak +{exact_peak:.0f} MB", flush=True)

    index, build_s, build_peak, _ = measure_memory(lambda: builder.build(data, ids))
    found_result, ann_s, ann_peak, _ = measure_memory(lambda: index.search(queries, K))
    recalls = _recalls(found_result.indices, truth)
    del found_result
    print(f"  index: build {build_s:.1f} s, search {ann_s:.1f} s, {recalls}", flush=True)
    figures: dict[str, Any] = {
        "exact_search_s": round(exact_s, 2),
        "exact_queries_per_s": round(args.queries / exact_s, 1),
        "exact_search_peak_rss_delta_mb": round(exact_peak, 1),
        "index_build_s": round(build_s, 2),
        "index_build_peak_rss_delta_mb": round(build_peak, 1),
        "index_search_s": round(ann_s, 2),
        "index_queries_per_s": round(args.queries / ann_s, 1),
        "index_search_peak_rss_delta_mb": round(ann_peak, 1),
        "index_vs_exact_speed": round(exact_s / ann_s, 3),
        "index_recall_vs_exact": recalls,
        "index_is_brute_force": not index_config.uses_tree,
        "faster": "index" if ann_s < exact_s else "exact",
        "recall@10k_within_1pct": recalls[f"recall@{K}"] >= 0.99 if f"recall@{K}" in recalls else None,
    }
    if not args.no_overrides and index_config.uses_tree:
        k = min(K, args.n)
        # The rule before issue 5: leaves holding 10·k vectors (at least a tenth), 4·k re-ranked.
        previous_leaves = max(
            math.ceil(index_config.num_leaves / 10),
            math.ceil(index_config.num_leaves * min(1.0, 10 * k / args.n)),
        )
        variants = {
            "previous_rule": {
                "leaves_to_search": previous_leaves,
                "pre_reorder_num_neighbors": min(args.n, 4 * k),
            },
        }
        for name, overrides in variants.items():
            result, seconds, _, _ = measure_memory(lambda o=overrides: index.search(queries, K, **o))
            figures[name] = {
                **overrides,
                "search_s": round(seconds, 2),
                "vs_exact_speed": round(exact_s / seconds, 3),
                **_recalls(result.indices, truth),
            }
            print(f"  {name}: {figures[name]}", flush=True)
            del result
    figures["load_average_1min_at_end"] = shared_machine_note()["load_average_1min_at_start"]
    report("recall10k_quick" if args.quick else "recall10k", config, figures)
    return figures


if __name__ == "__main__":
    main()
