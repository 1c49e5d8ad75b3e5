"""Embed throughput: the Beam embed pipeline against a plain torch loop, same model and batch size.

The plain loop is the ceiling: tokenise a batch, run the model, keep the vectors. The Beam pipeline
adds reading Parquet, validation, RunInference batching, length-sorted chunks and writing shards.
Both use the bundled MiniLM (untrained projection: speed does not depend on the weights).

    python -m bench.embed_throughput --products 2000
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import pyarrow.parquet as pq
import torch

from bench.common import report
from bench.support import command_line
from jobs.cli import parse_command
from model import Side, document_text, new_encoder
from pipelines.embed.stage import embed_catalog
from pipelines.layout import DatasetLayout
from product_data.synthetic import SyntheticConfig, generate_benchmark
from schemas import write_manifest


def plain_torch_loop(model_dir: str, texts: list[str], batch_size: int) -> float:
    from model import load_encoder

    encoder, tokenizer = load_encoder(model_dir)
    started = time.perf_counter()
    with torch.inference_mode():
        for start in range(0, len(texts), batch_size):
            encoder.embed_texts(tokenizer, texts[start : start + batch_size], Side.DOCUMENT)
    return len(texts) / (time.perf_counter() - started)


def beam_pipeline(model_dir: str, products: str, out: str, batch_size: int, *mode: str) -> float:
    flags = [
        "--products",
        products,
        "--model",
        model_dir,
        "--output",
        out,
        "--batch_size",
        str(batch_size),
        "--chunk_size",
        str(batch_size),
        *mode,
    ]
    started = time.perf_counter()
    counts = embed_catalog(*parse_command("embed", flags))
    return counts["products_embedded"] / (time.perf_counter() - started)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--products", type=int, default=2000, help="Catalog size (default: %(default)s)")
    parser.add_argument("--batch_size", type=int, default=32, help="Inference batch (default: %(default)s)")
    parser.add_argument(
        "--max_document_length", type=int, default=128, help="Truncation (default: %(default)s)"
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=0,
        help="torch intra-op threads of this process and, through the embed stage's --torch_threads, of "
        "each multi-processing worker (default 0: torch's default, the core count)",
    )
    parser.add_argument("--quick", action="store_true", help="300 products; saved as embed_throughput_quick")
    args = parser.parse_args(argv)
    if args.quick:
        args.products = min(args.products, 300)
    if args.threads:
        torch.set_num_threads(args.threads)
    load_at_start = round(os.getloadavg()[0], 2)

    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        generate_benchmark(
            SyntheticConfig(num_products=args.products, num_queries=max(20, args.products // 50)),
            str(root / "data"),
        )
        encoder, tokenizer = new_encoder("bibert", max_document_length=args.max_document_length)
        encoder.save_pretrained(root / "model", tokenizer)
        # The embed stage verifies its model against the manifest `madr train` writes.
        write_manifest(root / "model", "madr-model", {"variant": "bibert", "model_version": "bench"})
        products = DatasetLayout(str(root / "data")).products
        texts = [document_text(p) for p in pq.read_table(str(root / "data" / "products")).to_pylist()]

        threads = ["--torch_threads", str(args.threads)]
        ceiling = plain_torch_loop(str(root / "model"), texts, args.batch_size)
        in_memory = beam_pipeline(str(root / "model"), products, str(root / "a"), args.batch_size, *threads)
        multi = beam_pipeline(
            str(root / "model"),
            products,
            str(root / "b"),
            args.batch_size,
            "--direct_running_mode",
            "multi_processing",
            "--direct_num_workers",
            "2",
            *threads,
        )
    report(
        "embed_throughput_quick" if args.quick else "embed_throughput",
        {
            "command": command_line("bench.embed_throughput", argv),
            **vars(args),
            "torch_threads": torch.get_num_threads(),
            "load_average_1min_at_start": load_at_start,
        },
        {
            "plain_torch_products_per_s": round(ceiling, 1),
            "beam_in_memory_products_per_s": round(in_memory, 1),
            "beam_in_memory_vs_plain": round(in_memory / ceiling, 3),
            "beam_multi_processing_2_products_per_s": round(multi, 1),
            "beam_multi_processing_2_vs_plain": round(multi / ceiling, 3),
        },
    )


if __name__ == "__main__":
    main()
