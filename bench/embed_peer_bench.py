"""`madr embed` against sentence-transformers, side by side: steady-state rate and the whole command.

The peer is what a user would write instead: a Python script that loads the same MiniLM with
sentence-transformers, sets the same token limit, encodes the same document texts and saves the
vectors. Both run as separate processes with the same thread count, one after the other, on a
small and a full slice of the same catalog:

- whole command: wall time of the full slice, start-up and writing included;
- steady state: (full - small) products / (full - small) seconds, which cancels start-up;
- start-up: small-slice time minus its products at the steady rate.

The catalog is the generator's (`madr generate`, the demo's seed) at the full slice's size, 10,000
products by default, as issue 49 measures. `madr embed` runs at fp32 (ONNX Runtime on a CPU,
`--runtime auto`) and every precision this CPU computes natively. Each precision, bf16 included, is
then scored against fp32 (`bench.precision_quality`): Recall@100, NDCG@10 and the held-out
Accuracy@1 of the values written, on the demo benchmark and on the store export (the demo's store
run and its adapted model).

    python -m bench.embed_peer_bench              # needs `make demo` (runs/demo)
    python -m bench.embed_peer_bench --quick      # 300 / 1,200 products, no store
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import torch

from bench.common import report, table
from bench.precision_quality import (
    MAX_LOSS_POINTS,
    change_points,
    embed_command,
    madr,
    precision_quality,
    timed,
    within_loss,
)
from bench.support import command_line
from model.backbone import bundled_backbone_path
from model.hardware import auto_precision, bf16_is_native, cpu_flags, has_vnni
from pipelines.layout import DatasetLayout

PEER_SCRIPT = """
import sys, numpy as np, pyarrow.parquet as pq, torch
from sentence_transformers import SentenceTransformer
from pipelines.inference import ModelIdentity
torch.set_num_threads(int(sys.argv[4]))
identity = ModelIdentity.of(sys.argv[2])
texts = [identity.text_of(p) for p in pq.read_table(sys.argv[1]).to_pylist()]
model = SentenceTransformer(sys.argv[3], device="cpu")
model.max_seq_length = identity.config.max_document_length
np.save(sys.argv[5], model.encode(texts, batch_size=32, convert_to_numpy=True))
"""


def demo_run(folder: str) -> Path:
    """A `madr demo` run folder (its model and catalog), or an exit that says how to make one."""
    run = Path(folder)
    if not (run / "model" / "config.json").is_file():
        raise SystemExit(f"{run}/model is missing: run `make demo` first, or pass --run RUN_FOLDER")
    return run


def cpu_summary() -> dict[str, Any]:
    """This CPU's vector units, whether it has VNNI, and what `--precision auto` picks on it."""
    flags = cpu_flags()
    vector_units = ("avx2", "avx512", "avx_vnni", "amx")
    return {
        "cpu_features": sorted(flag for flag in flags if flag.startswith(vector_units)),
        "vnni": has_vnni(flags),
        "auto": auto_precision(torch.device("cpu"), flags).as_json(),
    }


def rates(small: int, full: int, small_s: float, full_s: float) -> dict[str, float]:
    steady = (full - small) / (full_s - small_s)
    return {
        "whole_command_s": round(full_s, 2),
        "whole_command_products_per_s": round(full / full_s, 1),
        "steady_products_per_s": round(steady, 1),
        "startup_s": round(small_s - small / steady, 2),
    }


def _quality_text(label: str, quality: dict[str, Any]) -> str:
    """One dataset's precisions against fp32, as a sentence per precision."""
    fp32 = quality["fp32"]
    lines = [
        f"{label}: fp32 Recall@100 {fp32['recall@100']}, NDCG@10 {fp32['ndcg@10']}, held-out Accuracy@1"
        + (f" ({fp32['held_out_products']} products)" if "held_out_products" in fp32 else "")
        + " "
        + "; ".join(f"{aspect} {value}" for aspect, value in fp32["held_out_accuracy@1"].items())
        + "."
    ]
    for precision in (name for name, row in quality.items() if isinstance(row, dict) and name != "fp32"):
        row = quality[precision]
        change = {metric: change_points(quality, precision, metric) for metric in ("recall@100", "ndcg@10")}
        lines.append(
            f"{precision}: Recall@100 {row['recall@100']} (Δ {change['recall@100']} points), NDCG@10 "
            f"{row['ndcg@10']} (Δ {change['ndcg@10']} points), held-out Accuracy@1 "
            + "; ".join(f"{aspect} {value}" for aspect, value in row["held_out_accuracy@1"].items())
            + "."
        )
    return " ".join(lines)


