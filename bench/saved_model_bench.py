"""The index as a TensorFlow SavedModel against the artifact it was made from (issue 66, Must have 2).

`index_builder.tf_export.export_saved_model` turns a published artifact's own trees into a SavedModel; here,
in one run, both answer the same queries at k = 10 and 100: recall against exact search (a neighbour as
near as the true k-th counts), the share of the artifact's ids the SavedModel returns, queries/s over a
batch, and one-query latency p50 / p99 (200 calls). The artifact is `ScannIndex`/`PartitionedIndex`
loaded as a server loads it; the SavedModel is `tf.saved_model.load` of the export, its signature called.

Needs the serving extra (TensorFlow): run it from the `make test-serving` venv.

    .venv-serving/bin/python -m bench.saved_model_bench                 # 200,000 x 64 clustered vectors
    .venv-serving/bin/python -m bench.saved_model_bench --quick         # 20,000
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import report, table
from bench.support import clustered_unit_vectors, command_line, shared_machine_note
from index_builder import ExactSearcher, open_index
from index_builder.tf_export import export_saved_model, require_tensorflow
from jobs.cli import parse_command
from pipelines.index.partitioned import build_partitioned
from tests.test_index_partitioned import write_embeddings

DEPTHS = (10, 100)


def recall_by_score(
    found: np.ndarray, truth_scores: np.ndarray, corpus: np.ndarray, queries: np.ndarray
) -> float:
    """Share of found rows at least as near as the true k-th (ties count as right)."""
    scores = np.einsum("qd,qkd->qk", queries, corpus[found])
    return float(np.mean(scores >= truth_scores[:, -1:] - 1e-6))


def timed_rate(call: Any, batch: np.ndarray) -> float:
    call(batch[:10])
    started = time.perf_counter()
    call(batch)
    return round(len(batch) / (time.perf_counter() - started), 1)


def latency(call: Any, queries: np.ndarray, calls: int = 200) -> tuple[float, float]:
    times = []
    for row in range(calls):
        started = time.perf_counter()
        call(queries[row % len(queries)][None, :])
        times.append((time.perf_counter() - started) * 1000)
    return round(float(np.percentile(times, 50)), 3), round(float(np.percentile(times, 99)), 3)


def run(args: argparse.Namespace) -> dict[str, Any]:
    tf, _ = require_tensorflow()
    vectors = clustered_unit_vectors(args.size + args.queries, args.dim, seed=66)
    corpus, queries = vectors[: args.size], vectors[args.size :]
    ids = [f"p{i:07d}" for i in range(args.size)]
    figures: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="madr-saved-model-bench-") as root:
        write_embeddings(Path(root) / "embeddings", ids, corpus)
        flags = ["--embeddings", f"{root}/embeddings", "--output", f"{root}/index", "--depth", "100"]
        started = time.perf_counter()
        build_partitioned(*parse_command("build-index", [*flags, "--serving_depths", "10,100"]))
        figures["build_s"] = round(time.perf_counter() - started, 1)
        index = open_index(f"{root}/index")
        started = time.perf_counter()
        export_saved_model(f"{root}/index", f"{root}/saved", DEPTHS)
        figures["export_s"] = round(time.perf_counter() - started, 1)
        loaded = tf.saved_model.load(f"{root}/saved")
        exact = ExactSearcher(corpus, ids)
        for k in DEPTHS:
            signature = loaded.signatures[f"top_{k}"]

            def graph(batch: np.ndarray, signature: Any = signature) -> np.ndarray:
                return signature(queries=tf.constant(batch))["indices"].numpy()

            def artifact(batch: np.ndarray, k: int = k) -> np.ndarray:
                return index.search(batch, k).indices

            truth = exact.search(queries, k)
            found = {"artifact": artifact(queries), "saved_model": graph(queries)}
            row: dict[str, Any] = {}
            for name, call in (("artifact", artifact), ("saved_model", graph)):
                p50, p99 = latency(call, queries)
                row[name] = {
                    "recall": round(recall_by_score(found[name], truth.scores, corpus, queries), 4),
                    "queries_per_s": timed_rate(call, queries),
                    "p50_ms": p50,
                    "p99_ms": p99,
                }
            same = [
                len(set(a) & set(b)) / k for a, b in zip(found["saved_model"], found["artifact"], strict=True)
            ]
            row["same_ids"] = round(float(np.mean(same)), 4)
            row["saved_model_vs_artifact_qps"] = round(
                row["saved_model"]["queries_per_s"] / row["artifact"]["queries_per_s"], 2
            )
            figures[f"k{k}"] = row
    return figures


def saved_model_section(r: dict[str, Any]) -> str:
    f, c = r["figures"], r["config"]
    rows = []
    for k in DEPTHS:
        row = f[f"k{k}"]
        for name in ("artifact", "saved_model"):
            m = row[name]
            label = "madr artifact (ScaNN pybind)" if name == "artifact" else "its SavedModel (ScaNN TF ops)"
            rows.append([k, label, m["recall"], m["queries_per_s"], m["p50_ms"], m["p99_ms"]])
        rows.append([k, "SavedModel's ids that are the artifact's", row["same_ids"], None, None, None])
    note = (
        f"{c['size']:,} clustered unit vectors × {c['dim']}, {c['queries']:,} queries from the same "
        f"clusters; the artifact built by `madr build-index` (tuned for 10 and 100, {f['build_s']} s), "
        f"exported in {f['export_s']} s; queries/s over the whole batch, latency one query a call."
    )
    return table(["k", "system", "recall", "queries/s", "p50 ms", "p99 ms"], rows) + "\n\n" + note


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--size", type=int, default=200_000)
    parser.add_argument("--dim", type=int, default=64)
    parser.add_argument("--queries", type=int, default=1_000)
    parser.add_argument("--quick", action="store_true", help="20,000 vectors")
    args = parser.parse_args(argv)
    if args.quick:
        args.size = 20_000
    config = {
        "command": command_line("bench.saved_model_bench", argv),
        "size": args.size,
        "dim": args.dim,
        "queries": args.queries,
        **shared_machine_note(),
    }
    report("saved_model_quick" if args.quick else "saved_model", config, run(args))


if __name__ == "__main__":
    main()
