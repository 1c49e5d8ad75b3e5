"""`madr embed` on a GPU at fp32, bf16 and fp16, against sentence-transformers on the same GPU.

What a user with a GPU would run instead is sentence-transformers' `encode` on the same MiniLM, at
fp32 or with the model cast to fp16. Each contender is a separate process, run on a small and a
full slice of one generated catalog; the steady rate is (full - small) / (full_s - small_s), which
cancels start-up, as in `bench.embed_peer_bench`. The figures: products/s, the ratio to
sentence-transformers at the same precision, GPU-hours per million products, and how far the bf16
and fp16 vectors are from fp32 (cosine) and how often their top-1 aspect values agree.

The model: `--model` (default runs/demo/model). A model folder without `model.safetensors` (the
weights need not travel to a lent GPU machine: speed does not depend on their values) is filled
with random weights of the same architecture; the report says so.

    python -m bench.gpu_embed_bench                       # on a machine with a GPU
    python -m bench.gpu_embed_bench --device cpu --precisions fp32 --quick   # a CPU smoke run
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import torch
from safetensors.torch import save_file

from bench.common import report
from bench.embed_peer_bench import rates
from bench.precision_quality import madr, timed
from bench.support import command_line
from model import Side, load_encoder, pick_device, variant_class
from model.config import read_config_dict
from model.weights_file import WEIGHTS_FILE
from pipelines.inference import ModelIdentity
from product_data.synthetic import SyntheticConfig, generate_benchmark
from schemas import write_manifest

THREADS = os.cpu_count() or 1
PEER_SCRIPT = """
import sys, numpy as np, pyarrow.parquet as pq, torch
from sentence_transformers import SentenceTransformer
from pipelines.inference import ModelIdentity
products, model_dir, backbone, precision, output, batch_size, device = sys.argv[1:8]
identity = ModelIdentity.of(model_dir)
texts = [identity.text_of(p) for p in pq.read_table(products).to_pylist()]
dtype = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[precision]
model = SentenceTransformer(backbone, device=device, model_kwargs={"dtype": dtype})
model.max_seq_length = identity.config.max_document_length
np.save(output, model.encode(texts, batch_size=int(batch_size), convert_to_numpy=True))
"""


def model_with_weights(model: Path, scratch: Path) -> tuple[Path, bool]:
    """`model` when it has weights; else a copy with random weights of its architecture (True)."""
    if (model / WEIGHTS_FILE).is_file():
        return model, False
    target = scratch / "random-model"
    shutil.copytree(model, target)
    data = read_config_dict(target)
    torch.manual_seed(0)
    encoder = variant_class(data.get("variant", "")).from_config_dict(data)
    save_file({k: v.contiguous() for k, v in encoder.state_dict().items()}, str(target / WEIGHTS_FILE))
    info = json.loads((target / "manifest.json").read_text()) if (target / "manifest.json").is_file() else {}
    info = {k: v for k, v in info.items() if k not in ("files", "created_at", "kind", "format_version")}
    write_manifest(target, "madr-model", {**info, "random_weights": True})
    return target, True


def peer_backbone(model: Path, scratch: Path) -> Path:
    """A plain BERT folder of the model's backbone for sentence-transformers (its mean pooling)."""
    from transformers import AutoTokenizer, BertConfig, BertModel

    target = scratch / "peer-backbone"
    torch.manual_seed(0)
    BertModel(BertConfig(**read_config_dict(model)["backbone"])).save_pretrained(str(target))
    AutoTokenizer.from_pretrained(str(model)).save_pretrained(str(target))
    return target


def vectors(folder: Path) -> tuple[np.ndarray, dict[str, list[str]]]:
    """The embed output's vectors ordered by product id, and each aspect's top-1 values."""
    shards = [str(path) for path in sorted(folder.glob("embeddings-*.parquet"))]
    table = pa.concat_tables([pq.read_table(path) for path in shards]).sort_by("product_id")
    predicted: dict[str, list[str]] = {}
    for pairs in table["aspect_values"].to_pylist():
        for aspect, value in pairs or []:
            predicted.setdefault(aspect, []).append(str(value))
    return np.stack(table["embedding"].to_numpy(zero_copy_only=False)).astype(np.float32), predicted


