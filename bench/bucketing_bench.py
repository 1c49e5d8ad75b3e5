"""Embedding cost: naive padded batches against length-sorted ones, and fp32 against int8 inference.

Bucketing. Texts come from a generated catalog (`product_data.synthetic.generate_benchmark`); a seeded
share of the products is reduced to its title (marketplace listings that have nothing else), the
rest keep title + bullets + description, truncated at the model's document length. "Naive" encodes
consecutive batches in catalog order, each padded to its longest text; "bucketed" is the real
`EncoderModelHandler.run_inference` (batches of --beam_batch sorted by token length into chunks of
--batch_size, what the embed stage runs); "globally sorted" sorts the whole list with
`length_sorted_chunks` first (what a per-worker batch of everything could reach).

Quantisation. fp32 torch against `torch.ao.quantization.quantize_dynamic` (int8 nn.Linear) and, when
onnxruntime is installed, ONNX Runtime fp32 and its dynamic int8 quantisation of the same graph.
Each encodes the (unmodified) catalog in length-sorted chunks; reported: throughput, the mean cosine
between its embeddings and fp32 torch's, and Recall@100 of the test queries with exact search.

    python -m bench.bucketing_bench --products 3000 --model runs/demo/model
"""

from __future__ import annotations

import argparse
import dataclasses
import random
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import torch

from bench.common import report
from bench.support import command_line, shared_machine_note
from evaluation import MetricSpec, RelevanceRule, evaluate_query
from index_builder import ExactSearcher
from model import Side, document_text, load_encoder, new_encoder
from model.batch import TokenizedBatch
from model.text_encoder import TextEncoder, length_sorted_chunks
from pipelines.inference import EncoderModelHandler, TextToEncode
from pipelines.settings.options import ModelSettings
from product_data.synthetic import SyntheticConfig, generate_benchmark

Encode = Callable[[list[str], Side], np.ndarray]


def mixed_texts(products: list[dict[str, Any]], title_only_share: float, seed: int) -> list[str]:
    """Catalog texts, a seeded ``title_only_share`` of them reduced to the title, in catalog order."""
    rng = random.Random(seed)
    return [p["title"] if rng.random() < title_only_share else document_text(p) for p in products]


def naive(loaded: TextEncoder, texts: list[str], batch_size: int) -> float:
    """Seconds to encode consecutive batches, each padded to its own longest text."""
    started = time.perf_counter()
    for start in range(0, len(texts), batch_size):
        loaded.encoder.embed_texts(loaded.tokenizer, texts[start : start + batch_size], Side.DOCUMENT)
    return time.perf_counter() - started


def through_handler(handler: EncoderModelHandler, loaded: TextEncoder, texts: list[str], beam_batch: int):
    """(embeddings, seconds) through the embed stage's own `run_inference`, batch by batch."""
    examples = [TextToEncode(str(i), text) for i, text in enumerate(texts)]
    vectors: list[np.ndarray] = []
    started = time.perf_counter()
    for start in range(0, len(examples), beam_batch):
        results = handler.run_inference(examples[start : start + beam_batch], loaded)
        vectors.extend(result.inference for result in results)
    return np.stack(vectors), time.perf_counter() - started


def globally_sorted(loaded: TextEncoder, texts: list[str], batch_size: int) -> float:
    started = time.perf_counter()
    lengths = [len(ids) for ids in loaded.tokenizer(texts, truncation=True, max_length=512)["input_ids"]]
    for chunk in length_sorted_chunks(lengths, batch_size):
        loaded.encoder.embed_texts(loaded.tokenizer, [texts[i] for i in chunk], Side.DOCUMENT)
    return time.perf_counter() - started


def sorted_encode(
    forward: Callable[[dict[str, np.ndarray]], np.ndarray],
    tokenizer: Any,
    max_length: int,
    texts: list[str],
    chunk: int,
) -> np.ndarray:
    """Length-sorted chunks through any forward function of tokenised numpy inputs (ONNX Runtime)."""
    lengths = [len(ids) for ids in tokenizer(texts, truncation=True, max_length=max_length)["input_ids"]]
    rows: dict[int, np.ndarray] = {}
    for indices in length_sorted_chunks(lengths, chunk):
        batch = tokenizer(
            [texts[i] for i in indices],
            padding=True,
            truncation=True,
            max_length=max_length,
            return_tensors="np",
        )
        vectors = forward({"input_ids": batch["input_ids"], "attention_mask": batch["attention_mask"]})
        rows.update(zip(indices, vectors, strict=True))
    return np.stack([rows[i] for i in range(len(texts))])


class _Graph(torch.nn.Module):
    """The document tower as a plain (input_ids, attention_mask) -> embedding graph, for ONNX export."""

    def __init__(self, encoder: torch.nn.Module) -> None:
        super().__init__()
        self.encoder = encoder

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return self.encoder(TokenizedBatch(input_ids, attention_mask), Side.DOCUMENT).embedding


