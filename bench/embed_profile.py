"""Where `madr embed` spends its time, part by part, beside sentence-transformers' `encode`.

Each contender runs as its own process under py-spy (a sampling profiler: 100 samples a second, no
instrumentation, so Python-heavy parts are not inflated as under cProfile), over the same demo
catalog, with the same thread count. Every sample is put in one part, by the first marker its stack
holds, reading from the innermost frame outwards:

- `madr embed`: imports, model load (weights, ONNX graph, probe), pipeline construction, read
  (Parquet row groups to records), validate, plan (hashes and duplicates), tokenize, encode (the
  runtime's forward pass), annotations (aspect heads and the abstention rule), write (Parquet), and
  the rest (Beam's runner, batching, counters);
- sentence-transformers: imports, model load, read (the same Parquet and texts), tokenize, encode, rest.

Seconds per part and microseconds per product; the fixed start-up is imports + model load +
construction. `--precisions` lists what `madr embed` runs at (each precision this machine computes
natively by default; `auto` is what the command picks unasked).

    python -m bench.embed_profile              # needs `make demo` (runs/demo)
    python -m bench.embed_profile --quick      # 600 products
"""

from __future__ import annotations

import argparse
import collections
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import torch

from bench.common import report, table
from bench.embed_peer_bench import PEER_SCRIPT, cpu_summary, demo_run
from bench.precision_quality import embed_command
from bench.support import command_line
from model.backbone import bundled_backbone_path
from model.hardware import bf16_is_native

# (part, markers): a frame whose function is a marker (or whose file is, for markers naming a .py file)
# puts the sample in the part. Inner parts first: a frame deep in `encode` is encode even though
# `run_inference` is above it.
MADR_PARTS: list[tuple[str, tuple[str, ...]]] = [
    ("imports", ("_find_and_load",)),
    ("model load", ("EncoderModelHandler.load_model", "verify_model")),
    ("encode", ("OnnxRuntimeEncoder.__call__", "TextEncoder.forward")),
    ("tokenize", ("tokenize",)),
    ("annotations", ("annotate", "ColumnAnnotator.__call__", "_merged")),
    ("validate", ("validate_product",)),
    ("read", ("read_row_group", "batch_records")),
    ("plan", ("_PlanFn.plan", "dedupe.py", "key_index.py")),
    ("write", ("parquet_shards.py", "ParquetWriter.write_table", "_ToEmbeddingTable.process")),
    ("construction", ("build_embed_pipeline",)),
]
PEER_PARTS: list[tuple[str, tuple[str, ...]]] = [
    ("imports", ("_find_and_load",)),
    ("model load", ("SentenceTransformer.__init__",)),
    ("encode", ("Module._call_impl", "Module._wrapped_call_impl")),
    ("tokenize", ("tokenize", "preprocess")),  # sentence-transformers 6 tokenises in `preprocess`
    ("read", ("read_table", "ModelIdentity.text_of", "Table.to_pylist")),
]
STARTUP = ("imports", "model load", "construction")


def _marks(frame: str, marker: str) -> bool:
    # py-spy's raw frames read "Class.function (/path/file.py:line)"; a bare function name marks it in
    # any class ("tokenize": DenseEncoder.tokenize, MuralEncoder.tokenize, ...).
    if marker.endswith(".py"):
        return marker in frame
    name = frame.partition(" (")[0]
    return name == marker or name.endswith(f".{marker}")


def classify(stack: str, parts: list[tuple[str, tuple[str, ...]]]) -> str:
    frames = stack.split(";")
    for part, markers in parts:
        if any(_marks(frame, marker) for frame in frames for marker in markers):
            return part
    return "rest"


def profiled(command: list[str], threads: int, rate: int, out: Path) -> tuple[str, float]:
    """The main thread's stacks of `command` under py-spy (a line per stack and its sample count), and the
    command's wall seconds. Beam's and ONNX Runtime's helper threads mostly wait; their samples would
    count the same second twice."""
    environment = {**os.environ, "OMP_NUM_THREADS": str(threads), "HF_HUB_OFFLINE": "1"}
    spy = [
        "py-spy",
        "record",
        "--threads",
        "--rate",
        str(rate),
        "--format",
        "raw",
        "--output",
        str(out),
        "--",
    ]
    started = time.perf_counter()
    done = subprocess.run([*spy, *command], env=environment, capture_output=True, text=True)
    wall = time.perf_counter() - started
    if done.returncode:
        raise RuntimeError(f"{' '.join(command)} failed under py-spy:\n{done.stderr[-3000:]}")
    per_thread: collections.Counter[str] = collections.Counter()
    lines = []
    for line in out.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        thread, _, rest = stack.partition(";")
        thread_id = thread.partition(")")[0]  # "thread (1234" whether or not a name follows
        per_thread[thread_id] += int(count)
        lines.append((thread_id, rest, count))
    main_thread = per_thread.most_common(1)[0][0]
    return "\n".join(f"{rest} {count}" for thread_id, rest, count in lines if thread_id == main_thread), wall


