"""Issue 62 item 6, part 1: 16-shard index builds at 1M and 10M vectors and the whole-index evaluation.

No model. Written once under runs/bench/sharded_eval/<size>/ and reused: embeddings/, 128-d vectors like
product embeddings (rank-32 structure, decaying spectrum, isotropic noise, unit rows) as an embed stage
writes them (Parquet shards + a "madr-embeddings" manifest), and queries/, 1,000 query vectors, each with
six planted products (the query plus noise of growing norm, graded 3, 3, 2, 2, 2, 1) and a random grade-0
one as judgments. Each stage runs in a subprocess (its own VmHWM), the parent sampling every process of
its tree (Beam workers, where a runner starts any) every 0.25 s:

- data: written 250,000 rows at a time (never the whole matrix);
- build: `build_partitioned`, IndexSettings(num_index_shards=16, depth=10000), into index/ (or
  index-target<t>/ with --target_recall t: 0 trains with the default settings and only measures);
- open: `open_index` + `CorpusIds` alone, what a whole-index evaluation worker holds before searching;
- evaluate(mode): JoinJudgments + a scorer + WriteRun on the local runner: Recall@10k and the default
  metrics. "whole" is SearchAndScore(SearcherSpec("ann", index)); a mode is one entry of `SCORERS`.

The whole-index evaluation's peak at the largest size is extrapolated from the smallest evaluated size
by index bytes (beside the measured `open` there), not run. Figures merge into bench/results/.

    python -m bench.sharded_eval_bench --quick                  # 20,000 vectors, 200 queries
    python -m bench.sharded_eval_bench --sizes 1000000          # data, build, open, evaluate "whole"
    python -m bench.sharded_eval_bench --sizes 10000000 --eval_sizes '' --target_recall 0
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shlex
import shutil
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import RESULTS, report
from bench.support import command_line, shared_machine_note

ROOT = Path(__file__).resolve().parent.parent / "runs" / "bench" / "sharded_eval"
DIM, RANK, NOISE, SHARDS, DEPTH, FILE_ROWS = 128, 32, 0.5, 16, 10_000, 250_000
MODEL = ("synthetic-lowrank-128", "1")
# (noise norm added to the unit query, grade) of each planted product: cosines ~0.93 ... 0.45, 0.71.
PLANTED = ((0.4, 3), (0.8, 3), (1.2, 2), (1.6, 2), (2.0, 2), (1.0, 1))
GENERATOR = (
    f"rows z·diag(s)·B + e: B a random orthonormal {RANK}x{DIM} basis, s_i ∝ (1+i)^-1/2 (|s| = 1), "
    f"z ~ N(0, I_{RANK}), e ~ N(0, {NOISE}²/{DIM} I_{DIM}); L2-normalised; numpy default_rng([seed, file])"
)
TAG = "madr-bench-sharded-eval"  # the child's last lines: "<TAG> result <json>", "<TAG> vmhwm_kb <n>"


# ---------------------------------------------------------------- data (child)
def _basis(seed: int) -> np.ndarray:
    rng = np.random.default_rng([seed, 0])
    basis = np.linalg.qr(rng.standard_normal((DIM, RANK)))[0].T
    spectrum = (1.0 + np.arange(RANK)) ** -0.5
    return (spectrum / np.linalg.norm(spectrum))[:, None] * basis


def _draw(rng: np.random.Generator, rows: int, basis: np.ndarray) -> np.ndarray:
    x = rng.standard_normal((rows, RANK)) @ basis + rng.standard_normal((rows, DIM)) * (NOISE / DIM**0.5)
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def _planted(queries: np.ndarray, seed: int) -> np.ndarray:
    """(queries, len(PLANTED), DIM): each query plus a random direction of each planted noise norm."""
    rng = np.random.default_rng([seed, 2])
    directions = rng.standard_normal((len(queries), len(PLANTED), DIM))
    directions /= np.linalg.norm(directions, axis=2, keepdims=True)
    norms = np.array([norm for norm, _ in PLANTED])[None, :, None]
    planted = queries[:, None, :] + norms * directions
    return (planted / np.linalg.norm(planted, axis=2, keepdims=True)).astype(np.float32)


def write_data(folder: Path, size: int, num_queries: int, seed: int) -> dict[str, Any]:
    """embeddings/ (an embed stage's output) and queries/ (queries.parquet, judgments.parquet)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from pipelines.storage.stage_manifests import write_stage_manifest
    from pipelines.storage.staged_output import fresh_output
    from schemas import EMBEDDING_ANNOTATION_COLUMNS, JUDGMENT_SCHEMA, embedding_schema

    basis, stride = _basis(seed), size // num_queries
    if stride < len(PLANTED) + 1:
        raise ValueError(f"{size} vectors are too few for {num_queries} queries")
    queries = _draw(np.random.default_rng([seed, 1]), num_queries, basis)
    planted = _planted(queries, seed).reshape(-1, DIM)
    planted_rows = (np.arange(num_queries)[:, None] * stride + np.arange(len(PLANTED))).reshape(-1)
    schema, files = embedding_schema(DIM), -(-size // FILE_ROWS)
    with fresh_output(str(folder / "embeddings")) as staging:
        for part in range(files):
            start, stop = part * FILE_ROWS, min(size, (part + 1) * FILE_ROWS)
            matrix = _draw(np.random.default_rng([seed, 10 + part]), stop - start, basis)
            inside = (planted_rows >= start) & (planted_rows < stop)
            matrix[planted_rows[inside] - start] = planted[inside]
            ids = [f"p{row:08d}" for row in range(start, stop)]
            n = len(ids)
            table = pa.table(
                {
                    "product_id": ids,
                    "embedding": pa.FixedSizeListArray.from_arrays(pa.array(matrix.reshape(-1)), DIM),
                    "model_id": pa.array([MODEL[0]] * n),
                    "model_version": pa.array([MODEL[1]] * n),
                    "content_hash": [hashlib.sha256(i.encode()).hexdigest() for i in ids],
                    **{c: pa.nulls(n, schema.field(c).type) for c in EMBEDDING_ANNOTATION_COLUMNS},
                },
                schema=schema,
            )
            pq.write_table(
                table, f"{staging}/embeddings-{part:05d}-of-{files:05d}.parquet", row_group_size=65_536
            )
            del matrix, table
        counts = dict(products_read=size, products_embedded=size, products_reused=0, products_dead_lettered=0)
        info = dict(model_id=MODEL[0], model_version=MODEL[1], dimension=DIM, generator=GENERATOR, seed=seed)
        write_stage_manifest(
            staging, "madr-embeddings", {**info, "counts": counts}, {"embeddings*.parquet": size}
        )
    rng = np.random.default_rng([seed, 3])
    judged = [
        {"query_id": f"q{q:05d}", "product_id": f"p{q * stride + k:08d}", "grade": grade, "label": None}
        for q in range(num_queries)
        for k, (_, grade) in enumerate(PLANTED)
    ] + [
        {"query_id": f"q{q:05d}", "product_id": f"p{int(rng.integers(size)):08d}", "grade": 0, "label": None}
        for q in range(num_queries)
    ]
    with fresh_output(str(folder / "queries")) as staging:
        query_ids = [f"q{q:05d}" for q in range(num_queries)]
        vectors = pa.FixedSizeListArray.from_arrays(pa.array(queries.reshape(-1)), DIM)
        pq.write_table(pa.table({"query_id": query_ids, "embedding": vectors}), f"{staging}/queries.parquet")
        pq.write_table(pa.Table.from_pylist(judged, schema=JUDGMENT_SCHEMA), f"{staging}/judgments.parquet")
        write_stage_manifest(staging, kind="madr-bench-queries", info={"queries": num_queries, "seed": seed})
    return {"vectors": size, "queries": num_queries, "judgments": len(judged), "files": files}


# ---------------------------------------------------------------- index build and open (child)
def build_index(embeddings: str, output: str, target: str) -> dict[str, Any]:
    """`madr build-index` of 16 shards at depth 10,000; `target` "" keeps the default --target_recall."""
    from pipelines.index.config import IndexBuildConfig
    from pipelines.index.partitioned import build_partitioned
    from pipelines.settings.options import IndexSettings

    tuning = {"target_recall": float(target)} if target else {}
    settings = IndexSettings(num_index_shards=SHARDS, depth=DEPTH, **tuning)
    built = build_partitioned(IndexBuildConfig(embeddings=embeddings, output=output, index=settings))
    return {
        "target_recall": settings.target_recall,
        "build_seconds_in_process": round(built.seconds, 1),
        "shard_counts": list(built.shard_counts),
        "recall": built.recall,
        # Each distinct ScaNN setting of the shards (their sizes left out), with how many shards have it.
        "shard_settings": Counter(text.split("\n", 1)[-1] for text in built.shard_settings),
    }


def open_whole(index: str) -> dict[str, Any]:
    """What a whole-index worker holds before it searches: the loaded index and its id lookup."""
    from bench.support import current_rss_mb
    from evaluation.ranked import CorpusIds
    from pipelines.evaluate.searchers import SearcherSpec

    rss = {"rss_before_mb": round(current_rss_mb(), 1)}
    searcher = SearcherSpec("ann", index).open()
    rss["rss_after_open_mb"] = round(current_rss_mb(), 1)
    corpus = CorpusIds(searcher.ids)
    return {**rss, "rss_after_corpus_ids_mb": round(current_rss_mb(), 1), "corpus": len(corpus)}


# ---------------------------------------------------------------- evaluation (child)
def _whole(index: str, depth: int, metrics: Any, rule: Any, batch_size: int) -> Any:
    from pipelines.evaluate.searchers import SearcherSpec
    from pipelines.evaluate.transforms import SearchAndScore

    return SearchAndScore(SearcherSpec("ann", index), depth, metrics, rule, batch_size)


def _by_shard(index: str, depth: int, metrics: Any, rule: Any, batch_size: int) -> Any:
    """The evaluation stage's own search: one shard a task, each query's candidates merged after."""
    import apache_beam as beam

    from pipelines.evaluate.corpus_parts import index_parts
    from pipelines.evaluate.sharded import DENSE, SearchPartsAndScore

    search = SearchPartsAndScore(index_parts(index), (), (DENSE,), DENSE, depth, metrics, rule, batch_size)

    class ByShard(beam.PTransform):
        def expand(self, queries: Any) -> dict[str, Any]:
            found = queries | search
            return {"per_query": found[f"per_query_{DENSE}"], "relevant_ranks": found[f"ranks_{DENSE}"],
                    "run": found["run"]}  # fmt: skip

    return ByShard()


# mode -> (index folder, depth, metrics, rule, batch_size) -> a transform of JudgedQuery to
# {"per_query", "relevant_ranks", "run"}, as SearchAndScore's.
SCORERS: dict[str, Callable[..., Any]] = {"whole": _whole, "by_shard": _by_shard}


def evaluate_stage(mode: str, index: str, queries: str, output: str, batch_size: int, flags: str) -> dict:
    import apache_beam as beam
    import pyarrow.parquet as pq
    from apache_beam.options.pipeline_options import PipelineOptions

    from evaluation import DEFAULT_METRICS, RelevanceRule, aggregate, parse_metrics
    from evaluation.cutoffs import plan_cutoffs
    from pipelines.evaluate.searchers import SearcherSpec
    from pipelines.evaluate.transforms import JoinJudgments, WriteRun
    from pipelines.runner import make_pipeline

    table = pq.read_table(f"{queries}/queries.parquet")
    vectors = table.column("embedding").combine_chunks().flatten().to_numpy().reshape(-1, DIM)
    embedded = list(zip(table.column("query_id").to_pylist(), vectors, strict=True))
    judgments = pq.read_table(f"{queries}/judgments.parquet").to_pylist()
    corpus = SearcherSpec("ann", index).corpus_size()
    metrics = plan_cutoffs(parse_metrics(DEFAULT_METRICS), DEPTH, corpus).metrics
    shutil.rmtree(output, ignore_errors=True)
    Path(output).mkdir(parents=True)
    per_query_file = Path(output) / "per_query.json"
    pipeline = make_pipeline(PipelineOptions(shlex.split(flags)))
    joined = {
        "embedded": pipeline | "Queries" >> beam.Create(embedded),
        "judgments": pipeline | "Judgments" >> beam.Create(judgments),
    } | JoinJudgments()
    scored = joined | SCORERS[mode](index, DEPTH, metrics, RelevanceRule(), batch_size)
    _ = scored["run"] | WriteRun(f"{output}/run")
    _ = (
        scored["per_query"]
        | beam.combiners.ToList()
        | beam.Map(lambda rows: per_query_file.write_text(json.dumps(rows, default=float)))
    )
    started = time.perf_counter()
    pipeline.run().wait_until_finish()
    seconds = time.perf_counter() - started
    rows = json.loads(per_query_file.read_text())
    run_rows = sum(pq.read_metadata(p).num_rows for p in Path(output).glob("run-*.parquet"))
    means = {key: round(m.mean, 4) for key, m in aggregate(rows).items()}
    figures = dict(pipeline_seconds=round(seconds, 1), queries_scored=len(rows), run_rows=run_rows)
    return {**figures, "recall_at_10k": means.get("recall@10000"), "metrics": means}


# ---------------------------------------------------------------- the parent: a stage per subprocess
class TreeSampler(threading.Thread):
    """Peak RSS (VmHWM) of every process in the tree below `root`, and the tree's peak total RSS."""

    def __init__(self, root: int) -> None:
        super().__init__(daemon=True)
        self.root, self.done = root, threading.Event()
        self.peaks: dict[int, dict[str, Any]] = {}
        self.peak_total_mb = 0.0

    def run(self) -> None:
        while not self.done.wait(0.25):
            self.sample()

    def sample(self) -> None:
        tree, total = [self.root], 0.0
        for pid in tree:  # grows as children are found: /proc/PID/task/TID/children, of every thread
            try:
                for task in Path(f"/proc/{pid}/task").iterdir():
                    tree += [int(child) for child in (task / "children").read_text().split()]
                status = dict(
                    line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
                )
                command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()[:160]
            except (OSError, ValueError):
                continue
            hwm, rss = (int(status.get(k, "0 kB").split()[0]) / 1024 for k in ("VmHWM", "VmRSS"))
            total += rss
            seen = self.peaks.setdefault(pid, {"pid": pid, "command": command, "peak_rss_mb": 0.0})
            seen["peak_rss_mb"] = round(max(seen["peak_rss_mb"], hwm), 1)
        self.peak_total_mb = round(max(self.peak_total_mb, total), 1)


def run_child(stage: str, arguments: list[str], log: Path) -> dict[str, Any]:
    """One stage in a fresh interpreter: its result, wall seconds, and the peak RSS of each process."""
    command = [sys.executable, "-m", "bench.sharded_eval_bench", "--stage", stage, "--", *arguments]
    log.parent.mkdir(parents=True, exist_ok=True)
    print(f"  {stage}: {shlex.join(command[1:])} (log {log})", flush=True)
    started = time.perf_counter()
    with log.open("w") as handle:
        child = subprocess.Popen(command, stdout=handle, stderr=subprocess.STDOUT)
        sampler = TreeSampler(child.pid)
        sampler.start()
        code = child.wait()
        sampler.done.set()
    seconds = time.perf_counter() - started
    lines = log.read_text().splitlines()
    if code != 0:
        raise RuntimeError(f"stage {stage} failed ({code}); see {log}:\n" + "\n".join(lines[-40:]))
    tagged = {line.split()[1]: line.split(None, 2)[2] for line in lines if line.startswith(TAG)}
    own_mb = round(int(tagged["vmhwm_kb"]) / 1024, 1)
    processes = [{**p, "peak_rss_mb": own_mb} if p["pid"] == child.pid else p for p in sampler.peaks.values()]
    workers = [p for p in processes if p["pid"] != child.pid]
    return {
        "seconds": round(seconds, 1),
        "peak_rss_mb": own_mb,
        "worker_processes": workers,
        "peak_tree_rss_mb": max(sampler.peak_total_mb, own_mb),
        **json.loads(tagged["result"]),
    }


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def index_name(target_recall: float | None) -> str:
    """The index folder of a build: "index" at madr's default --target_recall, else index-target<t>."""
    return "index" if target_recall is None else f"index-target{target_recall:g}"


def evaluate(
    mode: str, size: int, index: str = "index", root: Path = ROOT, batch_size: int = 256, flags: str = ""
) -> dict[str, Any]:
    """Evaluation `mode` of the `size` catalog's `index` in its own subprocess: Recall@10k, time, every
    process's peak RSS."""
    folder, output = root / str(size), f"eval-{mode}" + ("" if index == "index" else f"-{index}")
    paths = [str(folder / name) for name in (index, "queries", output)]
    figures = run_child("evaluate", [mode, *paths, str(batch_size), flags], folder / f"{output}.log")
    return {"mode": mode, "beam_flags": flags, **figures}


def one_size(size: int, args: argparse.Namespace, old: dict[str, Any]) -> dict[str, Any]:
    folder, row = args.root / str(size), {**old, "last_command": args.command}
    if not all((folder / name / "manifest.json").is_file() for name in ("embeddings", "queries")):
        arguments = [str(folder), str(size), str(args.queries), str(args.seed)]
        row["data"] = run_child("data", arguments, folder / "data.log")
    row["data_paths"] = {"embeddings": str(folder / "embeddings"), "queries": str(folder / "queries")}
    row["embeddings_bytes"] = folder_bytes(folder / "embeddings")
    name = index_name(args.target_recall)
    index, entry = folder / name, dict(row.get("indexes", {}).get(name, {}))
    if "build" in args.steps:
        if (index / "manifest.json").is_file() and not args.rebuild:
            print(f"  build: {index} exists, kept (figures of the run that built it)", flush=True)
        else:
            shutil.rmtree(index, ignore_errors=True)
            arguments = [
                str(folder / "embeddings"),
                str(index),
                "" if args.target_recall is None else str(args.target_recall),
            ]
            entry["build"] = run_child("build", arguments, folder / f"build-{name}.log")
    entry.update(path=str(index), bytes=folder_bytes(index))
    if "open" in args.steps:
        entry["open_whole_index"] = run_child("open", [str(index)], folder / f"open-{name}.log")
    if "evaluate" in args.steps and size in args.eval_sizes:
        entry["evaluate"] = dict(entry.get("evaluate", {}))
        for mode in args.modes:
            entry["evaluate"][mode] = evaluate(mode, size, name, args.root, args.batch_size, args.eval_flags)
    row["indexes"] = {**row.get("indexes", {}), name: entry}
    print(f"  {size} {name}: {json.dumps(entry)[:2000]}", flush=True)
    return row


def extrapolate(per_size: dict[str, Any]) -> list[dict[str, Any]]:
    """The whole-index evaluation's peak at the largest size, from each evaluated index of a smaller size
    and the indexes' file sizes: an extrapolation; beside it, the largest index's measured `open` plus
    what searching added over `open` at the small size."""
    large = max(per_size, key=int)
    out = []
    for large_name, high in per_size[large].get("indexes", {}).items():
        for size, row in sorted(per_size.items()):
            for name, low in row.get("indexes", {}).items():
                if int(size) >= int(large) or "whole" not in low.get("evaluate", {}):
                    continue
                whole, opened = low["evaluate"]["whole"], low["open_whole_index"]
                base, ratio = opened["rss_before_mb"], high["bytes"] / low["bytes"]  # base: no index yet
                estimate = {
                    "from": f"{size} {name}",
                    "to": f"{large} {large_name}",
                    "bytes_ratio": round(ratio, 2),
                }
                estimate["peak_rss_mb"] = round(base + (whole["peak_rss_mb"] - base) * ratio, 1)
                if "open_whole_index" in high:
                    searching = whole["peak_rss_mb"] - opened["rss_after_corpus_ids_mb"]
                    estimate["measured_open_plus_small_search_mb"] = round(
                        high["open_whole_index"]["rss_after_corpus_ids_mb"] + searching, 1
                    )
                out.append(estimate)
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="1000000,10000000", help="Catalog sizes (%(default)s)")
    parser.add_argument("--eval_sizes", default="1000000", help="Sizes evaluated (%(default)s)")
    parser.add_argument("--modes", default="whole", help=f"Of {sorted(SCORERS)} (%(default)s)")
    parser.add_argument("--steps", default="build,open,evaluate", help="Of build,open,evaluate (%(default)s)")
    parser.add_argument("--queries", type=int, default=1_000, help="Queries (%(default)s)")
    parser.add_argument("--batch_size", type=int, default=256, help="Queries per search (%(default)s)")
    parser.add_argument("--eval_flags", default="", help="Beam flags of the evaluation, e.g. a runner")
    parser.add_argument("--seed", type=int, default=0, help="Generator seed (%(default)s)")
    parser.add_argument("--root", type=Path, default=ROOT, help="Data and index folders (%(default)s)")
    parser.add_argument("--target_recall", type=float, help="The build's (madr's default; 0: no tuning)")
    parser.add_argument("--rebuild", action="store_true", help="Build an index that exists again")
    parser.add_argument("--quick", action="store_true", help="20,000 vectors, 200 queries")
    parser.add_argument("--stage", help=argparse.SUPPRESS)
    args, rest = parser.parse_known_args(argv)
    if args.stage:
        from pipelines.stage_runs import peak_rss_mb

        rest = [a for a in rest if a != "--"] + [""] * 6
        stages: dict[str, Callable[[], dict[str, Any]]] = {
            "data": lambda: write_data(Path(rest[0]), int(rest[1]), int(rest[2]), int(rest[3])),
            "build": lambda: build_index(rest[0], rest[1], rest[2]),
            "open": lambda: open_whole(rest[0]),
            "evaluate": lambda: evaluate_stage(*rest[:4], int(rest[4]), rest[5]),
        }
        result = stages[args.stage]()
        print(f"{TAG} result {json.dumps(result, default=str)}", flush=True)
        print(f"{TAG} vmhwm_kb {round((peak_rss_mb() or -1) * 1024)}", flush=True)
        return result
    if args.quick:
        args.sizes = args.eval_sizes = "20000"
        args.queries = min(args.queries, 200)
    name = "sharded_eval_quick" if args.quick else "sharded_eval"
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    args.eval_sizes = {int(s) for s in args.eval_sizes.split(",") if s.strip()}
    args.modes = [m for m in args.modes.split(",") if m.strip()]
    args.steps = set(args.steps.split(","))
    args.command = command_line("bench.sharded_eval_bench", argv)
    config = {"command": args.command, "layout": f"{DIM} dims, {SHARDS} shards, depth {DEPTH}"}
    config.update(queries=args.queries, generator=GENERATOR, planted=PLANTED, **shared_machine_note())
    config["runner"] = "FnApiRunner in_memory (madr's local default) unless a row's beam_flags name another"
    print(f"sharded_eval_bench: {config}", flush=True)
    path = RESULTS / f"{name}.json"
    per_size = dict(json.loads(path.read_text())["figures"]["per_size"]) if path.is_file() else {}
    for size in sizes:
        per_size[str(size)] = one_size(size, args, per_size.get(str(size), {}))
    method = "base + (the whole-index evaluation's peak - base) x index bytes ratio; base: the open stage's "
    method += "RSS before opening (interpreter, imports). An extrapolation, not a run"
    figures = {"per_size": per_size, "whole_evaluation_extrapolated": extrapolate(per_size), "method": method}
    report(name, config, figures)
    return figures


if __name__ == "__main__":
    main()
