"""How BM25 is fused with an adapted model: the RRF constant and the depth each ranking is fused to.

    python -m bench.fusion_ablation --run runs/bench-store/second_store/defaults \
        --data runs/bench-store/second_store/data

Reads one `bench.store_bench` run (the adapted model's exact run and the zero-shot run its evaluation
wrote), ranks the store's test queries with BM25 again, and fuses BM25 with the model by reciprocal rank
for k in {10, 30, 60, 100} and each ranking cut to {100, 1,000, all} before fusing (`madr search` and
`ScannIndex.search_hybrid` fuse at k 60, 100 deep). Each is compared with BM25 + zero-shot (k 60, full
depth) by a paired t-test. No retraining: the model's run is read. Saves bench/results/fusion_ablation.json.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import report
from bench.support import command_line
from evaluation import RelevanceRule, paired_t_test, parse_metrics
from evaluation.ranked import CorpusIds, score_query
from index_builder.lexical import Bm25Settings, reciprocal_rank_fusion
from pipelines.evaluate.lexical import catalog_bm25, judgments_in, run_rankings, split_queries
from pipelines.io.parquet_reading import read_parquet_table

METRICS = ("recall@100", "ndcg@10")


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--run", required=True, help="A bench.store_bench run folder (its eval/ inside)")
    parser.add_argument("--data", required=True, help="The store's dataset folder")
    args = parser.parse_args(argv)
    run, data = Path(args.run), Path(args.data)
    evaluation = run / "eval" / "eval"
    embeddings = str(run / "eval" / "embeddings")
    searched = set(read_parquet_table(embeddings, "embeddings", ["product_id"]).column(0).to_pylist())
    # Each product analyzed in its locale's language, as the evaluation's BM25 row is.
    bm25 = catalog_bm25(str(data / "products"), searched, Bm25Settings())
    ids = bm25.product_ids
    corpus = CorpusIds(ids)
    judged = judgments_in(str(data / "judgments.parquet"), corpus)
    queries = {q: t for q, t in split_queries(str(data / "queries.parquet"), "test").items() if q in judged}
    metrics, rule = parse_metrics(METRICS), RelevanceRule()
    found = bm25.search(list(queries.values()), len(ids))
    lexical = {q: ranking.rows for q, ranking in zip(queries, found, strict=True)}
    model = run_rankings(str(evaluation), corpus)
    zero = run_rankings(str(evaluation / "zero_shot" / "eval"), corpus)

    def scored(rankings: dict[str, np.ndarray]) -> dict[str, dict[str, float]]:
        return {q: score_query(q, rankings[q], judged[q], corpus, metrics, rule)[0] for q in queries}

    def fused(other: dict[str, np.ndarray], k: int, depth: int) -> dict[str, np.ndarray]:
        return {
            q: reciprocal_rank_fusion([lexical[q][:depth], other[q][:depth]], len(ids), k=k).rows
            for q in queries
        }

    hybrid = scored(fused(zero, 60, len(ids)))
    rows: dict[str, dict[str, Any]] = {}
    systems = {"bm25+zero-shot (k 60, all)": hybrid, "model alone": scored(model)}
    for k in (10, 30, 60, 100):
        for depth in (100, 1_000, len(ids)):
            label = f"bm25+model (k {k}, {'all' if depth == len(ids) else depth})"
            systems[label] = scored(fused(model, k, depth))
    for name, per_query in systems.items():
        figures: dict[str, Any] = {}
        for metric in METRICS:
            mine = [per_query[q][metric] for q in queries]
            theirs = [hybrid[q][metric] for q in queries]
            figures[metric] = round(float(np.mean(mine)), 4)
            figures[f"{metric} vs hybrid"] = round(100 * float(np.mean(mine) - np.mean(theirs)), 2)
            figures[f"{metric} p"] = None if mine == theirs else float(paired_t_test(mine, theirs).pvalue)
        rows[name] = figures
        print(
            f"{name:<30} R@100 {figures['recall@100']:.4f}  NDCG@10 {figures['ndcg@10']:.4f}  vs hybrid "
            f"{figures['ndcg@10 vs hybrid']:+.1f} (p {figures['ndcg@10 p'] or float('nan'):.2g})"
        )
    config = {
        "command": command_line("bench.fusion_ablation", argv),
        "queries": len(queries),
        "products": len(ids),
    }
    report("fusion_ablation", config, {"systems": rows})
    return rows


if __name__ == "__main__":
    main()