def embed_peer_section(r: dict[str, Any]) -> str:
    """The PERFORMANCE.md section of a results file of this benchmark."""
    f, c = r["figures"], r["config"]
    rows = [
        [
            name,
            v["steady_products_per_s"],
            v.get("steady_vs_sentence_transformers", 1.0),
            v["whole_command_s"],
            v.get("whole_vs_sentence_transformers", 1.0),
            v["startup_s"],
        ]
        for name, v in f.items()
        if name.startswith(("madr_", "sentence_transformers"))
    ]
    text = table(
        [
            "contender",
            "steady products/s",
            "steady vs ST",
            f"whole command s ({c['products']['full']})",
            "whole vs ST",
            "start-up s",
        ],
        rows,
    )
    quality = f.get("retrieval_quality")
    if quality:
        text += "\n\n" + _quality_text(
            "Demo benchmark, test queries (exact search, queries encoded at the same precision)", quality
        )
    store = f.get("store_quality")
    if store:
        text += "\n\n" + _quality_text(
            f"Store export ({c.get('store', 'the store run')}, adapted model)", store
        )
    machine = f.get("machine")
    if machine:
        text += (
            f"\n\nCPU features: {', '.join(machine['cpu_features']) or 'none known'}; VNNI: "
            f"{'yes' if machine['vnni'] else 'no'}. `--precision auto` picks {machine['auto']['precision']} "
            f"here: {machine['auto']['reason']}."
        )
    catalog = c.get("catalog", f"{c['run']}/data")
    text += (
        f"\n\nCatalog: {catalog}. Same model ({c['run']}/model), texts, {c['threads']} threads and token "
        "limit; each contender a separate process; steady state from the difference of two catalog slices, "
        "which cancels start-up."
    )
    return text + (f" {c['note']}" if c.get("note") else "")


def embed_peer_verdicts(r: dict[str, Any] | None) -> list[tuple[str, str, str, bool | None]]:
    """(key, target, measured, met) rows of the targets this benchmark checks."""
    whole_target = "embed fp32 ≥ 1.2× sentence-transformers for the whole command, 10,000 products"
    int8_target = "embed int8 ≥ 1.5× fp32, Recall@100 and NDCG@10 within 0.5 points"
    auto_target = "--precision auto's pick within 0.5 points of fp32 (R@100, NDCG@10), benchmark and store"
    if r is None:
        return [
            ("embed", whole_target, "—", None),
            ("int8", int8_target, "—", None),
            ("auto", auto_target, "—", None),
        ]
    f, c = r["figures"], r["config"]
    fp32, int8 = f["madr_fp32"], f["madr_int8"]
    quality, store = f.get("retrieval_quality"), f.get("store_quality")
    delta = change_points(quality, "int8", "recall@100") if quality else None
    ndcg = change_points(quality, "int8", "ndcg@10") if quality else None
    verdicts = [
        (
            "embed",
            whole_target,
            f"whole command {fp32['whole_vs_sentence_transformers']}× on {c['products']['full']:,} products, "
            f"steady {fp32['steady_vs_sentence_transformers']}×, start-up {fp32['startup_s']} s",
            fp32["whole_vs_sentence_transformers"] >= 1.2 and c["products"]["full"] >= 10_000,
        ),
        (
            "int8",
            int8_target,
            f"{int8['steady_vs_madr_fp32']}× steady, Δ Recall@100 {delta} points, Δ NDCG@10 {ndcg} points",
            None
            if delta is None or ndcg is None
            else int8["steady_vs_madr_fp32"] >= 1.5 and abs(delta) <= 0.5 and abs(ndcg) <= 0.5,
        ),
    ]
    machine = f.get("machine")
    if machine and quality and store:
        picked = machine["auto"]["precision"]
        met = within_loss(quality, picked) and within_loss(store, picked)
        verdicts.append(("auto", auto_target, f"picks {picked} here ({machine['auto']['reason']})", met))
    else:
        verdicts.append(("auto", auto_target, "—", None))
    return verdicts