def onnx_encoders(loaded: TextEncoder, folder: Path, threads: int) -> dict[str, Encode]:
    """ONNX Runtime fp32 and dynamic-int8 encoders of the same exported graph ({} without onnxruntime)."""
    try:
        import onnxruntime as ort
        from onnxruntime.quantization import QuantType, quantize_dynamic
    except ImportError:
        return {}
    sample = loaded.tokenizer(
        ["red running shoes", "a longer product title here"], padding=True, return_tensors="pt"
    )
    fp32, int8 = folder / "encoder.onnx", folder / "encoder-int8.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            _Graph(loaded.encoder).eval(),
            (sample["input_ids"], sample["attention_mask"]),
            str(fp32),
            input_names=["input_ids", "attention_mask"],
            output_names=["embedding"],
            opset_version=17,
            dynamic_axes={
                "input_ids": {0: "b", 1: "s"},
                "attention_mask": {0: "b", 1: "s"},
                "embedding": {0: "b"},
            },
            dynamo=False,
        )
        quantize_dynamic(str(fp32), str(int8), weight_type=QuantType.QInt8)
    encoders: dict[str, Encode] = {}
    for name, path in (("onnxruntime_fp32", fp32), ("onnxruntime_int8", int8)):
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])

        def encode(texts: list[str], side: Side, session: Any = session) -> np.ndarray:
            max_length = loaded.encoder.max_length(side)
            return sorted_encode(
                lambda feed: session.run(None, feed)[0], loaded.tokenizer, max_length, texts, 32
            )

        encoders[name] = encode
    return encoders


def torch_encoder(loaded: TextEncoder, chunk: int) -> Encode:
    def encode(texts: list[str], side: Side) -> np.ndarray:
        handler = EncoderModelHandler(ModelSettings("unused", batch_size=256, chunk_size=chunk), side)
        return through_handler(handler, loaded, texts, 256)[0]

    return encode


