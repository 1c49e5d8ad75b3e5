"""The index a search server loads, side by side with what a team would use instead (issue 46).

For k = 10 and k = 100 at recall >= 0.95, on the same vectors and queries, in one run:

* **madr's artifact**: `train_within_target` (tuned per depth: `index_builder.depth_tuning`), saved,
  loaded back with `ScannIndex.load`, searched by `search(queries, k)` with no settings, as a server
  would: the schedule picks the tree or exact scoring per depth;
* **plain ScaNN**: the same trained tree swept over leaves-to-search x re-ranking by hand (the best a
  user tuning ScaNN themselves finds), and ScaNN's README settings for a corpus this size;
* **exact scoring**: madr's `ExactSearcher` and FAISS `IndexFlatIP`;
* **FAISS HNSW** (`IndexHNSWFlat`, M 32, efSearch swept) and **FAISS IVF-PQ fast-scan with refinement**
  (`IVF{nlist},PQ{d/2}x4fs,RFlat`, nprobe x k_factor swept), each at its best setting reaching the recall.

Each: queries/s over the whole batch (2 threads), single-query latency p50 / p99 (one query per call,
200 calls), build seconds, the memory it holds (retained RSS growth of the build) and its serialised
size, and the recall reached. Recall counts a found neighbour as right when it is as near as the true
k-th (ties), against exact search.

Vectors: an embed output (`--embeddings DIR`, e.g. 500,000 generator products embedded by the shipped
model; queries: the generator's queries encoded by the same model, `--model`, `--queries_file`), or
`--isotropic N` Gaussian unit vectors with held-out ones as queries, where trees are weakest.

    python -m bench.serving_bench --embeddings runs/serving-bench/embeddings --model runs/demo/model \
        --queries_file runs/serving-bench/data/queries.parquet --precision int8
    python -m bench.serving_bench --isotropic 1000000 --dim 128
    python -m bench.serving_bench --quick
"""

from __future__ import annotations

import argparse
import math
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import report
from bench.serving_harness import (
    DEPTHS,
    THREADS,
    Bench,
    Finals,
    Search,
    build_figures,
    folder_mb,
    latency,
)
from bench.support import command_line, shared_machine_note
from index_builder import ExactSearcher, ScannIndex, ScannIndexBuilder
from index_builder.builder import config_for_corpus
from index_builder.depth_tuning import REORDER_MULTIPLES, leaf_ladder, reorder_ladder
from index_builder.recall import DEFAULT_TARGET_RECALL
from index_builder.schedule import DEFAULT_SERVING_DEPTHS
from index_builder.tuned import sizing_depth, train_within_target

MADR = "madr artifact (schedule)"
MADR_TUNED = "madr artifact (schedule, build also tuned on 1,000 other queries)"


def run_madr(
    bench: Bench, ids: list[str], max_k: int, workdir: Path, tuning: np.ndarray | None, name: str
) -> ScannIndex:
    """madr's build, saved and loaded back; `tuning` queries (disjoint from the measured ones) are the
    build's evaluation queries, whose recall must reach the target too."""
    data = bench.data
    n, dim = data.shape

    def build() -> tuple[ScannIndex, Any]:
        config = config_for_corpus(n, dim, sizing_depth(max_k, DEFAULT_SERVING_DEPTHS, bench.target))
        return train_within_target(config, data, ids, max_k, bench.target, evaluation_queries=tuning)

    (index, recall), figures = build_figures(build)
    folder = workdir / name.replace(" ", "-").replace(",", "").replace("(", "").replace(")", "")
    index.save(folder, "bench", "1", recall=recall.to_dict())
    figures["artifact_mb"] = round(folder_mb(folder), 1)
    figures["schedule"] = recall.schedule
    figures["choice"] = recall.choice
    figures["tuning_queries"] = 0 if tuning is None else len(tuning)
    del index
    loaded = ScannIndex.load(folder)
    loaded.set_search_threads(THREADS)
    per_k = {}
    for k in DEPTHS:
        search = lambda q, kk, idx=loaded: idx.search(q, kk).indices  # noqa: E731
        point = bench.point(search, k, {"settings": "schedule"})
        point.update(latency(search, bench.queries, k))
        print(f"  {name} k={k}: {point}", flush=True)
        per_k[k] = {"best": {**point, "search": search}}
    bench.record(name, figures, per_k)
    return loaded