def timing_catalog(run: Path, size: int, work: Path, threads: int) -> tuple[Path, str]:
    """A catalog of at least `size` products and what it is: the demo's own when it is big enough, else the
    generator's at that size with the demo's seed, written by `madr generate` into `work`."""
    if pq.read_metadata(next((run / "data" / "products").glob("*.parquet"))).num_rows >= size:
        return run / "data" / "products", f"{run}/data"
    folder = work / f"catalog-{size}"
    if not (folder / "products").is_dir():
        timed(madr("generate", "--output", str(folder), "--num_products", str(size)), threads)
    return folder / "products", f"`madr generate --num_products {size}` (seed 13, the demo's generator)"


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--run", default="runs/demo", help="A `madr demo` run folder (default: %(default)s)")
    parser.add_argument("--small", type=int, default=2000, help="Products of the small slice (%(default)s)")
    parser.add_argument("--full", type=int, default=10_000, help="Products of the full slice (%(default)s)")
    parser.add_argument("--threads", type=int, default=2, help="Threads of every process (%(default)s)")
    parser.add_argument(
        "--repeats",
        type=int,
        default=2,
        help="Runs of each contender and slice; the fastest counts (%(default)s)",
    )
    parser.add_argument(
        "--quick", action="store_true", help="300 / 1,200 products, no store; saved as embed_peer_quick"
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.small, args.full, args.repeats = 300, 1200, 1
    run = demo_run(args.run)
    store = run / "store"
    load_at_start = round(os.getloadavg()[0], 2)
    figures: dict[str, Any] = {}
    # Every precision this machine computes natively, beside fp32; and what `--precision auto` picks here.
    precisions = ["fp32", "int8"] + (["bf16"] if bf16_is_native(torch.device("cpu")) else [])
    machine = cpu_summary()
    print(f"CPU features: {', '.join(machine['cpu_features']) or 'none known'}; auto picks {machine['auto']}")
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        os.environ["MADR_CACHE"] = str(root / "cache")  # the first int8/fp32 export is part of start-up
        products, catalog_name = timing_catalog(run, args.full, Path("runs/bench-embed-peer"), args.threads)
        catalog = pq.read_table(str(products)).slice(0, args.full)
        slices = {}
        for name, size in (("small", args.small), ("full", args.full)):
            slices[name] = root / f"{name}.parquet"
            pq.write_table(catalog.slice(0, size), str(slices[name]))
        print(f"timing on {catalog_name}: {args.small:,} and {args.full:,} products")
        figures.update(timed_contenders(run, slices, precisions, args, root))
        # Every precision is scored, bf16 too where it is emulated (not timed: slower than fp32 here):
        # `--precision auto` picks bf16 on GPUs and bf16 CPUs, and a precision is picked only when its
        # quality is measured.
        scored_precisions = [*precisions, *(["bf16"] if "bf16" not in precisions else [])]
        judged = {"retrieval_quality": (run / "data", run / "model")}
        if not args.quick and (store / "adapted" / "config.json").is_file():
            judged["store_quality"] = (store / "data", store / "adapted")
        for key, (data, model) in judged.items():
            layout = DatasetLayout(str(data))
            figures[key] = precision_quality(layout, model, scored_precisions, root / key, args.threads)
        figures["machine"] = machine
    for key, target, measured, met in embed_peer_verdicts(
        {"figures": figures, "config": {"products": {"full": args.full}}}
    ):
        print(f"{key}: {target}: {measured} -> {'met' if met else 'not met' if met is not None else '—'}")
    return {
        "path": str(
            report(
                "embed_peer_quick" if args.quick else "embed_peer",
                {
                    "command": command_line("bench.embed_peer_bench", argv),
                    **vars(args),
                    "products": {"small": args.small, "full": args.full},
                    "catalog": catalog_name,
                    "store": f"{store}/data, {store}/adapted",
                    "max_loss_points": MAX_LOSS_POINTS,
                    "peer": "sentence-transformers SentenceTransformer(bundled MiniLM).encode(batch_size=32)",
                    "load_average_1min_at_start": load_at_start,
                },
                figures,
            )
        )
    }


def timed_contenders(
    run: Path, slices: dict[str, Path], precisions: list[str], args: argparse.Namespace, root: Path
) -> dict[str, Any]:
    """Each contender's rates on the two slices, interleaved, and madr's ratios to the peer."""
    seconds: dict[str, dict[str, float]] = {}

    def record(contender: str, name: str, elapsed: float) -> None:
        times = seconds.setdefault(contender, {})
        times[name] = min(elapsed, times.get(name, elapsed))

    peer_command = [sys.executable, "-c", PEER_SCRIPT, "", str(run / "model"), str(bundled_backbone_path())]
    for name in [size for _ in range(args.repeats) for size in ("small", "full")]:
        # Interleaved, so a change in the machine's load hits every contender alike; the fastest of
        # the repeats counts, the run least disturbed by other work on the machine.
        peer_command[3] = str(slices[name])
        peer_output = str(root / f"peer-{name}.npy")
        record(
            "sentence_transformers",
            name,
            timed([*peer_command, str(args.threads), peer_output], args.threads),
        )
        for precision in precisions:
            # Every run exports (and quantises) the model afresh: start-up as on a new worker.
            shutil.rmtree(root / "cache", ignore_errors=True)
            output = root / f"{precision}-{name}"
            command = embed_command(slices[name], run / "model", precision, output, args.threads)
            record(f"madr_{precision}", name, timed(command, args.threads))
    figures = {
        contender: rates(args.small, args.full, t["small"], t["full"]) for contender, t in seconds.items()
    }
    peer = figures["sentence_transformers"]
    for precision in precisions:
        mine = figures[f"madr_{precision}"]
        mine["steady_vs_sentence_transformers"] = round(
            mine["steady_products_per_s"] / peer["steady_products_per_s"], 3
        )
        mine["whole_vs_sentence_transformers"] = round(peer["whole_command_s"] / mine["whole_command_s"], 3)
        if precision != "fp32":
            mine["steady_vs_madr_fp32"] = round(
                mine["steady_products_per_s"] / figures["madr_fp32"]["steady_products_per_s"], 3
            )
    return figures


if __name__ == "__main__":
    main()