def model_only_rate(model: Path, texts: list[str], batch_size: int, precision: str, device: str) -> float:
    """Products/s of the encoder alone (tokenise, forward, copy back) in this process: the ceiling
    that the embed stage's reading, annotating and writing take a share of."""
    encoder, tokenizer = load_encoder(model, device)
    autocast = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)
    ordered = sorted(texts, key=len)  # as the embed stage batches: similar lengths together
    started = time.perf_counter()
    with (
        torch.inference_mode(),
        torch.autocast(
            pick_device(device).type, dtype=autocast or torch.float32, enabled=autocast is not None
        ),
    ):
        for start in range(0, len(ordered), batch_size):
            encoder.embed_texts(tokenizer, ordered[start : start + batch_size], Side.DOCUMENT).embedding.cpu()
    return len(texts) / (time.perf_counter() - started)


def agreement(reference: Path, other: Path) -> dict[str, Any]:
    """Cosine of each product's vector to the fp32 one, and the share of equal top-1 aspect values."""
    a, values_a = vectors(reference)
    b, values_b = vectors(other)
    cosine = np.sum(a * b, axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1) + 1e-12)
    return {
        "mean_cosine_to_fp32": round(float(cosine.mean()), 6),
        "min_cosine_to_fp32": round(float(cosine.min()), 6),
        "top1_aspect_value_agreement": {
            aspect: round(float(np.mean(np.asarray(values) == np.asarray(values_b.get(aspect, [])))), 4)
            for aspect, values in values_a.items()
            if len(values) == len(values_b.get(aspect, []))
        },
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default="runs/demo/model", help="Model folder (default: %(default)s)")
    parser.add_argument("--small", type=int, default=2000, help="Products of the small slice (%(default)s)")
    parser.add_argument("--full", type=int, default=20_000, help="Products of the full slice (%(default)s)")
    parser.add_argument("--batch_size", type=int, default=512, help="Inference batch (%(default)s)")
    parser.add_argument("--precisions", default="fp32,bf16,fp16", help="madr embed's (%(default)s)")
    parser.add_argument("--device", default="cuda", help="Torch device of madr embed (%(default)s)")
    parser.add_argument(
        "--gpu_hour_usd", type=float, default=0.0, help="Price of a GPU-hour, for the cost line (none)"
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=0,
        help="Also run the last precision with Beam's multi-processing DirectRunner and this many workers "
        "(each loads the model; tokenising is on the CPU) (default: 0, not run)",
    )
    parser.add_argument("--quick", action="store_true", help="200 / 600 products; saved as gpu_embed_quick")
    args = parser.parse_args(argv)
    if args.quick:
        args.small, args.full = 200, 600
    precisions = [p.strip() for p in args.precisions.split(",") if p.strip()]
    peer_precisions = [p for p in precisions if p in ("fp32", "fp16")]
    figures: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as scratch_name:
        scratch = Path(scratch_name)
        model, random_weights = model_with_weights(Path(args.model), scratch)
        generate_benchmark(SyntheticConfig(num_products=args.full, num_queries=20), str(scratch / "data"))
        catalog = pq.read_table(str(scratch / "data" / "products"))
        for name, size in (("small", args.small), ("full", args.full)):
            pq.write_table(catalog.slice(0, size), str(scratch / f"{name}.parquet"))
        backbone = peer_backbone(model, scratch) if peer_precisions else None
        commands: dict[str, Callable[[str], list[str]]] = {}
        for precision in precisions:
            commands[f"madr_{precision}"] = partial(embed_command, args, model, scratch, precision, 1)
        if args.workers > 1:
            name = f"madr_{precisions[-1]}_{args.workers}_workers"
            commands[name] = partial(embed_command, args, model, scratch, precisions[-1], args.workers)
        for precision in peer_precisions:
            commands[f"sentence_transformers_{precision}"] = partial(
                peer_command, args, model, backbone, scratch, precision
            )
        for contender, command in commands.items():
            # One contender at a time, saved after each: a run stopped early keeps what it measured.
            workers = args.workers if contender.endswith("_workers") else 1
            times = {name: timed(command(name), max(1, THREADS // workers)) for name in ("small", "full")}
            figures[contender] = rates(args.small, args.full, times["small"], times["full"])
            steady = figures[contender]["steady_products_per_s"]
            figures[contender]["device_hours_per_million"] = round(1e6 / steady / 3600, 4)
            if args.gpu_hour_usd:
                figures[contender]["usd_per_million"] = round(args.gpu_hour_usd * 1e6 / steady / 3600, 3)
            print(f"{contender}: {times} -> {steady} products/s", flush=True)
            save(args, argv, random_weights, figures)
        texts = [ModelIdentity.of(str(model)).text_of(p) for p in catalog.slice(0, args.full).to_pylist()]
        for precision in precisions:
            model_only_rate(model, texts[: args.batch_size * 4], args.batch_size, precision, args.device)
            rate = model_only_rate(model, texts, args.batch_size, precision, args.device)
            figures[f"madr_{precision}"]["encoder_alone_products_per_s"] = round(rate, 1)
        for precision in precisions:
            mine, peer = figures[f"madr_{precision}"], figures.get(f"sentence_transformers_{precision}")
            if peer:
                mine["steady_vs_sentence_transformers"] = round(
                    mine["steady_products_per_s"] / peer["steady_products_per_s"], 3
                )
            if precision != "fp32" and "fp32" in precisions:
                mine.update(agreement(scratch / "madr_fp32-full", scratch / f"madr_{precision}-full"))
    return {"path": str(save(args, argv, random_weights, figures))}


def embed_command(
    args: argparse.Namespace, model: Path, scratch: Path, precision: str, workers: int, name: str
) -> list[str]:
    """`madr embed` of the `name` slice at `precision`, on `workers` Beam worker processes."""
    contender = f"madr_{precision}" + (f"_{workers}_workers" if workers > 1 else "")
    flags = ["--products", str(scratch / f"{name}.parquet"), "--model", str(model)]
    flags += ["--output", str(scratch / f"{contender}-{name}"), "--precision", precision]
    flags += ["--device", args.device, "--runtime", "torch", "--batch_size", str(args.batch_size)]
    flags += ["--chunk_size", str(args.batch_size)]
    if workers > 1:
        flags += ["--direct_running_mode", "multi_processing", "--direct_num_workers", str(workers)]
    return madr("embed", *flags)


def peer_command(
    args: argparse.Namespace, model: Path, backbone: Path | None, scratch: Path, precision: str, name: str
) -> list[str]:
    """sentence-transformers encoding the `name` slice at `precision`."""
    command = [sys.executable, "-c", PEER_SCRIPT, str(scratch / f"{name}.parquet"), str(model), str(backbone)]
    output = scratch / f"peer-{precision}-{name}.npy"
    return [*command, precision, str(output), str(args.batch_size), args.device]


def save(
    args: argparse.Namespace, argv: list[str] | None, random_weights: bool, figures: dict[str, Any]
) -> Path:
    device = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"
    return report(
        "gpu_embed_quick" if args.quick else "gpu_embed",
        {
            "command": command_line("bench.gpu_embed_bench", argv),
            **vars(args),
            "device_name": device,
            "random_weights": random_weights,
            "peer": "SentenceTransformer(same BERT backbone, mean pooling, dtype).encode(batch_size)",
        },
        figures,
    )


if __name__ == "__main__":
    main()