def recall_at_100(
    doc: np.ndarray,
    queries: np.ndarray,
    product_ids: list[str],
    query_ids: list[str],
    judgments: dict[str, dict[str, int]],
) -> float:
    found = ExactSearcher(doc, product_ids).search(queries, 100)
    spec, values = MetricSpec("recall", 100), []
    for row, query_id in enumerate(query_ids):
        value = evaluate_query(found.ids[row], judgments.get(query_id, {}), [spec], RelevanceRule())
        values.append(value[spec.key])
    return float(np.nanmean(values))


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--products", type=int, default=3000, help="Catalog size (default: %(default)s)")
    parser.add_argument(
        "--bucket_texts", type=int, default=2000, help="Texts per bucketing run (%(default)s)"
    )
    parser.add_argument("--title_only_share", type=float, default=0.5, help="Title-only share (%(default)s)")
    parser.add_argument("--batch_size", type=int, default=32, help="Encoder batch / chunk (%(default)s)")
    parser.add_argument("--beam_batch", type=int, default=256, help="RunInference batch (%(default)s)")
    parser.add_argument("--model", default=None, help="Model directory (default: fresh BiBERT on MiniLM)")
    parser.add_argument(
        "--max_document_length",
        type=int,
        default=128,
        help="Document truncation, overriding the model's (default: %(default)s, the EncoderConfig default; "
        "the demo model was trained at 64)",
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=0,
        help="torch and ONNX Runtime intra-op threads (default 0: torch's own default, the core count). "
        "On a shared machine 1 is the honest setting: a 2-thread op waits for a descheduled thread",
    )
    parser.add_argument("--no_onnx", action="store_true", help="Skip ONNX Runtime")
    parser.add_argument("--quick", action="store_true", help="Small sizes; torch fp32 and int8 only")
    args = parser.parse_args(argv)
    if args.quick:
        args.products, args.bucket_texts, args.no_onnx = (
            min(args.products, 300),
            min(args.bucket_texts, 128),
            True,
        )
    if args.threads:
        torch.set_num_threads(args.threads)
    threads = torch.get_num_threads()

    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        num_queries = max(20, args.products // 10)
        generate_benchmark(
            SyntheticConfig(num_products=args.products, num_queries=num_queries), str(root / "data")
        )
        if args.model is None:
            encoder, tokenizer = new_encoder("bibert")
            encoder.save_pretrained(root / "model", tokenizer)
        model_dir = args.model or str(root / "model")
        loaded = TextEncoder(*load_encoder(model_dir))
        # Padding waste grows with the truncation length: measure at the production default, not the demo's.
        loaded.encoder.config = dataclasses.replace(
            loaded.encoder.config, max_document_length=args.max_document_length
        )
        products = pq.read_table(str(root / "data" / "products")).to_pylist()
        queries = [
            q
            for q in pq.read_table(str(root / "data" / "queries.parquet")).to_pylist()
            if q["split"] == "test"
        ]
        judgments: dict[str, dict[str, int]] = {}
        for j in pq.read_table(str(root / "data" / "judgments.parquet")).to_pylist():
            judgments.setdefault(j["query_id"], {})[j["product_id"]] = j["grade"]
        config = {
            "command": command_line("bench.bucketing_bench", argv),
            **vars(args),
            "model_dir": args.model or "fresh bibert on bundled MiniLM (untrained projection)",
            "max_document_length": loaded.encoder.max_length(Side.DOCUMENT),
            "torch_threads": threads,
            "test_queries": len(queries),
            **shared_machine_note(),
        }
        print(f"bucketing_bench: {config}", flush=True)

        figures: dict[str, Any] = {"bucketing": {}}
        handler = EncoderModelHandler(
            ModelSettings(model_dir, batch_size=args.beam_batch, chunk_size=args.batch_size), Side.DOCUMENT
        )
        mixes = {"title_only_share_" + str(args.title_only_share): args.title_only_share}
        if not args.quick:
            mixes["as_generated"] = 0.0
        with torch.inference_mode():
            loaded.encoder.embed_texts(loaded.tokenizer, ["warm up"] * 4, Side.DOCUMENT)
            for mix, share in mixes.items():
                texts = mixed_texts(products, share, seed=7)[: args.bucket_texts]
                tokens = [
                    len(t)
                    for t in loaded.tokenizer(
                        texts, truncation=True, max_length=config["max_document_length"]
                    )["input_ids"]
                ]
                naive_s = naive(loaded, texts, args.batch_size)
                _, bucketed_s = through_handler(handler, loaded, texts, args.beam_batch)
                row = {
                    "texts": len(texts),
                    "mean_tokens": round(float(np.mean(tokens)), 1),
                    "p90_tokens": int(np.percentile(tokens, 90)),
                    "naive_texts_per_s": round(len(texts) / naive_s, 1),
                    "bucketed_texts_per_s": round(len(texts) / bucketed_s, 1),
                    "bucketed_vs_naive": round(naive_s / bucketed_s, 3),
                }
                if not args.quick:
                    sorted_s = globally_sorted(loaded, texts, args.batch_size)
                    row["globally_sorted_texts_per_s"] = round(len(texts) / sorted_s, 1)
                    row["globally_sorted_vs_naive"] = round(naive_s / sorted_s, 3)
                figures["bucketing"][mix] = row
                print(f"  {mix}: {row}", flush=True)

            docs = [document_text(p) for p in products]
            product_ids = [p["product_id"] for p in products]
            query_texts, query_ids = [q["text"] for q in queries], [q["query_id"] for q in queries]
            variants: dict[str, Encode] = {"torch_fp32": torch_encoder(loaded, args.batch_size)}
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                quantized = torch.ao.quantization.quantize_dynamic(
                    loaded.encoder, {torch.nn.Linear}, dtype=torch.qint8
                )
            variants["torch_int8_dynamic"] = torch_encoder(
                TextEncoder(quantized, loaded.tokenizer), args.batch_size
            )
            if not args.no_onnx:
                variants.update(onnx_encoders(loaded, root, threads))
            reference: np.ndarray | None = None
            rows: dict[str, dict[str, Any]] = {}
            for name, encode in variants.items():
                encode(docs[:8], Side.DOCUMENT)
                started = time.perf_counter()
                doc_vectors = encode(docs, Side.DOCUMENT)
                seconds = time.perf_counter() - started
                query_vectors = encode(query_texts, Side.QUERY)
                reference = doc_vectors if reference is None else reference
                rows[name] = {
                    "products_per_s": round(len(docs) / seconds, 1),
                    "mean_cosine_vs_torch_fp32": round(
                        float(np.mean(np.sum(doc_vectors * reference, axis=1))), 5
                    ),
                    "recall@100": round(
                        recall_at_100(doc_vectors, query_vectors, product_ids, query_ids, judgments), 4
                    ),
                }
                print(f"  {name}: {rows[name]}", flush=True)
            base = rows["torch_fp32"]
            for row in rows.values():
                row["speed_vs_torch_fp32"] = round(row["products_per_s"] / base["products_per_s"], 3)
                row["recall@100_change_points"] = round(100 * (row["recall@100"] - base["recall@100"]), 2)
            figures["quantization"] = rows
    figures["load_average_1min_at_end"] = shared_machine_note()["load_average_1min_at_start"]
    report("bucketing_quick" if args.quick else "bucketing", config, figures)
    return figures


if __name__ == "__main__":
    main()
