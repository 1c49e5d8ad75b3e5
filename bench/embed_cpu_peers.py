"""`madr embed` against sentence-transformers on this CPU: its torch `encode`, and its ONNX Runtime backend
at fp32 and O3-optimised, the peer a user would switch to first (issue 64, Must have 4).

Every contender is its own process over the same texts (what madr's model reads of each product), the same
token limit and threads, one after another in one run, on a small and a full slice of one generated
catalog: the whole command's wall time on the full slice, and the steady rate (full - small) / (full_s -
small_s), which cancels start-up (`bench.embed_peer_bench.rates`). The peers encode with the bundled
MiniLM's sentence-transformers folder at their default batch of 32; madr at its defaults (fp32, ONNX
Runtime on a CPU), with the demo model, or, without one, an MtBERT on the same MiniLM weights with untrained
aspect heads (the same computation: speed does not depend on the heads' values).

sentence-transformers' ONNX backend needs optimum, whose releases pin transformers < 4.58 while madr runs
transformers 5: the peers run from their own environment, named by --peer_python and made once with

    python -m venv runs/peer-env
    runs/peer-env/bin/pip install torch==2.13.0 'sentence-transformers[onnx]' pyarrow

Each peer's ONNX graph is exported before timing (as madr's is, into its cache): a first run's cost.

    python -m bench.embed_cpu_peers --peer_python runs/peer-env/bin/python            # 2,000 / 10,000
    python -m bench.embed_cpu_peers --peer_python runs/peer-env/bin/python --quick    # 300 / 1,200
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import tempfile
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import torch

from bench.claim_words import timing_met
from bench.common import report, table
from bench.embed_peer_bench import rates
from bench.embed_stage_cost import catalog_model
from bench.precision_quality import madr, timed
from bench.support import command_line
from model.backbone import bundled_backbone_path
from model.hardware import auto_precision
from pipelines.inference import ModelIdentity
from product_data.synthetic import SyntheticConfig, generate_benchmark

PEERS = ("torch", "onnx", "onnx_O3")
# fp32 is the target's; auto is what the command picks unasked on this CPU (bf16 where it is native).
MADR_PRECISIONS = ("fp32", "auto")
PEER_SCRIPT = """
import sys, numpy as np, pyarrow.parquet as pq, torch
from sentence_transformers import SentenceTransformer
texts, folder, backend, max_length, threads, output = sys.argv[1:7]
torch.set_num_threads(int(threads))
texts = pq.read_table(texts).column("text").to_pylist()
kwargs = {"backend": "onnx"} if backend.startswith("onnx") else {}
if backend == "onnx_O3":
    kwargs["model_kwargs"] = {"file_name": "onnx/model_O3.onnx"}