def probe_grid(partitions: int) -> list[int]:
    """Partitions to probe, in increasing cost, up to all of them (`depth_tuning.leaf_ladder`)."""
    return [int(rung) for rung in leaf_ladder(partitions) if rung is not None]


def rerank_grid(k: int, n: int) -> list[int]:
    """Candidates to re-rank for k neighbours, in increasing cost, at most n (`reorder_ladder`)."""
    return reorder_ladder(k, n, reranks=True)


def sweep_scann(bench: Bench, index: ScannIndex, name: str) -> dict[int, dict[str, Any]]:
    """A tree swept by hand on the shared grid at each depth: its best settings reaching the target."""
    per_k = {}
    for k in DEPTHS:
        rows = [
            [
                ({"leaves_to_search": lv, "reorder": r}, _scann_search(index, lv, r))
                for r in rerank_grid(k, index.size)
            ]
            for lv in probe_grid(index.config.num_leaves)
        ]
        per_k[k] = bench.best_of_sweep(name, k, rows)
    return per_k


def run_plain_scann(bench: Bench, index: ScannIndex) -> None:
    """The same tree, swept by hand: the best plain ScaNN settings at the target."""
    if index.config.num_leaves is not None:
        bench.record(
            "plain ScaNN, same tree, swept by hand", {}, sweep_scann(bench, index, "plain ScaNN sweep")
        )


def _scann_search(index: ScannIndex, leaves: int, reorder: int) -> Search:
    def search(queries: np.ndarray, k: int) -> np.ndarray:
        return index.search(queries, k, leaves_to_search=leaves, pre_reorder_num_neighbors=reorder).indices

    return search


