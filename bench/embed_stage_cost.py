"""The embed stage's own cost per product, with the model made negligible (issue 64, Must have 1).

A GPU runs MiniLM-L6 far faster than one process can read, validate, plan, tokenize, annotate and
write products: what the stage spends around the forward pass caps the products a second a GPU
worker reaches. To see that cost alone, the model is a one-layer, hidden-32 MtBERT (the demo's
variant, with aspect heads sized from the catalog's vocabulary) over the real MiniLM wordpiece
tokenizer, with random weights: its forward pass is a few µs a product.

Contenders, each its own process, over one generated catalog:

- `madr embed` at its defaults, one process, under py-spy: µs a product per part (`bench.embed_profile`
  puts each sample in read, validate, plan, tokenize, encode, annotations, write or rest, Beam's runner,
  batching and counters), start-up (imports, model load, construction) left out;
- `madr embed` on one and on two processes (`--direct_running_mode multi_processing`), timed on a small
  and the full slice: steady µs a product of wall time = (full_s - small_s) / (full - small);
- sentence-transformers' `encode` of the same texts with a plain BERT of the same tiny shape and
  tokenizer (its mean pooling), profiled and timed the same way: its tokenizing and pooling cost.

    python -m bench.embed_stage_cost                 # 100,000 products (about 10 min on 2 cores)
    python -m bench.embed_stage_cost --quick         # 3,000 / 10,000 products
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import torch
from transformers import BertConfig

from bench.claim_words import timing_met
from bench.common import RESULTS, report, table
from bench.embed_profile import MADR_PARTS, PEER_PARTS, STARTUP, per_product, profiled, seconds_by_part
from bench.gpu_embed_bench import peer_backbone
from bench.precision_quality import madr, timed
from bench.support import command_line
from model import new_encoder
from model.aspects.vocabulary import AspectVocabulary
from model.hardware import auto_precision
from product_data.synthetic import SyntheticConfig, generate_benchmark
from schemas import write_manifest

VARIANT = "mtbert"
ASPECTS = ("category", "brand", "color")
PEER_SCRIPT = """
import sys, numpy as np, pyarrow.parquet as pq, torch
from sentence_transformers import SentenceTransformer
from pipelines.inference import ModelIdentity
products, model_dir, backbone, threads, output = sys.argv[1:6]
torch.set_num_threads(int(threads))
identity = ModelIdentity.of(model_dir)
texts = [identity.text_of(p) for p in pq.read_table(products).to_pylist()]
model = SentenceTransformer(backbone, device="cpu")
model.max_seq_length = identity.config.max_document_length
np.save(output, model.encode(texts, batch_size=256, convert_to_numpy=True))
"""


def negligible_backbone() -> dict[str, Any]:
    """One layer, hidden 32, over the MiniLM vocabulary: the forward pass costs next to nothing."""
    return BertConfig(
        vocab_size=30522,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=512,
    ).to_dict()


def catalog_model(directory: Path, products: Path, backbone: dict[str, Any] | None = None) -> Path:
    """A saved MtBERT, its aspect heads sized from `products`' aspects and untrained: random weights over
    `backbone` (a BERT config), or, without one, the bundled MiniLM's weights."""
    aspects = pq.read_table(str(products), columns=["aspects"]).column("aspects").to_pylist()
    vocabulary = AspectVocabulary.from_records((dict(pairs or []) for pairs in aspects), ASPECTS)
    shape = {"pretrained": False, "backbone": backbone} if backbone else {}
    with torch.random.fork_rng():
        torch.manual_seed(0)
        encoder, tokenizer = new_encoder(
            VARIANT, vocabulary=vocabulary, model_id="bench", model_version="1", **shape
        )
    encoder.save_pretrained(directory, tokenizer)
    info = {
        "variant": VARIANT,
        "model_version": "1",
        "untrained_heads": True,
        "random_weights": bool(backbone),
    }
    write_manifest(directory, "madr-model", info)
    return directory


def embed_command(products: Path, model: Path, output: Path, workers: int) -> list[str]:
    """`madr embed` at its defaults, as a user types it, on `workers` Beam worker processes."""
    flags = ["--products", str(products), "--model", str(model), "--output", str(output), "--overwrite"]
    if workers > 1:
        flags += ["--direct_running_mode", "multi_processing", "--direct_num_workers", str(workers)]
    return madr("embed", *flags)