def seconds_by_part(raw: str, parts: list[tuple[str, tuple[str, ...]]], rate: int) -> dict[str, float]:
    counts: collections.Counter[str] = collections.Counter()
    for line in raw.splitlines():
        stack, _, count = line.rpartition(" ")
        if stack:
            counts[classify(stack, parts)] += int(count)
    names = [part for part, _ in parts] + ["rest"]
    return {name: round(counts[name] / rate, 2) for name in names}


def per_product(seconds: dict[str, float], products: int, wall: float) -> dict[str, Any]:
    startup = sum(seconds.get(part, 0.0) for part in STARTUP)
    steady = {part: value for part, value in seconds.items() if part not in STARTUP}
    return {
        "seconds": seconds,
        "wall_s": round(wall, 2),
        "total_s": round(sum(seconds.values()), 2),
        "startup_s": round(startup, 2),
        "us_per_product": {part: round(1e6 * value / products) for part, value in steady.items()},
        "steady_us_per_product": round(1e6 * sum(steady.values()) / products),
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--run", default="runs/demo", help="A `madr demo` run folder (default: %(default)s)")
    parser.add_argument("--products", type=int, default=3000, help="Products embedded (%(default)s)")
    parser.add_argument("--threads", type=int, default=2, help="Threads of every process (%(default)s)")
    parser.add_argument("--rate", type=int, default=100, help="py-spy samples a second (%(default)s)")
    parser.add_argument(
        "--precisions", default="", help="madr's precisions (default: fp32, int8, auto, bf16 if native)"
    )
    parser.add_argument("--quick", action="store_true", help="600 products; saved as embed_profile_quick")
    args = parser.parse_args(argv)
    if args.quick:
        args.products = 600
    run = demo_run(args.run)
    precisions = args.precisions.split(",") if args.precisions else ["fp32", "int8", "auto"]
    if not args.precisions and bf16_is_native(torch.device("cpu")):
        precisions.append("bf16")
    summary = cpu_summary()
    figures: dict[str, Any] = {"cpu_features": summary["cpu_features"], "auto": summary["auto"]}
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        os.environ["MADR_CACHE"] = str(root / "cache")
        catalog = pq.read_table(str(run / "data" / "products"))
        products = min(args.products, catalog.num_rows)
        slice_path = root / "products.parquet"
        pq.write_table(catalog.slice(0, products), str(slice_path))
        for precision in precisions:
            output = root / f"out-{precision}"
            command = embed_command(slice_path, run / "model", precision, output, args.threads)
            # Run once first: the ONNX export (a first run's cost, cached after) is not the profile's subject.
            subprocess.run(command, check=True)
            raw, wall = profiled(command, args.threads, args.rate, root / f"{precision}.txt")
            parts = seconds_by_part(raw, MADR_PARTS, args.rate)
            figures[f"madr_{precision}"] = per_product(parts, products, wall)
        peer = [
            sys.executable,
            "-c",
            PEER_SCRIPT,
            str(slice_path),
            str(run / "model"),
            str(bundled_backbone_path()),
        ]
        peer_command = [*peer, str(args.threads), str(root / "peer.npy")]
        raw, wall = profiled(peer_command, args.threads, args.rate, root / "peer.txt")
        figures["sentence_transformers"] = per_product(
            seconds_by_part(raw, PEER_PARTS, args.rate), products, wall
        )
    config = {
        "command": command_line("bench.embed_profile", argv),
        **vars(args),
        "products": products,
        "peer": "sentence-transformers SentenceTransformer(bundled MiniLM).encode(batch_size=32)",
    }
    return {"path": str(report("embed_profile_quick" if args.quick else "embed_profile", config, figures))}


def embed_profile_section(r: dict[str, Any]) -> str:
    """The PERFORMANCE.md section of a results file of this benchmark."""
    f, c = r["figures"], r["config"]
    contenders = [name for name in f if name.startswith(("madr_", "sentence_"))]
    parts = [part for part, _ in MADR_PARTS if part not in STARTUP] + ["rest"]
    rows = [[part] + [f[name]["us_per_product"].get(part) for name in contenders] for part in parts]
    rows.append(["steady, all parts"] + [f[name]["steady_us_per_product"] for name in contenders])
    rows.append(
        ["start-up s (imports + load + construction)"] + [f[name]["startup_s"] for name in contenders]
    )
    rows.append(["main thread's sampled s"] + [f[name]["total_s"] for name in contenders])
    rows.append(["whole command s, wall (under py-spy)"] + [f[name]["wall_s"] for name in contenders])
    text = table(["µs per product", *contenders], rows)
    return text + (
        f"\n\n{c['products']:,} demo products, {c['threads']} threads, py-spy at {c['rate']} samples/s, each "
        f"contender its own process (a first run of each madr precision exported its ONNX graph, untimed). "
        f"CPU features: {', '.join(f['cpu_features']) or 'none known'}; `--precision auto` picks "
        f"{f['auto']['precision']} here ({f['auto']['reason']}). A dash: no such part (sentence-transformers "
        "neither validates, plans, annotates nor writes Parquet)."
    )


if __name__ == "__main__":
    main()
