"""How many leaves should madr's tree have? The same vectors and queries, trees of sqrt(n) to 4 sqrt(n).

    python -m bench.leaf_count_bench --embeddings runs/serving-bench/embeddings \
        --model runs/serving-bench/model --queries_file runs/serving-bench/data/queries.parquet

FAISS IVF-PQ fast-scan beat madr's artifact at k = 10 on 500,000 shipped-model vectors (28,988 against
18,719 queries/s at recall 0.95) with twice the lists (2 sqrt(n)) and 4 of them probed: it scores a
quarter of the vectors madr's 707-leaf tree scores at 8 leaves. For each leaf count, madr's tree
(`ScannIndexBuilder.for_corpus` with only the leaf count changed, asymmetric hashing, re-ranking over
float32 or int8 copies: `--reorder_precision`) is swept by hand over leaves-to-search and re-ranking
depth, and the fastest setting reaching recall 0.95 on the measured queries is kept, per k; FAISS's
`IVF{2 sqrt n},PQ{d/2}x4fs,RFlat` is swept beside it in the same run (`bench.serving_bench.run_ivfpq`),
over the same grid of partitions probed and candidates re-ranked (`bench.serving_bench.probe_grid`).
Saves bench/results/leaf_count.json.
"""

from __future__ import annotations

import argparse
import math
from typing import Any

import numpy as np

from bench.common import report
from bench.serving_bench import THREADS, Bench, build_figures, load_vectors, run_ivfpq, sweep_scann
from bench.support import command_line
from index_builder import ScannIndexBuilder
from index_builder.recall import DEFAULT_TARGET_RECALL


def sweep_tree(
    bench: Bench,
    ids: list[str],
    leaves: int,
    soar_lambda: float | None,
    sample: int | None,
    precision: str = "float32",
) -> None:
    n, dim = bench.data.shape
    config = ScannIndexBuilder.for_corpus(n, dim, depth=10).create_config()
    # The settings madr derives for a tree of this corpus (a small one gets brute force: its defaults then).
    sample = min(n, sample or config.training_sample_size or 100_000)
    builder = ScannIndexBuilder(dim, n).tree(leaves, max(1, leaves // 100), sample, soar_lambda=soar_lambda)
    builder = builder.score_ah(
        config.dimensions_per_block or 2, config.anisotropic_quantization_threshold or 0.2
    )
    index, figures = build_figures(lambda: builder.reorder(100, precision).build(bench.data, ids))
    index.set_search_threads(THREADS)
    per_k = sweep_scann(bench, index, f"{leaves} leaves")
    soar = f", SOAR {soar_lambda:g}" if soar_lambda else ""
    reranks = "" if precision == "float32" else f", {precision} re-ranking"
    bench.record(f"madr tree, {leaves} leaves{soar}, {sample:,} trained on{reranks}, swept", figures, per_k)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--embeddings", required=True, help="Embed output folder (the shipped model's vectors)"
    )
    parser.add_argument("--model", required=True, help="Model that encodes the queries")
    parser.add_argument("--queries_file", required=True, help="Queries Parquet of the generator's benchmark")
    parser.add_argument("--precision", default="int8", help="Query encoding precision (as the products')")
    parser.add_argument("--queries", type=int, default=1_000, help="Queries timed")
    parser.add_argument("--multiples", default="1,2,4", help="Leaf counts as multiples of sqrt(n)")
    parser.add_argument("--skip_faiss", action="store_true", help="Leave FAISS IVF-PQ out")
    parser.add_argument("--soar_lambda", type=float, default=None, help="SOAR spilling of every tree")
    parser.add_argument("--training_sample", type=int, default=None, help="Vectors each tree trains on")
    parser.add_argument(
        "--reorder_precision",
        default="float32,int8",
        help="Re-ranking copies each tree is swept with, comma-separated (float32, int8)",
    )
    parser.add_argument("--name", default="leaf_count", help="Results file name")
    args = parser.parse_args(argv)
    args.tune_queries, args.isotropic, args.dim, args.quick = 0, 0, 0, False
    import faiss

    faiss.omp_set_num_threads(THREADS)
    data, ids, queries, _, source = load_vectors(args)
    bench = Bench(data, np.ascontiguousarray(queries, dtype=np.float32), DEFAULT_TARGET_RECALL)
    root = math.sqrt(len(data))
    for multiple in (float(m) for m in args.multiples.split(",")):
        for precision in args.reorder_precision.split(","):
            sweep_tree(bench, ids, round(root * multiple), args.soar_lambda, args.training_sample, precision)
    if not args.skip_faiss:
        run_ivfpq(bench)
    config = {"command": command_line("bench.leaf_count_bench", argv), "vectors": source, "threads": THREADS}
    figures = {"systems": bench.results}
    report(args.name, config, figures)
    return figures


if __name__ == "__main__":
    main()
