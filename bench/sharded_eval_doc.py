"""docs/PERFORMANCE.md's section of `bench.sharded_eval_bench`: the evaluation searched shard by shard
against the whole-index evaluation, at 1M and 10M vectors in 16 shards, from its results file."""

from __future__ import annotations

from typing import Any

from bench.common import table

MODES = {"whole": "whole index in the worker", "by_shard": "shard by shard (the stage's)"}
EIGHT_GB_MB = 8 * 1024


def _peak(run: dict[str, Any]) -> float:
    """The largest peak RSS of any process of a stage (the stage's own, or a worker's)."""
    return max([run["peak_rss_mb"], *(w["peak_rss_mb"] for w in run.get("worker_processes", []))])


def sharded_eval_rows(r: dict[str, Any]) -> list[list[Any]]:
    """One row per (size, index, step): seconds, Recall@10k, the largest process's peak RSS."""
    rows = []
    for size, found in sorted(r["figures"]["per_size"].items(), key=lambda item: int(item[0])):
        for name, index in sorted((found.get("indexes") or {}).items()):
            if "build" in index:
                build = index["build"]
                failed = ": OOM-killed after writing every shard" if "failed" in build else ""
                step = f"build, 16 shards{failed}"
                rows.append([f"{int(size):,}", name, step, build["seconds"], "", _peak(build)])
            for mode, run in (index.get("evaluate") or {}).items():
                label = f"evaluate: {MODES.get(mode, mode)}"
                rows.append([f"{int(size):,}", name, label, run["seconds"], run["recall_at_10k"], _peak(run)])
    return rows


def sharded_eval_section(r: dict[str, Any]) -> str:
    c = r["config"]
    body = table(
        ["vectors", "index", "step", "wall s", "Recall@10k", "largest process peak RSS MB"],
        sharded_eval_rows(r),
    )
    extrapolated = r["figures"].get("whole_evaluation_extrapolated") or []
    notes = [
        f"\n\n{c['layout']}: vectors {c['generator']}; {c['queries']:,} queries with planted relevant "
        f"products; {c['runner']}. Recall@10k is the evaluation's (the planted products found in the top "
        "10,000); both modes score the same rankings. A failed step shows the figures at its failure.",
    ]
    for row in extrapolated:
        notes.append(
            f" Extrapolated from {row['from']} to {row['to']} by index bytes (×{row['bytes_ratio']}), the "
            f"whole-index evaluation would peak near {row['peak_rss_mb']:,.0f} MB: not a run, and the run "
            "above is lower."
        )
    return body + "".join(notes)


def sharded_eval_verdicts(r: dict[str, Any] | None) -> list[list[str]]:
    """Issue 62's target: the evaluation at 10M vectors in 16 shards with no process above 8 GB."""
    if r is None:
        return []
    found = (r["figures"]["per_size"].get("10000000") or {}).get("indexes") or {}
    evaluated = [index.get("evaluate") or {} for index in found.values()]
    runs = [modes["by_shard"] for modes in evaluated if "by_shard" in modes]
    if not runs:
        return [["evaluation at 10M × 128, 16 shards, every process ≤ 8 GB", "not measured", "not measured"]]
    peak = max(_peak(run) for run in runs)
    verdict = "met" if peak <= EIGHT_GB_MB else "missed"
    return [["evaluation at 10M × 128, 16 shards, every process ≤ 8 GB", f"{peak:,.0f} MB", verdict]]


__all__ = ["sharded_eval_rows", "sharded_eval_section", "sharded_eval_verdicts"]
