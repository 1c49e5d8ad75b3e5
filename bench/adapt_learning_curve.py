"""What `madr adapt`'s step budget costs: the same catalog adapted at several budgets (issue 65).

`madr adapt` trains on as many products as `--step_budget` steps need (300 steps: about 9,600 products),
drawn across the catalog's categories and brands, so a 100,000-product catalog trains in minutes, not
hours. This benchmark shows what that sample costs: `madr adapt` as a user types it, once per budget
(`--step_budget N` trains on about 32·N products; 0 trains on every product), each evaluated by the
command itself on the catalog's judged test queries (retrieval over `--evaluation_products`, the same
sample every run, against the backbone used zero-shot and BM25 + zero-shot) and on its held-out
products (aspect Acc@1). Each budget's NDCG@10 and Recall@100 are compared with the largest budget's,
query by query (paired t-test), and its Acc@1 with the largest's.

    python -m bench.adapt_learning_curve --data runs/adapt100k/data --budgets 31,156,300,625,0 \
        --tag generator_100k
    python -m bench.adapt_learning_curve --store second_store --budgets 31,0 --tag second_store

A budget whose run finished is read back, not run again (`--fresh` runs it again): from its folder under
`--output`, else from the committed result files of the same `--tag`, so one more budget (say `0`, every
product) can join a curve measured on another day, and every run is compared with the new reference.
Saves bench/results/adapt_learning_curve_<tag>.json and the per-query rows of every run and system
(bench/results/adapt_learning_curve_<tag>.parquet), so each figure can be recomputed.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from bench.common import RESULTS, report
from bench.precision_quality import madr
from bench.store_bench import METRICS, per_query_rows, store_folder, system_means
from evaluation.significance import paired_t_test
from product_data.ingest.export_folder import ingest_export_folder


def _budget_label(budget: int) -> str:
    return "all" if budget == 0 else str(budget)


def _adapt(data: str, folder: Path, budget: int, seed: int) -> dict[str, Any]:
    """`madr adapt` at `budget` into `folder`, as typed; its wall time, steps, sample and Acc@1."""
    command = madr("adapt", "--data", data, "--output", str(folder / "model"), "--overwrite")
    command += ["--step_budget", str(budget), "--seed", str(seed)]
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    (folder / "adapt.log").write_text(done.stdout + done.stderr)
    if done.returncode:
        raise RuntimeError(f"{' '.join(command)} failed (rc {done.returncode}):\n{done.stderr[-3000:]}")
    manifest = json.loads((folder / "model" / "manifest.json").read_text())
    return {
        "command_wall_s": round(seconds, 1),
        "steps": manifest["steps"],
        "pseudo_queries": manifest["pseudo_queries"],
        "held_out_accuracy@1": manifest["held_out_accuracy"]["accuracy"],
    }


_RUN_FIELDS = ("command_wall_s", "steps", "pseudo_queries", "held_out_accuracy@1")


def _committed(tag: str) -> tuple[dict[str, dict[str, Any]], pa.Table | None]:
    """The runs and per-query rows of `tag`'s committed result files, when there are both."""
    summary = RESULTS / f"adapt_learning_curve_{tag}.json"
    rows = RESULTS / f"adapt_learning_curve_{tag}.parquet"
    if not (summary.is_file() and rows.is_file()):
        return {}, None
    runs = json.loads(summary.read_text())["figures"]["runs"]
    return {label: {f: run[f] for f in _RUN_FIELDS} for label, run in runs.items()}, pq.read_table(rows)


def _against(rows: pa.Table, run: str, reference: str, metric: str) -> dict[str, float]:
    """`run` − `reference` on `metric`, query by query, for the adapted model: mean and paired p."""

    def scores(label: str) -> dict[str, float]:
        chosen = rows.filter(pc.and_(pc.equal(rows["run"], label), pc.equal(rows["system"], "model")))
        return dict(zip(chosen["query_id"].to_pylist(), chosen[metric].to_pylist(), strict=True))

    mine, theirs = scores(run), scores(reference)
    common = sorted(set(mine) & set(theirs))
    a, b = [mine[q] for q in common], [theirs[q] for q in common]
    return {
        "delta": round(sum(a) / len(a) - sum(b) / len(b), 4),
        "p": paired_t_test(a, b).pvalue,
        "queries": len(common),
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--data", help="A dataset folder with judged test queries (madr generate or ingest)")
    where.add_argument("--store", help="A store of bench.store_bench (store_export, second_store)")
    parser.add_argument("--budgets", default="31,156,300,625", help="Step budgets, 0 = every product")
    parser.add_argument("--seed", type=int, default=13, help="Adapt's training seed (%(default)s)")
    parser.add_argument("--store_seed", type=int, default=7, help="Seed of the second store's script")
    parser.add_argument("--tag", required=True, help="Suffix of the result files")
    parser.add_argument("--output", default="runs/bench-curve", help="Work folder (%(default)s)")
    parser.add_argument("--fresh", action="store_true", help="Run every budget again, even one already run")
    args = parser.parse_args(argv)
    budgets = [int(b) for b in args.budgets.split(",") if b.strip()]
    root = Path(args.output) / args.tag
    data = args.data
    if args.store:
        data = str(root / "data")
        if not (Path(data) / "manifest.json").is_file():
            ingest_export_folder(store_folder(args.store, root, args.store_seed), data, overwrite=True)
    committed_runs, committed_rows = _committed(args.tag) if not args.fresh else ({}, None)
    runs: dict[str, dict[str, Any]] = {}
    tables = []
    for budget in budgets:
        label = _budget_label(budget)
        folder = root / f"budget-{label}"
        done = folder / "run.json"  # resumable: a budget already run is read back, not run again
        if label in committed_runs and committed_rows is not None and not done.is_file():
            runs[label] = committed_runs[label]
            rows = committed_rows.filter(pc.equal(committed_rows["run"], label))
            tables.append(rows)
            print(f"budget {label}: read back from the committed result files", flush=True)
        else:
            folder.mkdir(parents=True, exist_ok=True)
            if done.is_file() and not args.fresh:
                runs[label] = json.loads(done.read_text())
            else:
                runs[label] = _adapt(data, folder, budget, args.seed)
                done.write_text(json.dumps(runs[label]))
            rows = per_query_rows(folder / "model-evaluation" / "adapted" / "eval")
            rows = rows.append_column("run", pa.array([label] * rows.num_rows))
            tables.append(rows)
        for system in ("model", "zero-shot", "bm25+zero-shot"):
            runs[label][system] = system_means(rows, system)
        print(f"budget {label}: {json.dumps(runs[label])}", flush=True)
    every = pa.concat_tables(tables)
    # The reference: every product when that run is here, else the largest budget.
    reference = "all" if 0 in budgets else _budget_label(max(budgets))
    for label in runs:
        if label != reference:
            runs[label]["model - reference"] = {m: _against(every, label, reference, m) for m in METRICS}
    RESULTS.mkdir(parents=True, exist_ok=True)
    pq.write_table(every, RESULTS / f"adapt_learning_curve_{args.tag}.parquet", compression="zstd")
    config = {
        "data": args.store or args.data,
        "budgets": budgets,
        "seed": args.seed,
        "reference": reference,
        "products_per_step": "32 (adapt's batch of 32 pseudo-queries, one per product)",
    }
    report(f"adapt_learning_curve_{args.tag}", config, {"runs": runs})
    return runs


if __name__ == "__main__":
    main()
