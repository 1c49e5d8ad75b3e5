"""Exact search (issue 12): madr's `ExactSearcher` against FAISS `IndexFlatIP` and torch matmul + topk.

All three search the same seeded float32 unit vectors with the same queries on the same number of threads
(``torch.set_num_threads`` and ``faiss.omp_set_num_threads``), side by side in one run: each repeat times
the three in turn, so a busy neighbour on a shared machine slows all of them alike, and the fastest
repeat of each is reported. The plain baseline scores blocks of queries against the whole corpus (as
many queries as fit 512 MB of scores, madr's default budget) and calls ``torch.topk`` on them. madr's
time includes what its API returns and the others do not: the product-id strings of every result.

Results must agree: every returned (query, product) pair is re-scored in float64, and each method's
rescored top-k must equal madr's within ``--tolerance`` at every rank. That is "the same ids up to ties":
two methods may order near-equal scores differently, never return a worse product.

    python -m bench.exact_search_bench           # 200k × 128 at k = 10 and 1000, then 1M × 128 at k = 10
    python -m bench.exact_search_bench --quick   # 200k × 128 only
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from bench.common import report, table
from bench.support import (
    clustered_unit_vectors,
    command_line,
    describe_generator,
    shared_machine_note,
)
from index_builder import ExactSearcher

# (corpus size, k) of every case; the last ones only run at full size.
CASES = ((200_000, 10), (200_000, 1_000))
FULL_ONLY_CASES = ((1_000_000, 10),)
PLAIN_SCORE_BYTES = 512 * 1024 * 1024

Search = Callable[[np.ndarray, int], tuple[np.ndarray, np.ndarray]]


def plain_torch(data: np.ndarray) -> Search:
    """torch.mm of a block of queries against the whole corpus, then torch.topk: the obvious version."""
    import torch

    corpus = torch.from_numpy(data)

    def search(queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        block = max(1, PLAIN_SCORE_BYTES // (4 * len(data)))
        scores = np.empty((len(queries), k), dtype=np.float32)
        indices = np.empty((len(queries), k), dtype=np.int64)
        for start in range(0, len(queries), block):
            top = torch.topk(torch.from_numpy(queries[start : start + block]) @ corpus.T, k, dim=1)
            scores[start : start + block], indices[start : start + block] = top.values, top.indices
        return scores, indices

    return search


def faiss_flat(data: np.ndarray) -> Search:
    import faiss

    index = faiss.IndexFlatIP(data.shape[1])
    index.add(data)

    def search(queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        return index.search(queries, k)

    return search


def madr_exact(data: np.ndarray) -> Search:
    searcher = ExactSearcher(data, [f"v{i}" for i in range(len(data))])

    def search(queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        result = searcher.search(queries, k)
        return result.scores, result.indices

    return search


def rescored(data: np.ndarray, queries: np.ndarray, indices: np.ndarray) -> np.ndarray:
    """float64 dot products of each query with its returned rows, sorted descending."""
    exact = np.empty(indices.shape, dtype=np.float64)
    for start in range(0, len(queries), 100):  # 100 × k × d float64 at a time, not q × k × d
        rows = data[indices[start : start + 100]].astype(np.float64)
        exact[start : start + 100] = np.einsum(
            "qd,qkd->qk", queries[start : start + 100].astype(np.float64), rows
        )
    return -np.sort(-exact, axis=1)


def agreement(
    data: np.ndarray,
    queries: np.ndarray,
    reference: tuple[np.ndarray, np.ndarray],
    other: tuple[np.ndarray, np.ndarray],
) -> dict[str, Any]:
    """How far ``other`` is from madr's ``reference``: rank-wise float64 score gaps and identical id rows."""
    gap = np.abs(rescored(data, queries, reference[1]) - rescored(data, queries, other[1]))
    returned_gap = np.abs(reference[0].astype(np.float64) - np.sort(other[0], axis=1)[:, ::-1])
    pairs = zip(reference[1].tolist(), other[1].tolist(), strict=True)
    same_rows = np.mean([set(a) == set(b) for a, b in pairs])
    return {
        "max_rescored_gap": float(gap.max()),
        "max_returned_score_gap": float(returned_gap.max()),
        "rows_with_identical_ids": round(float(same_rows), 4),
    }


