"""The timing harness of `bench.serving_bench`: recall by score, batched queries/s, one-query latency, the
best point of a sweep, and the finals that time each system's best setting again, interleaved."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from bench.support import measure_memory
from index_builder import ExactSearcher

DEPTHS = (10, 100)
LATENCY_CALLS = 200
THREADS = 2
# Every partitioned searcher (madr's tree, plain ScaNN, FAISS IVF) is swept on one grid, so that none wins
# by a finer one, and it is the grid madr's build tunes on (`index_builder.depth_tuning`): partitions
# probed one by one up to 6, then 25 % more per step; candidates re-ranked exactly as 1, 1.5, 2, 3, 4, 6,
# ... 32 times k (ScaNN's pre-reorder depth, FAISS's k_factor).
# A row whose cheapest point runs below this share of the best queries/s found ends the sweep (wider
# rows cost more); the margin keeps timing noise from ending it early.
SLOWER_THAN_BEST = 0.7
# The finals: each system's best setting timed again, round after round in a rotating order, on the
# queries repeated to a batch long enough (FINAL_BATCH) that one timing is not a few milliseconds. The
# median round decides: two sweeps of one setting a minute apart differed by up to 25 % on this machine,
# and whichever system was swept while the machine was busier lost.
FINAL_ROUNDS = 9
FINAL_BATCH = 5_000
Search = Callable[[np.ndarray, int], np.ndarray]
Finals = dict[int, dict[str, dict[str, float]]]


def as_near_recall(
    found: np.ndarray, queries: np.ndarray, data: np.ndarray, kth: np.ndarray, k: int
) -> float:
    """Share of found neighbours as near as the true k-th (a padded -1 counts as a miss)."""
    hits = 0
    for query, rows, threshold in zip(queries, found[:, :k], kth, strict=True):
        rows = rows[rows >= 0]
        hits += int(np.count_nonzero(data[rows] @ query >= threshold - 1e-5))
    return hits / (len(queries) * k)


def timing(search: Search, queries: np.ndarray, k: int, repeats: int = 3) -> tuple[np.ndarray, float]:
    """(results, queries/s): the best of `repeats` batched searches after a warm-up."""
    search(queries[:8], k)
    best, found = math.inf, None
    for _ in range(repeats):
        started = time.perf_counter()
        found = search(queries, k)
        best = min(best, time.perf_counter() - started)
    return np.asarray(found), len(queries) / best


def latency(search: Search, queries: np.ndarray, k: int) -> dict[str, float]:
    """p50 / p99 milliseconds of one-query calls."""
    seconds = []
    for query in queries[:LATENCY_CALLS]:
        started = time.perf_counter()
        search(query[None, :], k)
        seconds.append(time.perf_counter() - started)
    return {
        "p50_ms": float(np.percentile(seconds, 50) * 1e3),
        "p99_ms": float(np.percentile(seconds, 99) * 1e3),
    }


class Bench:
    def __init__(self, data: np.ndarray, queries: np.ndarray, target: float) -> None:
        self.data, self.queries, self.target = data, queries, target
        exact = ExactSearcher(data, [str(i) for i in range(len(data))])
        deepest = exact.search(queries, max(DEPTHS))
        self.kth = {k: deepest.scores[:, k - 1] for k in DEPTHS}
        self.results: dict[str, dict[str, Any]] = {}
        self.finalists: dict[int, dict[str, Search]] = {k: {} for k in DEPTHS}

    def recall(self, found: np.ndarray, k: int) -> float:
        return as_near_recall(found, self.queries, self.data, self.kth[k], k)

    def point(self, search: Search, k: int, settings: dict[str, Any]) -> dict[str, Any]:
        found, qps = timing(search, self.queries, k)
        return {**settings, "recall": round(self.recall(found, k), 4), "qps": round(qps, 1)}

    def best_of_sweep(
        self, name: str, k: int, grid: list[list[tuple[dict[str, Any], Search]]]
    ) -> dict[str, Any]:
        """The fastest point reaching the target. `grid` rows run along an outer knob (leaves, nprobe),
        each row along an inner one (re-ranking, k_factor), both in increasing cost: a row stops at its
        first point reaching the target (the rest are slower), and the sweep stops after a row whose
        first point reached it (wider rows are slower still), or at a row whose cheapest point is already
        well below the best found (SLOWER_THAN_BEST): every point of it and of the wider rows costs more."""
        measured, best = [], None
        for row in grid:
            reached_at = None
            for position, (settings, search) in enumerate(row):
                point = self.point(search, k, settings)
                measured.append(point)
                print(f"  {name} k={k}: {point}", flush=True)
                if position == 0 and best is not None and point["qps"] < SLOWER_THAN_BEST * best["qps"]:
                    reached_at = 0  # not reached, but nothing from here on can be faster
                    break
                if point["recall"] >= self.target:
                    if best is None or point["qps"] > best["qps"]:
                        best = {**point, "search": search}
                    reached_at = position
                    break
            if reached_at == 0:
                break
        if best is not None:
            best.update(latency(best["search"], self.queries, k))
        return {"best": best, "sweep": measured}

    def finals(self) -> dict[int, dict[str, dict[str, float]]]:
        """Each finalist's queries/s over FINAL_ROUNDS interleaved rounds (median, min, max): the figures
        the summary compares."""
        batch = np.resize(self.queries, (max(FINAL_BATCH, len(self.queries)), self.queries.shape[1]))
        out: dict[int, dict[str, dict[str, float]]] = {}
        for k, finalists in self.finalists.items():
            names = list(finalists)
            rounds: dict[str, list[float]] = {name: [] for name in names}
            for name in names:
                finalists[name](batch[:8], k)
            for round_number in range(FINAL_ROUNDS):
                shift = round_number % len(names)
                for name in names[shift:] + names[:shift]:
                    started = time.perf_counter()
                    finalists[name](batch, k)
                    rounds[name].append(len(batch) / (time.perf_counter() - started))
            out[k] = {
                name: {
                    "median_qps": round(float(np.median(q)), 1),
                    "min_qps": round(min(q), 1),
                    "max_qps": round(max(q), 1),
                }
                for name, q in rounds.items()
            }
            for name, figures in out[k].items():
                print(f"  finals k={k}: {name}: {figures}", flush=True)
        return out

    def record(self, name: str, build: dict[str, Any], per_k: dict[int, dict[str, Any]]) -> None:
        """A system's figures; the search of each depth's best point (when it carries one) is a finalist."""
        for k, result in per_k.items():
            best = result.get("best") or {}
            if "search" in best:
                self.finalists[k][name] = best.pop("search")
        self.results[name] = {**build, **{f"k={k}": result for k, result in per_k.items()}}


def build_figures(call: Callable[[], Any]) -> tuple[Any, dict[str, Any]]:
    built, seconds, peak, retained = measure_memory(call)
    return built, {
        "build_s": round(seconds, 1),
        "build_peak_mb": round(peak, 1),
        "held_mb": round(retained, 1),
    }


def folder_mb(folder: Path) -> float:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) / 2**20