model = SentenceTransformer(folder, device="cpu", **kwargs)
model.max_seq_length = int(max_length)
np.save(output, model.encode(texts, batch_size=32, convert_to_numpy=True))
"""
EXPORT_SCRIPT = """
import sys, json
from importlib.metadata import version
from sentence_transformers import SentenceTransformer, export_optimized_onnx_model
folder = sys.argv[1]
model = SentenceTransformer(folder, device="cpu", backend="onnx")
model.save_pretrained(folder)
export_optimized_onnx_model(model, "O3", folder)
names = ("sentence-transformers", "optimum", "optimum-onnx", "onnxruntime", "transformers", "torch")
print(json.dumps({name: version(name) for name in names}))
"""


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--peer_python", required=True, help="Python of the peers' environment (see above)")
    parser.add_argument(
        "--model", default="runs/demo/model", help="madr's model; made if missing (%(default)s)"
    )
    parser.add_argument("--small", type=int, default=2000, help="Products of the small slice (%(default)s)")
    parser.add_argument("--full", type=int, default=10_000, help="Products of the full slice (%(default)s)")
    parser.add_argument("--threads", type=int, default=2, help="Threads of every process (%(default)s)")
    parser.add_argument("--quick", action="store_true", help="300 / 1,200 products; saved as _quick")
    args = parser.parse_args(argv)
    if args.quick:
        args.small, args.full = 300, 1200
    figures: dict[str, Any] = {"load_at_start": round(os.getloadavg()[0], 2)}
    with tempfile.TemporaryDirectory() as scratch_name:
        scratch = Path(scratch_name)
        os.environ["MADR_CACHE"] = str(scratch / "cache")
        generate_benchmark(SyntheticConfig(num_products=args.full, num_queries=20), str(scratch / "data"))
        catalog = pq.read_table(str(scratch / "data" / "products")).slice(0, args.full)
        pq.write_table(catalog, str(scratch / "catalog.parquet"))
        model = Path(args.model)
        made = not (model / "config.json").is_file()
        if made:
            model = catalog_model(scratch / "model", scratch / "catalog.parquet")
        identity = ModelIdentity.of(str(model))
        texts = [identity.text_of(product) for product in catalog.to_pylist()]
        sizes = {"small": args.small, "full": args.full}
        for name, size in sizes.items():
            pq.write_table(catalog.slice(0, size), str(scratch / f"{name}.parquet"))
            pq.write_table(pa.table({"text": texts[:size]}), str(scratch / f"{name}-texts.parquet"))
        peer_model = Path(shutil.copytree(bundled_backbone_path(), scratch / "peer-model"))
        exported = subprocess.run(
            [args.peer_python, "-c", EXPORT_SCRIPT, str(peer_model)],
            check=True,
            capture_output=True,
            text=True,
        )
        versions = json.loads(exported.stdout.strip().splitlines()[-1])

        def embed(precision: str, name: str) -> list[str]:
            flags = ["--products", str(scratch / f"{name}.parquet"), "--model", str(model)]
            flags += ["--precision", precision, "--output", str(scratch / f"madr-{precision}-{name}")]
            return madr("embed", *flags, "--overwrite")

        def peer(backend: str, name: str) -> list[str]:
            paths = (
                scratch / f"{name}-texts.parquet",
                peer_model,
                backend,
                identity.config.max_document_length,
            )
            output = scratch / f"peer-{backend}-{name}.npy"
            return [args.peer_python, "-c", PEER_SCRIPT, *map(str, paths), str(args.threads), str(output)]

        for precision in MADR_PRECISIONS:  # each one's ONNX graph exported into the cache: untimed
            timed(embed(precision, "small"), args.threads)
        contenders = {f"madr_{p}": (lambda name, p=p: embed(p, name)) for p in MADR_PRECISIONS} | {
            f"sentence_transformers_{backend}": (lambda name, b=backend: peer(b, name)) for backend in PEERS
        }
        for contender, command in contenders.items():
            seconds = {name: timed(command(name), args.threads) for name in sizes}
            figures[contender] = rates(args.small, args.full, seconds["small"], seconds["full"])
            print(f"{contender}: {figures[contender]}", flush=True)
    for precision in MADR_PRECISIONS:
        mine = figures[f"madr_{precision}"]
        for backend in PEERS:
            peer_figures = figures[f"sentence_transformers_{backend}"]
            mine[f"whole_vs_{backend}"] = round(peer_figures["whole_command_s"] / mine["whole_command_s"], 3)
            mine[f"steady_vs_{backend}"] = round(
                mine["steady_products_per_s"] / peer_figures["steady_products_per_s"], 3
            )
    figures["auto_picks"] = auto_precision(torch.device("cpu")).as_json()
    config = {
        "command": command_line("bench.embed_cpu_peers", argv),
        **vars(args),
        "model": "MtBERT on the bundled MiniLM, untrained heads" if made else args.model,
        "max_length": identity.config.max_document_length,
        "peer_versions": versions,
        "madr_versions": {
            name: version(name) for name in ("onnxruntime", "transformers", "tokenizers", "torch")
        },
        "peer": "SentenceTransformer(bundled MiniLM[, backend='onnx'[, O3 file]]).encode(batch_size=32)",
    }
    return {"path": str(report("embed_cpu_peers" + ("_quick" if args.quick else ""), config, figures))}


def embed_cpu_peers_section(r: dict[str, Any]) -> str:
    """The PERFORMANCE.md table of a results file of this benchmark."""
    f, c = r["figures"], r["config"]
    names = [f"madr_{p}" for p in MADR_PRECISIONS] + [f"sentence_transformers_{b}" for b in PEERS]
    rows = []
    for name in names:
        row = [name, f[name]["whole_command_s"], f[name]["steady_products_per_s"], f[name]["startup_s"]]
        rows.append(row + [f[name].get(f"whole_vs_{b}") for b in PEERS])  # a peer has none
    head = ["contender", f"whole command s ({c['full']:,})", "steady products/s", "start-up s"]
    text = table(head + [f"whole × ST {b}" for b in PEERS], rows)
    versions = ", ".join(f"{k} {v}" for k, v in c["peer_versions"].items())
    versions += "; madr: " + ", ".join(f"{k} {v}" for k, v in c.get("madr_versions", {}).items())
    return text + (
        f"\n\n{c['full']:,} generated products ({c['small']:,} for the small slice), {c['threads']} threads, "
        f"max length {c['max_length']}; model: {c['model']}; `--precision auto` picks "
        f"{f['auto_picks']['precision']} here ({f['auto_picks']['reason']}). Versions: {versions}."
    )


def embed_cpu_peers_verdicts(r: dict[str, Any] | None) -> list[tuple[str, str, str, bool | None]]:
    """(key, target, measured, met) of issue 64's CPU target: the whole command against each peer."""
    target = "embed fp32 whole command ≥ 1.1× sentence-transformers torch and ≥ 1.0× its ONNX backends"
    if r is None:
        return [("embed_cpu_peers", target, "—", None)]
    mine, full = r["figures"]["madr_fp32"], r["config"]["full"]
    ratios = {backend: mine[f"whole_vs_{backend}"] for backend in PEERS}
    measured = (
        ", ".join(f"{ratio}× {backend}" for backend, ratio in ratios.items()) + f" on {full:,} products"
    )
    onnx = [ratios[backend] for backend in PEERS if backend != "torch"]
    met = timing_met([ratios["torch"]], 1.1, higher_is_better=True) and all(
        timing_met([ratio], 1.0, higher_is_better=True) for ratio in onnx
    )
    return [("embed_cpu_peers", target, measured, met and full >= 10_000)]


if __name__ == "__main__":
    main()