def steady_us(small: int, full: int, small_s: float, full_s: float) -> dict[str, float]:
    """Wall µs a product at steady state (start-up cancels between the two slices), and the start-up."""
    per = (full_s - small_s) / (full - small)
    return {
        "small_s": round(small_s, 2),
        "full_s": round(full_s, 2),
        "steady_us_per_product": round(1e6 * per),
        "steady_products_per_s": round(1 / per, 1),
        "startup_s": round(small_s - small * per, 2),
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--products", type=int, default=100_000, help="Products of the full slice (%(default)s)"
    )
    parser.add_argument("--small", type=int, default=20_000, help="Products of the small slice (%(default)s)")
    parser.add_argument("--threads", type=int, default=2, help="Threads of every process (%(default)s)")
    parser.add_argument("--rate", type=int, default=100, help="py-spy samples a second (%(default)s)")
    parser.add_argument(
        "--workers", type=int, default=2, help="Processes of the multi-process run (%(default)s)"
    )
    parser.add_argument(
        "--label",
        default="",
        help="Saved as embed_stage_cost_LABEL (`before`: the code before the batched stage)",
    )
    parser.add_argument("--quick", action="store_true", help="3,000 / 10,000 products; saved as _quick")
    args = parser.parse_args(argv)
    if args.quick:
        args.small, args.products = 3000, 10_000
    figures: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as scratch_name:
        scratch = Path(scratch_name)
        os.environ["MADR_CACHE"] = str(scratch / "cache")
        generate_benchmark(SyntheticConfig(num_products=args.products, num_queries=20), str(scratch / "data"))
        catalog = pq.read_table(str(scratch / "data" / "products"))
        slices = {"small": args.small, "full": args.products}
        for name, size in slices.items():
            pq.write_table(catalog.slice(0, size), str(scratch / f"{name}.parquet"))
        model = catalog_model(scratch / "model", scratch / "full.parquet", negligible_backbone())
        backbone = peer_backbone(model, scratch)
        # A first run exports the ONNX graph into the cache (a first run's cost, not the subject).
        timed(embed_command(scratch / "small.parquet", model, scratch / "warm", 1), args.threads)

        def peer(name: str) -> list[str]:
            paths = (scratch / f"{name}.parquet", model, backbone, args.threads, scratch / f"peer-{name}.npy")
            return [sys.executable, "-c", PEER_SCRIPT, *map(str, paths)]

        full = scratch / "full.parquet"
        raw, wall = profiled(embed_command(full, model, scratch / "profiled", 1), args.threads, args.rate,
                             scratch / "madr.txt")  # fmt: skip
        figures["madr_profile"] = per_product(
            seconds_by_part(raw, MADR_PARTS, args.rate), args.products, wall
        )
        raw, wall = profiled(peer("full"), args.threads, args.rate, scratch / "peer.txt")
        figures["peer_profile"] = per_product(
            seconds_by_part(raw, PEER_PARTS, args.rate), args.products, wall
        )
        contenders = {
            "madr_1_process": lambda name: embed_command(
                scratch / f"{name}.parquet", model, scratch / name, 1
            ),
            f"madr_{args.workers}_processes": lambda name: embed_command(
                scratch / f"{name}.parquet", model, scratch / f"{name}-workers", args.workers
            ),
            "sentence_transformers": peer,
        }
        for contender, command in contenders.items():
            threads = max(1, args.threads // args.workers) if "processes" in contender else args.threads
            seconds = {name: timed(command(name), threads) for name in slices}
            figures[contender] = steady_us(args.small, args.products, seconds["small"], seconds["full"])
            print(f"{contender}: {figures[contender]}", flush=True)
    figures["auto_picks"] = auto_precision(torch.device("cpu")).as_json()  # what "at its defaults" ran at
    name = "embed_stage_cost" + ("_quick" if args.quick else "") + (f"_{args.label}" if args.label else "")
    config = {
        "command": command_line("bench.embed_stage_cost", argv),
        **vars(args),
        "model": f"{VARIANT}, random weights, {negligible_backbone()['num_hidden_layers']} layer, hidden 32",
        "peer": "SentenceTransformer(plain BERT of the same shape and tokenizer).encode(batch_size=256)",
    }
    return {"path": str(report(name, config, figures))}


# Earlier runs shown beside the latest, when saved: (label, file stem, what code ran).
EARLIER_RUNS = (
    ("before", "embed_stage_cost_before", "the code before issue 64's batched stage (9cfaff7)"),
    ("batched", "embed_stage_cost_columnar_before", "batched, each row validated as a dict (f2b61c8)"),
)


def embed_stage_cost_section(after: dict[str, Any]) -> str:
    """The PERFORMANCE.md table of this benchmark's latest run, beside the earlier runs of `EARLIER_RUNS`
    that are saved."""
    runs: dict[str, dict[str, Any]] = {}
    said = []
    for label, stem, code in EARLIER_RUNS:
        path = RESULTS / f"{stem}.json"
        if path.is_file():
            runs[label] = json.loads(path.read_text())
            said.append(f"*{label}*: {code}, {runs[label]['when'][:10]}")
    runs["after"] = after
    said.append(f"*after*: the rows validation keeps as read left in Arrow, {after['when'][:10]}")
    parts = [part for part, _ in MADR_PARTS if part not in STARTUP] + ["rest"]
    header = ["µs per product", *(f"madr {label}" for label in runs), "sentence-transformers"]
    peer = after["figures"]["peer_profile"]
    rows = []
    for part in parts:
        mine = [r["figures"]["madr_profile"]["us_per_product"].get(part) for r in runs.values()]
        rows.append([part, *mine, peer["us_per_product"].get(part)])
    profiles = [r["figures"]["madr_profile"] for r in runs.values()]
    rows.append(
        [
            "all parts (steady, sampled)",
            *(p["steady_us_per_product"] for p in profiles),
            peer["steady_us_per_product"],
        ]
    )
    own = [p["steady_us_per_product"] - p["us_per_product"].get("encode", 0) for p in profiles]
    rows.append(
        [
            "the stage's own work (all but encode)",
            *own,
            peer["steady_us_per_product"] - peer["us_per_product"]["encode"],
        ]
    )
    for key, label in (("madr_1_process", "wall, steady, 1 process"), (None, "wall, steady, 2 processes")):
        mine = [
            r["figures"][key or f"madr_{r['config']['workers']}_processes"]["steady_us_per_product"]
            for r in runs.values()
        ]
        theirs = after["figures"]["sentence_transformers"]["steady_us_per_product"] if key else None
        rows.append([label, *mine, theirs])
    c = after["config"]
    note = (
        f"{c['products']:,} generated products ({c['small']:,} in the small slice of the wall rows), "
        f"{c['threads']} threads; model: {c['model']} over the MiniLM tokenizer, so that the forward "
        "pass (encode) is small and the rest is the stage's own work. The per-part rows are py-spy samples "
        "of the main thread (start-up left out); the wall rows are (full s - small s) / (full - small)."
    )
    picked = _picked(after)
    return (
        table(header, rows)
        + "\n\n"
        + note
        + (f" `madr embed` ran at its defaults: {picked}." if picked else "")
        + f" Runs: {'; '.join(said)}. One run each, and the runs of different days ran on different"
        " machines of the same kind (2-core AMD EPYC with AVX-512 bf16): compare columns of one day."
    )


def _picked(run: dict[str, Any]) -> str:
    picks = run["figures"].get("auto_picks")
    return f"{picks['precision']} ({picks['reason']})" if picks else ""


if __name__ == "__main__":
    main()


OWN_WORK_TARGET_US = 100


def embed_stage_cost_verdicts(r: dict[str, Any] | None) -> list[tuple[str, str, str, bool | None]]:
    """(key, target, measured, met) of issue 64's first target: the stage's own work, one process."""
    target = f"embed stage's own work ≤ {OWN_WORK_TARGET_US} µs a product (negligible model, 1 process)"
    if r is None:
        return [("embed_stage_cost", target, "—", None)]
    profile, wall = r["figures"]["madr_profile"], r["figures"]["madr_1_process"]
    own = profile["steady_us_per_product"] - profile["us_per_product"].get("encode", 0)
    measured = (
        f"{own} µs sampled besides encode; {wall['steady_us_per_product']} µs a product of wall time, "
        f"encode included; {r['config']['products']:,} products"
    )
    return [("embed_stage_cost", target, measured, timing_met([own], OWN_WORK_TARGET_US))]