def run_case(data: np.ndarray, queries: np.ndarray, k: int, repeats: int, tolerance: float) -> dict[str, Any]:
    methods: dict[str, Search] = {}
    setup_s: dict[str, float] = {}
    for name, make in (("madr", madr_exact), ("faiss", faiss_flat), ("torch", plain_torch)):
        started = time.perf_counter()
        methods[name] = make(data)
        setup_s[name] = round(time.perf_counter() - started, 3)
        methods[name](queries[:8], k)  # warm-up: thread pools, first-touch of the corpus
    best = dict.fromkeys(methods, float("inf"))
    outputs: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for _ in range(repeats):
        for name, search in methods.items():
            started = time.perf_counter()
            outputs[name] = search(queries, k)
            best[name] = min(best[name], time.perf_counter() - started)
    checks = {name: agreement(data, queries, outputs["madr"], outputs[name]) for name in ("faiss", "torch")}
    agree = all(max(c["max_rescored_gap"], c["max_returned_score_gap"]) <= tolerance for c in checks.values())
    return {
        "n": len(data),
        "k": k,
        "seconds": {name: round(s, 4) for name, s in best.items()},
        "queries_per_s": {name: round(len(queries) / s, 1) for name, s in best.items()},
        "speed_vs_faiss": {name: round(best["faiss"] / s, 3) for name, s in best.items()},
        "setup_s": setup_s,
        "agreement_vs_madr": checks,
        "agree": agree,
    }


def print_table(cases: list[dict[str, Any]], dim: int) -> None:
    print(f"\n{'case':<22}{'method':<26}{'seconds':>9}{'QPS':>10}{'vs FAISS':>10}")
    labels = {"madr": "madr ExactSearcher", "faiss": "FAISS IndexFlatIP", "torch": "torch matmul + topk"}
    for case in cases:
        name = f"{case['n']:,} × {dim}, k={case['k']}"
        for method, label in labels.items():
            print(
                f"{name:<22}{label:<26}{case['seconds'][method]:>9.3f}"
                f"{case['queries_per_s'][method]:>10,.0f}{case['speed_vs_faiss'][method]:>9.2f}x"
            )
            name = ""
        print(f"{'':<22}results agree: {case['agree']}")


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--queries", type=int, default=1_000, help="Queries (default: %(default)s)")
    parser.add_argument("--dim", type=int, default=128, help="Dimension (default: %(default)s)")
    parser.add_argument("--threads", type=int, default=2, help="torch, FAISS threads (default: %(default)s)")
    parser.add_argument("--repeats", type=int, default=5, help="Timed runs, best kept (default: %(default)s)")
    parser.add_argument(
        "--tolerance", type=float, default=1e-5, help="Score gap allowed (default: %(default)s)"
    )
    parser.add_argument("--seed", type=int, default=0, help="Generator seed (default: %(default)s)")
    parser.add_argument("--quick", action="store_true", help="Only the 200k cases")
    args = parser.parse_args(argv)

    import faiss
    import torch

    cases = CASES if args.quick else CASES + FULL_ONLY_CASES
    largest = max(n for n, _ in cases)
    everything = clustered_unit_vectors(largest + args.queries, args.dim, seed=args.seed)
    queries = everything[largest:]
    config = {
        "command": command_line("bench.exact_search_bench", argv),
        **vars(args),
        "cases": [{"n": n, "k": k} for n, k in cases],
        "data": describe_generator(args.dim),
        "faiss_version": faiss.__version__,
        "torch_version": torch.__version__,
        **shared_machine_note(),
    }
    print(f"exact_search_bench: {config}", flush=True)
    threads_before = torch.get_num_threads()
    torch.set_num_threads(args.threads)
    faiss.omp_set_num_threads(args.threads)
    results = []
    try:
        for n, k in cases:
            results.append(run_case(everything[:n], queries, k, args.repeats, args.tolerance))
            print(f"  {results[-1]}", flush=True)
    finally:
        torch.set_num_threads(threads_before)
    print_table(results, args.dim)
    figures: dict[str, Any] = {
        "cases": results,
        "all_agree": all(case["agree"] for case in results),
        "load_average_1min_at_end": shared_machine_note()["load_average_1min_at_start"],
    }
    # Results at another thread count are saved beside, not over, the 2-thread ones.
    name = "exact_search" + ("" if args.threads == 2 else f"_{args.threads}threads")
    report(name + ("_quick" if args.quick else ""), config, figures)
    if not figures["all_agree"]:
        raise RuntimeError("exact_search_bench: the methods disagree beyond the tolerance")
    return figures


def exact_search_section(r: dict[str, Any]) -> str:
    """This benchmark's section of docs/PERFORMANCE.md (`bench.performance_doc` renders it)."""
    rows = []
    for case in r["figures"]["cases"]:
        speeds = [case["queries_per_s"][m] for m in ("madr", "faiss", "torch")]
        same = "yes" if case["agree"] else "NO"
        rows.append([f"{case['n']:,}", case["k"], *speeds, case["speed_vs_faiss"]["madr"], same])
    header = [
        "corpus",
        "k",
        "madr QPS",
        "FAISS IndexFlatIP QPS",
        "torch mm+topk QPS",
        "madr / FAISS",
        "same ids",
    ]
    c = r["config"]
    return (
        table(header, rows)
        + f"\n\n{c['queries']} queries × {c['dim']} dims, {c['threads']} threads, best of {c['repeats']}."
    )


if __name__ == "__main__":
    main()
