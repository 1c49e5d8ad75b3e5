"""Text to vectors, for every caller: `TextEncoder.load(model_dir, ...)`, then `.encode(texts, side)`.

One object does what each caller used to write itself: load any trained model directory (its
config.json names the variant), choose what runs it (torch, or its ONNX Runtime graph, exported on
first use and cached by the weights' sha256: `model.onnx_runtime`) and at what precision (`auto` by
the hardware: `model.hardware`), tokenize a batch once, encode it in length-sorted chunks (short
titles are not padded to long descriptions), and optionally annotate (Table 8: predicted aspect
values and confidences). Beam's `pipelines.inference.EncoderModelHandler` is a thin adapter over it;
explain, search, calibration, adapt and the index's tuning queries call it directly, the way
sentence-transformers puts `encode` on the model.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np
import torch
from transformers import PreTrainedTokenizerBase

from model.abstention import AbstentionRule
from model.annotations import ColumnAnnotator, RecordAnnotations, annotate
from model.batch import EncoderOutput, Side, TokenizedBatch, pick_device
from model.encoder import DenseEncoder
from model.hardware import BF16_FLAGS, PrecisionChoice, auto_precision, bf16_is_native, cpu_flags
from model.onnx_runtime import OnnxRuntimeEncoder, cache_root, cached_graph, probe_mismatch
from model.precisions import PRECISIONS, RUNTIMES
from model.registry import load_encoder

LOGGER = logging.getLogger(__name__)
GPU_PRECISIONS = {"bf16": torch.bfloat16, "fp16": torch.float16}
# Each chunk keeps the token columns up to its own longest text, rounded up to a multiple of this (the
# extra positions are masked out). Rounding gives the allocator a few tensor shapes instead of one per
# length: with every length, glibc's heap fragmented and peak RSS crept up by ~30 MB over the first 60k
# products (tiny model), now it does not. 8 rather than 16: 3-4 % faster on ONNX Runtime at 64 tokens.
PAD_MULTIPLE = 8
DEFAULT_CHUNK_SIZE = 32


def onnxruntime_installed() -> bool:
    return importlib.util.find_spec("onnxruntime") is not None


def resolve_precision(precision: str, device: torch.device, runtime: str = "auto") -> PrecisionChoice:
    """`precision` as given, or what `auto` picks for `device` on this machine (`model.hardware`) among
    those `runtime` runs: with ONNX Runtime asked for, a bf16 CPU gets int8 or fp32 (bf16 is torch's)."""
    if precision == "auto":
        choice = auto_precision(device)
        if runtime == "onnxruntime" and device.type == "cpu" and choice.precision == "bf16":
            runnable = auto_precision(device, cpu_flags() - BF16_FLAGS)
            reason = runnable.reason.removeprefix("the CPU has no bf16 units; ")
            return PrecisionChoice(runnable.precision, f"--runtime onnxruntime, which has no bf16: {reason}")
        return choice
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
    return PrecisionChoice(precision, "given")


def resolve_runtime(runtime: str, precision: str, device: torch.device) -> str:
    """'torch' or 'onnxruntime' for this precision on this device; a clear error for a pair that cannot run.

    auto picks ONNX Runtime on a CPU: with the graph optimisations it applies at load, it ran the
    demo MtBERT at 1.18x torch's speed (2 threads), with embeddings equal to 1e-6.
    """
    if runtime not in RUNTIMES or precision not in PRECISIONS or precision == "auto":
        raise ValueError(f"runtime must be one of {RUNTIMES} and precision one of {PRECISIONS[1:]}")
    if precision == "bf16" and device.type == "cpu" and runtime != "onnxruntime":
        return "torch"  # torch autocast: at hardware speed on AMX / AVX-512 bf16 CPUs, emulated elsewhere
    if precision in GPU_PRECISIONS:
        if device.type != "cuda" or runtime == "onnxruntime":
            raise ValueError(
                f"--precision {precision} runs with torch on a GPU (bf16 on a CPU too); use fp32 or int8 here"
            )
        return "torch"
    if precision == "int8":
        if runtime == "torch" or device.type != "cpu":
            raise ValueError(
                "--precision int8 runs on ONNX Runtime on a CPU; drop --runtime torch / --device"
            )
        return "onnxruntime"
    if runtime == "auto":
        return "onnxruntime" if device.type == "cpu" and onnxruntime_installed() else "torch"
    if runtime == "onnxruntime" and device.type != "cpu":
        raise ValueError("--runtime onnxruntime runs on the CPU; use --runtime torch on a GPU")
    return runtime


def length_sorted_chunks(lengths: Sequence[int], chunk_size: int) -> list[list[int]]:
    """Indices grouped into chunks of similar length, so short titles are not padded to long descriptions."""
    order = np.argsort(np.asarray(lengths), kind="stable")
    return [order[start : start + chunk_size].tolist() for start in range(0, len(order), chunk_size)]


class AnnotatedEmbedding(NamedTuple):
    """What `encode(..., annotate=True)` returns per text: the vector and its Table 8 annotations."""

    embedding: np.ndarray
    annotations: RecordAnnotations


@dataclass
class TextEncoder:
    """A trained encoder ready to encode: the torch model (its config and vocabulary name the
    annotations), its tokenizer, and what runs the batches (the model itself, its ONNX Runtime graph
    `run`, or torch autocast at `autocast`). Made by `load`."""

    encoder: DenseEncoder
    tokenizer: PreTrainedTokenizerBase
    run: Callable[[TokenizedBatch, Side], EncoderOutput] | None = None
    autocast: torch.dtype | None = None
    chunk_size: int = DEFAULT_CHUNK_SIZE
    # Made on first use by a caller that writes annotations as columns (it keeps per-class lookups).
    annotator: ColumnAnnotator | None = None
    # Seconds in the forward calls (on a GPU, up to the copy back), for a caller's "the model ran N %".
    model_seconds: float = 0.0

    @classmethod
    def load(
        cls,
        model_dir: str | Path,
        *,
        precision: str | PrecisionChoice = "fp32",
        runtime: str = "torch",
        device: str | None = None,
        chunk_size: int = DEFAULT_CHUNK_SIZE,
        num_threads: int | None = None,
        sides: Sequence[Side] = (),
    ) -> TextEncoder:
        """The model of `model_dir` (any variant) on `device` (default: the GPU when present), run at
        `precision` (a name, "auto" resolved here, or a choice a caller resolved and records) by
        `runtime` (default: the torch model in fp32, what training saved; a stage passes its flags).
        On ONNX Runtime each side's graph is loaded on its first batch, those of `sides` here; a graph
        that cannot be used, or encodes otherwise than the weights, falls back to torch with a warning
        (the graph is a cache), and `run` is None when every side of `sides` did."""
        torch_device = pick_device(device)
        choice = precision if isinstance(precision, PrecisionChoice) else None
        choice = choice or resolve_precision(str(precision), torch_device, runtime)
        chosen = resolve_runtime(runtime, choice.precision, torch_device)
        LOGGER.info("encoding with %s, %s (%s), on %s", chosen, choice.precision, choice.reason, torch_device)
        if choice.precision == "bf16" and not bf16_is_native(torch_device):
            LOGGER.warning(
                "bf16 is emulated on this %s, slower than fp32: use --precision fp32", torch_device.type
            )
        encoder, tokenizer = load_encoder(model_dir, device=str(torch_device))
        if chosen == "torch":
            return cls(
                encoder, tokenizer, autocast=GPU_PRECISIONS.get(choice.precision), chunk_size=chunk_size
            )
        run = _OnnxGraphs(str(model_dir), encoder, tokenizer, choice.precision, num_threads)
        for side in sides:
            run.prepare(Side(side))
        usable = not sides or any(run.graphs[Side(side)] is not None for side in sides)
        return cls(encoder, tokenizer, run=run if usable else None, chunk_size=chunk_size)

    def forward(self, batch: TokenizedBatch, side: Side) -> EncoderOutput:
        started = time.perf_counter()
        try:
            if self.autocast is None:
                return (self.run or self.encoder)(batch, side)
            with torch.autocast(batch.input_ids.device.type, dtype=self.autocast):
                output = self.encoder(batch, side)
            # Normalised in bf16 (8 bits of mantissa), a norm was off by up to 0.003: beyond what an index
            # accepts as unit length (`index_builder.scann_index.UNIT_NORM_TOLERANCE`), and dot products
            # would no longer be cosines. Renormalised in fp32, the direction is bf16's and the length 1.
            return dataclasses.replace(
                output, embedding=torch.nn.functional.normalize(output.embedding.float(), dim=-1)
            )
        finally:
            self.model_seconds += time.perf_counter() - started

    def tokenize(self, texts: Sequence[str], side: Side) -> TokenizedBatch:
        """`texts` as the model's own tokenize gives them (MURAL adds guiding tokens), padded to the batch's
        longest text, on the CPU: what a thread ahead of the device does while it runs the batch before."""
        return self.encoder.tokenize(self.tokenizer, list(texts), side)

    def forward_chunks(
        self, texts: Sequence[str], side: Side, tokens: TokenizedBatch | None = None
    ) -> Iterator[tuple[list[int], EncoderOutput]]:
        """The model's output on `texts` (`tokens`: their `tokenize`, if done already), chunk by
        length-sorted chunk: each chunk's indices into `texts` and its output (on the model's device)."""
        # Each chunk keeps its own width (PAD_MULTIPLE). Chunks are cut in NumPy (shared with torch, no
        # copies): torch's indexing cost ~1 ms a batch more.
        if tokens is None:
            tokens = self.tokenize(texts, side)
        input_ids, attention_mask = tokens.input_ids.numpy(), tokens.attention_mask.numpy()
        lengths = attention_mask.sum(axis=1)
        device = next(self.encoder.parameters()).device
        with torch.inference_mode():
            for chunk in length_sorted_chunks(lengths, self.chunk_size):
                mask = attention_mask[chunk]
                last = int(np.flatnonzero(mask.any(axis=0)).max())  # right padding: all columns before it
                width = min(-(-(last + 1) // PAD_MULTIPLE) * PAD_MULTIPLE, mask.shape[1])
                chunk_tokens = TokenizedBatch(
                    torch.from_numpy(np.ascontiguousarray(input_ids[chunk, :width])),
                    torch.from_numpy(np.ascontiguousarray(mask[:, :width])),
                )
                yield chunk, self.forward(chunk_tokens.to(device), side)

    def outputs(self, texts: Sequence[str], side: Side, batch_size: int = 64) -> list[EncoderOutput]:
        """The model's whole output (vectors, aspect logits, fusion weights) on consecutive batches of
        `texts`, in order, for a caller that reads more than the vectors (confidence calibration, aspect
        accuracy). Each batch is padded to its longest text: no length sorting, the logits are those of
        the texts as batched."""
        side = Side(side)
        device = next(self.encoder.parameters()).device
        batches = [list(texts[start : start + batch_size]) for start in range(0, len(texts), batch_size)]
        with torch.inference_mode():
            return [
                self.forward(self.encoder.tokenize(self.tokenizer, b, side).to(device), side) for b in batches
            ]

    def encode(
        self,
        texts: Sequence[str],
        side: Side,
        *,
        annotate_with: AbstentionRule | None = None,
        batch_size: int = 256,
    ) -> np.ndarray | list[AnnotatedEmbedding]:
        """Unit-length float32 vectors of `texts` (n × dimension) in order, tokenized `batch_size` at a
        time; with `annotate_with`, one `AnnotatedEmbedding` per text, its predicted aspect values
        decided by that rule (`model.abstention`)."""
        side = Side(side)
        vectors: list[np.ndarray | None] = [None] * len(texts)
        notes: list[RecordAnnotations | None] = [None] * len(texts)
        for start in range(0, len(texts), batch_size):
            batch = list(texts[start : start + batch_size])
            for chunk, output in self.forward_chunks(batch, side):
                embedding = output.embedding.to(torch.float32).cpu().numpy()
                chunk_notes = None
                if annotate_with is not None:
                    chunk_notes = annotate(self.encoder, output, annotate_with, [batch[i] for i in chunk])
                for row, index in enumerate(chunk):
                    vectors[start + index] = embedding[row]
                    if chunk_notes is not None:
                        notes[start + index] = chunk_notes[row]
        if annotate_with is not None:
            return [AnnotatedEmbedding(v, n) for v, n in zip(vectors, notes, strict=True)]  # type: ignore[arg-type]
        if not texts:
            return np.zeros((0, self.encoder.config.projection_dim), np.float32)
        return np.stack(vectors)  # type: ignore[arg-type]


class _OnnxGraphs:
    """The model's cached ONNX graph per side, each loaded on its side's first batch (`prepare`); a side
    whose graph could not be used is encoded by the torch model."""

    def __init__(
        self,
        model_dir: str,
        encoder: DenseEncoder,
        tokenizer: PreTrainedTokenizerBase,
        precision: str,
        num_threads: int | None,
    ) -> None:
        self.model_dir, self.encoder, self.tokenizer = model_dir, encoder, tokenizer
        self.precision, self.num_threads = precision, num_threads
        self.graphs: dict[Side, OnnxRuntimeEncoder | None] = {}

    def prepare(self, side: Side) -> None:
        if side not in self.graphs:
            self.graphs[side] = _side_graph(
                self.model_dir, self.encoder, self.tokenizer, side, self.precision, self.num_threads
            )
            if self.graphs[side] is not None:
                LOGGER.info("%s texts: ONNX Runtime graph at %s", side.value, self.precision)

    def __call__(self, batch: TokenizedBatch, side: Side) -> EncoderOutput:
        self.prepare(side)
        return (self.graphs[side] or self.encoder)(batch, side)


def _side_graph(
    model_dir: str,
    encoder: DenseEncoder,
    tokenizer: PreTrainedTokenizerBase,
    side: Side,
    precision: str,
    num_threads: int | None,
) -> OnnxRuntimeEncoder | None:
    try:
        graph, layout = cached_graph(model_dir, encoder, tokenizer, side, precision)
        pad = int(tokenizer.pad_token_id or 0)
        run = OnnxRuntimeEncoder(graph.read_bytes(), layout, side, pad, num_threads)
        cosine = probe_mismatch(encoder, tokenizer, run, side, precision)
    except Exception as error:
        LOGGER.warning(
            "the ONNX graph of %s cannot be used (%s: %s): encoding with torch instead; delete %s to "
            "export it again",
            model_dir,
            type(error).__name__,
            " ".join(str(error).split())[:300],
            cache_root() / "onnx",
        )
        return None
    if cosine is not None:  # another model's graph, or a damaged one: never write its vectors
        LOGGER.warning(
            "%s does not encode as %s's weights do (cosine %.4f on probe texts): encoding with torch "
            "instead; delete the cached graph to export it again",
            graph,
            model_dir,
            cosine,
        )
        return None
    return run


__all__ = [
    "AnnotatedEmbedding",
    "TextEncoder",
    "length_sorted_chunks",
    "resolve_precision",
    "resolve_runtime",
]