def run_scann_readme(bench: Bench, ids: list[str]) -> None:
    """ScaNN's README recipe sized for this corpus: 2 sqrt(n) leaves (2,000 at 1M), 5 % searched, re-rank
    100 (k when deeper)."""
    n, dim = bench.data.shape
    leaves = min(2_000, max(2, round(math.sqrt(n) * 2)))
    builder = ScannIndexBuilder(dim, n).tree(leaves, max(1, leaves // 20), min(n, 250_000))
    index, figures = build_figures(
        lambda: builder.score_ah(2, 0.2).reorder(min(n, 100)).build(bench.data, ids)
    )
    index.set_search_threads(THREADS)
    per_k = {}
    for k in DEPTHS:
        search = _scann_search(index, max(1, leaves // 20), max(100, k))
        point = bench.point(search, k, {"leaves_to_search": max(1, leaves // 20), "reorder": max(100, k)})
        point.update(latency(search, bench.queries, k))
        per_k[k] = {"best": point, "note": "one setting, not tuned: it may miss the target"}
    bench.record(f"ScaNN README settings ({leaves} leaves)", figures, per_k)


def run_exact(bench: Bench) -> None:
    import faiss

    exact = ExactSearcher(bench.data, [str(i) for i in range(len(bench.data))])
    madr_search = lambda q, k: exact.search(q, k).indices  # noqa: E731
    flat, figures = build_figures(lambda: _faiss_flat(bench.data))
    faiss_search = lambda q, k: flat.search(q, k)[1]  # noqa: E731
    for name, search, build in (
        ("exact scoring (madr ExactSearcher)", madr_search, {}),
        ("exact scoring (FAISS IndexFlatIP)", faiss_search, figures),
    ):
        per_k = {}
        for k in DEPTHS:
            point = bench.point(search, k, {})
            point.update(latency(search, bench.queries, k))
            per_k[k] = {"best": point}
        bench.record(name, build, per_k)
    del faiss


def _faiss_flat(data: np.ndarray) -> Any:
    import faiss

    index = faiss.IndexFlatIP(data.shape[1])
    index.add(data)
    return index


def faiss_built(build: Callable[[], Any]) -> tuple[Any, dict[str, Any]]:
    """A FAISS index and its build figures, with its serialised size."""
    import faiss

    index, figures = build_figures(build)
    figures["serialised_mb"] = round(faiss.serialize_index(index).nbytes / 2**20, 1)
    return index, figures


def run_hnsw(bench: Bench) -> None:
    import faiss

    def build() -> Any:
        index = faiss.IndexHNSWFlat(bench.data.shape[1], 32, faiss.METRIC_INNER_PRODUCT)
        index.add(bench.data)
        return index

    index, figures = faiss_built(build)
    per_k = {}
    for k in DEPTHS:
        row = []
        for ef in (16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768):
            if ef >= k:
                params = faiss.SearchParametersHNSW(efSearch=ef)
                row.append(({"efSearch": ef}, lambda q, kk, p=params: index.search(q, kk, params=p)[1]))
        per_k[k] = bench.best_of_sweep("FAISS HNSW32", k, [row])
    bench.record("FAISS IndexHNSWFlat (M 32)", figures, per_k)


def run_ivfpq(bench: Bench) -> None:
    import faiss

    n, dim = bench.data.shape
    nlist = min(8192, 2 * round(math.sqrt(n)))
    recipe = f"IVF{nlist},PQ{dim // 2}x4fs,RFlat"

    def build() -> Any:
        index = faiss.index_factory(dim, recipe, faiss.METRIC_INNER_PRODUCT)
        index.train(bench.data[: min(n, 250_000)])
        index.add(bench.data)
        return index

    index, figures = faiss_built(build)
    per_k = {}
    for k in DEPTHS:
        rows = []
        for nprobe in probe_grid(nlist):
            row = []
            for factor in REORDER_MULTIPLES:
                base = faiss.SearchParametersIVF(nprobe=nprobe)
                params = faiss.IndexRefineSearchParameters(k_factor=factor, base_index_params=base)
                search = lambda q, kk, p=params: index.search(q, kk, params=p)[1]  # noqa: E731
                row.append(({"nprobe": nprobe, "k_factor": factor}, search))
            rows.append(row)
        per_k[k] = bench.best_of_sweep("FAISS IVF-PQ", k, rows)
    bench.record(f"FAISS {recipe}", figures, per_k)


def load_vectors(
    args: argparse.Namespace,
) -> tuple[np.ndarray, list[str], np.ndarray, np.ndarray | None, str]:
    if args.embeddings:
        from model import Side
        from pipelines.evaluate.calibration import first_queries
        from pipelines.inference import load_text_encoder
        from pipelines.io.parquet_reading import read_embeddings
        from pipelines.settings.options import ModelSettings

        ids, data, _ = read_embeddings(args.embeddings)
        data = np.ascontiguousarray(data, dtype=np.float32)
        queries = []
        wanted = args.queries + args.tune_queries
        for split in ("test", "valid", "train"):
            queries += first_queries(args.queries_file, split, wanted - len(queries))
        encoder = load_text_encoder(ModelSettings(args.model, precision=args.precision))
        vectors = encoder.encode([query.text for query in queries], Side.QUERY)
        measured, tuning = vectors[: args.queries], vectors[args.queries :]
        source = (
            f"{len(ids):,} products of {args.embeddings}; {len(measured):,} generator queries (test, then "
            f"valid and train splits) encoded by {args.model} ({args.precision}), and {len(tuning):,} others "
            "that the tuned variant's build reads"
        )
        return data, list(ids), measured, (tuning if len(tuning) else None), source
    n = 50_000 if args.quick else args.isotropic
    rng = np.random.default_rng(46)
    everything = rng.normal(size=(n + args.queries, args.dim)).astype(np.float32)
    everything /= np.linalg.norm(everything, axis=1, keepdims=True)
    source = f"{n:,} isotropic Gaussian unit vectors x {args.dim}; {args.queries:,} held-out ones as queries"
    return everything[:n], [f"v{i}" for i in range(n)], everything[n:], None, source


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--embeddings", default=None, help="Embed output folder (the shipped model's vectors)"
    )
    parser.add_argument("--model", default="runs/demo/model", help="Model that encodes the queries")
    parser.add_argument("--queries_file", default=None, help="Queries Parquet of the generator's benchmark")
    parser.add_argument("--precision", default="fp32", help="Query encoding precision (as the products')")
    parser.add_argument(
        "--isotropic", type=int, default=1_000_000, help="Isotropic vectors without --embeddings"
    )
    parser.add_argument("--dim", type=int, default=128, help="Dimensions of the isotropic vectors")
    parser.add_argument("--queries", type=int, default=1_000, help="Queries timed")
    parser.add_argument("--max_k", type=int, default=10_000, help="The artifact's deepest depth")
    parser.add_argument(
        "--tune_queries",
        type=int,
        default=1_000,
        help="Other encoded queries (never measured) that a second madr build also tunes on",
    )
    parser.add_argument(
        "--skip",
        default="",
        help="Systems to skip, comma-separated: hnsw, ivfpq, readme, untuned (a build without other queries)",
    )
    parser.add_argument("--name", default=None, help="Results file name (default from the data set)")
    parser.add_argument("--quick", action="store_true", help="50,000 isotropic vectors, 200 queries")
    args = parser.parse_args(argv)
    if args.quick:
        args.queries, args.embeddings = min(args.queries, 200), None
    import faiss

    faiss.omp_set_num_threads(THREADS)
    data, ids, queries, tuning, source = load_vectors(args)
    bench = Bench(data, np.ascontiguousarray(queries, dtype=np.float32), DEFAULT_TARGET_RECALL)
    skip = set(filter(None, args.skip.split(",")))
    with tempfile.TemporaryDirectory(prefix="madr-serving-bench-") as workdir:
        if tuning is None or "untuned" not in skip:
            index = run_madr(bench, ids, args.max_k, Path(workdir), None, MADR)
        if tuning is not None:
            index = run_madr(bench, ids, args.max_k, Path(workdir), tuning, MADR_TUNED)
        # The hand sweep is of the tree the summary judges: two trees of one recipe differ.
        run_plain_scann(bench, index)
        run_exact(bench)
        if "readme" not in skip:
            run_scann_readme(bench, ids)
        if "hnsw" not in skip:
            run_hnsw(bench)
        if "ivfpq" not in skip:
            run_ivfpq(bench)
        finals = bench.finals()
    figures = {"systems": bench.results, "finals": finals, "summary": summary(bench.results, finals)}
    name = args.name or (
        "serving_quick" if args.quick else "serving_shipped" if args.embeddings else "serving_isotropic"
    )
    config = {
        "command": command_line("bench.serving_bench", argv),
        "vectors": source,
        "n": len(data),
        "dimension": data.shape[1],
        "queries": len(queries),
        "target_recall": DEFAULT_TARGET_RECALL,
        "threads": THREADS,
        "faiss_version": faiss.__version__,
        **shared_machine_note(),
    }
    report(name, config, figures)
    print(format_table(bench.results))
    return figures


def summary(results: dict[str, dict[str, Any]], finals: Finals) -> dict[str, Any]:
    """The ratios the issue asks for, per k: madr against exact, the best FAISS and the best ScaNN sweep.
    Approximate searchers compare by their finals' median (`Bench.finals`); exact scoring by its sweep."""
    out = {}
    name = MADR_TUNED if MADR_TUNED in results else MADR
    madr = results[name]
    for k in DEPTHS:

        def qps(system: str, k: int = k) -> float | None:
            best = (results.get(system) or {}).get(f"k={k}", {}).get("best")
            if not best or best.get("recall", 0) < DEFAULT_TARGET_RECALL:
                return None
            final = finals.get(k, {}).get(system)
            return final["median_qps"] if final else best["qps"]

        faiss_best = max(filter(None, (qps(n) for n in results if n.startswith("FAISS"))), default=None)
        ours = qps(name)
        exact = qps("exact scoring (madr ExactSearcher)")
        sweep = qps("plain ScaNN, same tree, swept by hand")
        out[f"k={k}"] = {
            "madr_qps": ours,
            "madr_recall": madr[f"k={k}"]["best"]["recall"],
            "over_exact": ours and exact and round(ours / exact, 2),
            "over_best_faiss": ours and faiss_best and round(ours / faiss_best, 2),
            "over_best_scann_sweep": ours and sweep and round(ours / sweep, 2),
        }
    return out


def format_table(results: dict[str, dict[str, Any]]) -> str:
    lines = [
        "| system | k | recall | queries/s | p50 ms | p99 ms | build s | held MB | settings |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, result in results.items():
        for k in DEPTHS:
            best = result.get(f"k={k}", {}).get("best")
            if not best:
                lines.append(f"| {name} | {k} | below {DEFAULT_TARGET_RECALL} at every setting | | | | | | |")
                continue
            settings = {key: v for key, v in best.items() if key not in {"recall", "qps", "p50_ms", "p99_ms"}}
            lines.append(
                f"| {name} | {k} | {best['recall']:.3f} | {best['qps']:,.0f} | {best['p50_ms']:.2f} | "
                f"{best['p99_ms']:.2f} | {result.get('build_s', '—')} | {result.get('held_mb', '—')} | "
                f"{settings} |"
            )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
