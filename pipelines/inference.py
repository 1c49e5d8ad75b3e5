"""RunInference for madr encoders: load once per worker, batch, bucket by length.

Following Beam's ModelHandler split, this class only knows how to load a model
directory and encode a batch of texts; RunInference owns batching, model sharing
and metrics. It works for any variant, because `load_encoder` reads the variant
from the directory, and for either side (queries or documents).

Beam's own Hugging Face handler does not import with transformers 5, hence our own.
"""

from __future__ import annotations

import copy
import dataclasses
import importlib.util
import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import torch
from apache_beam.metrics import Metrics
from apache_beam.ml.inference.base import ModelHandler, PredictionResult
from transformers import PreTrainedTokenizerBase

from model import (
    DenseEncoder,
    EncoderConfig,
    EncoderOutput,
    Side,
    TokenizedBatch,
    load_config,
    load_encoder,
    pick_device,
    text_for_model,
)
from model.abstention import AbstentionRule
from model.annotations import ColumnAnnotator, RecordAnnotations, annotate
from model.hardware import BF16_FLAGS, PrecisionChoice, auto_precision, bf16_is_native, cpu_flags
from model.onnx_runtime import OnnxRuntimeEncoder, cache_root, cached_graph, probe_mismatch
from pipelines.options import PRECISIONS, RUNTIMES, ModelSettings
from pipelines.progress import ProgressLog

LOGGER = logging.getLogger(__name__)
GPU_PRECISIONS = {"bf16": torch.bfloat16, "fp16": torch.float16}


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


PAD_MULTIPLE = 8


@dataclass(frozen=True)
class ModelIdentity:
    """What every embedding row says about the model that made it; rows are reusable only under the same."""

    model_id: str
    model_version: str
    dimension: int
    config: EncoderConfig

    @classmethod
    def of(cls, model_dir: str) -> ModelIdentity:
        config = load_config(model_dir)
        return cls(config.model_id, str(config.model_version), int(config.projection_dim), config)

    def text_of(self, product: Mapping[str, Any]) -> str:
        """What this model reads of a product (BiBERT-CONCAT appends aspects; the rest do not)."""
        return text_for_model(product, self.config)


class AnnotatedEmbedding(NamedTuple):
    """What the handler returns with `annotate=True`: the vector and its Table 8 annotations."""

    embedding: np.ndarray
    annotations: RecordAnnotations


class EncodingFailed(NamedTuple):
    """The inference of a record that failed even in a batch of its own (`with_failures_isolated`)."""

    error: str


class TextToEncode(NamedTuple):
    """One RunInference example: the record's id and the exact text the model reads."""

    key: str
    text: str


@dataclass
class LoadedEncoder:
    """The torch encoder (its config and vocabulary name the annotations) and what runs the batches:
    the encoder itself, or its ONNX Runtime graph (`run`)."""

    encoder: DenseEncoder
    tokenizer: PreTrainedTokenizerBase
    run: Callable[[TokenizedBatch, Side], EncoderOutput] | None = None
    autocast: torch.dtype | None = None
    # Made on first use by a handler that writes annotations as columns (it keeps per-class lookups).
    annotator: ColumnAnnotator | None = None

    def forward(self, batch: TokenizedBatch, side: Side) -> EncoderOutput:
        if self.autocast is None:
            return (self.run or self.encoder)(batch, side)
        with torch.autocast(batch.input_ids.device.type, dtype=self.autocast):
            output = self.encoder(batch, side)
        # Normalised in bf16 (8 bits of mantissa), a norm was off by up to 0.003: beyond what an index
        # accepts as unit length (`index_builder.scann_index.UNIT_NORM_TOLERANCE`), and dot products would
        # no longer be cosines. Renormalised in fp32, the direction is bf16's and the length exactly 1.
        return dataclasses.replace(
            output, embedding=torch.nn.functional.normalize(output.embedding.float(), dim=-1)
        )


def length_sorted_chunks(lengths: Sequence[int], chunk_size: int) -> list[list[int]]:
    """Indices grouped into chunks of similar length, so short titles are not padded to long descriptions."""
    order = np.argsort(np.asarray(lengths), kind="stable")
    return [order[start : start + chunk_size].tolist() for start in range(0, len(order), chunk_size)]


class EncoderModelHandler(ModelHandler[TextToEncode, PredictionResult, LoadedEncoder]):
    """Encodes `TextToEncode` examples into unit-length embeddings (float32 numpy arrays).

    Args:
        model: which model, where, in what batches and at what precision (`ModelSettings`, the
            flags of every stage that encodes): its directory is one written by `madr train` (any
            variant), on Dataflow a local path on the worker image or one staged with the job.
            Each Beam batch holds `batch_size` examples; inside it, texts are sorted by token
            length and encoded in chunks of `chunk_size`, which is where padding is saved.
            ONNX Runtime (`runtime`) runs the model's ONNX graph, exported on first use and cached
            by the weights' checksum (`model.onnx_runtime`).
        side: query or document tower.
        annotate: return `AnnotatedEmbedding`s (vector and Table 8 annotations), not bare vectors.
        abstention: with `annotate`, which predicted aspect values are written: those below its
            confidence, or (brand, colour) not stated in the record's text, are written as absent,
            their confidence kept (`model.abstention.AbstentionRule`).
        num_threads: torch intra-op threads of the worker process (None: torch's default, one per
            core). Small models on shared cores run several times faster with 1: each op is too
            short to split, and a thread waiting for a busy core stalls the whole op.
        expected_total: how many records the job encodes in all, for the progress lines' ETA.
        precision: `model.precision` as the caller already resolved it (`resolve_precision`), when the
            caller records it too (the embed stage's manifest); by default it is resolved here.
    """

    def __init__(
        self,
        model: ModelSettings,
        side: Side,
        *,
        annotate: bool = False,
        num_threads: int | None = None,
        abstention: AbstentionRule | None = None,
        expected_total: int | None = None,
        precision: PrecisionChoice | None = None,
    ) -> None:
        # The settings validated themselves (`ModelSettings.__post_init__`): precision, runtime, sizes.
        # `auto` is resolved where the job is built, so that every worker encodes at one precision and the
        # stage's manifest can say which and why (`precision_choice`).
        self.precision_choice = precision or resolve_precision(
            model.precision, pick_device(model.device), model.runtime
        )
        self.precision, self.runtime = self.precision_choice.precision, model.runtime
        self.expected_total = expected_total
        self.progress: ProgressLog | None = None  # per worker, made when the model is loaded
        # Per worker: seconds in the forward calls (on a GPU, up to the copy back) since the first batch.
        self.model_seconds = 0.0
        self.first_batch_at: float | None = None
        # Fixed batches, not BatchElements' adaptive sizes (which start at 1): every batch gets the
        # same room to sort texts by length, and memory per batch is the same from the first on.
        super().__init__(min_batch_size=model.batch_size, max_batch_size=model.batch_size)
        self.batch_size = model.batch_size
        self.annotate = annotate
        self.abstention = abstention or AbstentionRule()
        self.num_threads = num_threads
        self.isolate_failures = False
        self.model_dir = model.model
        self.side = Side(side)
        self.chunk_size = model.chunk_size
        self.device = model.device
        self.batches = Metrics.counter("madr", "inference_batches")

    def with_failures_isolated(self) -> EncoderModelHandler:
        """This handler (subclass and all) answering a failed batch record by record: a record that
        fails alone comes back as an `EncodingFailed` result instead of failing the bundle."""
        clone = copy.copy(self)
        clone.isolate_failures = True
        return clone

    def load_model(self) -> LoadedEncoder:
        if self.num_threads:
            # Process-wide, hence only on request: in a worker process it is the worker's to set.
            torch.set_num_threads(self.num_threads)
        device = pick_device(self.device)
        runtime = resolve_runtime(self.runtime, self.precision, device)
        self.progress = ProgressLog(
            f"{self.side.value} texts encoded", self.expected_total, detail=self.model_share
        )
        LOGGER.info(
            "encoding %s texts with %s, %s (%s), on %s",
            self.side.value,
            runtime,
            self.precision,
            self.precision_choice.reason,
            device,
        )
        if self.precision == "bf16" and not bf16_is_native(device):
            LOGGER.warning("bf16 is emulated on this %s, slower than fp32: use --precision fp32", device.type)
        encoder, tokenizer = load_encoder(self.model_dir, device=str(device))
        if runtime == "torch":
            return LoadedEncoder(encoder, tokenizer, autocast=GPU_PRECISIONS.get(self.precision))
        try:
            graph, layout = cached_graph(self.model_dir, encoder, tokenizer, self.side, self.precision)
            pad = int(tokenizer.pad_token_id or 0)
            run = OnnxRuntimeEncoder(graph.read_bytes(), layout, self.side, pad, self.num_threads)
            cosine = probe_mismatch(encoder, tokenizer, run, self.side, self.precision)
        except Exception as error:  # the graph is a cache: torch encodes as well, only slower
            LOGGER.warning(
                "the ONNX graph of %s cannot be used (%s: %s): encoding with torch instead; delete %s to "
                "export it again",
                self.model_dir,
                type(error).__name__,
                " ".join(str(error).split())[:300],
                cache_root() / "onnx",
            )
            return LoadedEncoder(encoder, tokenizer)
        if cosine is not None:  # another model's graph, or a damaged one: never write its vectors
            LOGGER.warning(
                "%s does not encode as %s's weights do (cosine %.4f on probe texts): encoding with torch "
                "instead; delete the cached graph to export it again",
                graph,
                self.model_dir,
                cosine,
            )
            return LoadedEncoder(encoder, tokenizer)
        return LoadedEncoder(encoder, tokenizer, run=run)

    def run_inference(
        self,
        batch: Sequence[TextToEncode],
        model: LoadedEncoder,
        inference_args: dict[str, Any] | None = None,
    ) -> Iterable[PredictionResult]:
        if not self.isolate_failures:
            return self.encode_batch(batch, model)
        try:
            return self.encode_batch(batch, model)
        except Exception as error:  # whatever broke the batch, find the records it was
            if len(batch) == 1:
                return [PredictionResult(batch[0], EncodingFailed(repr(error)))]
            return [result for example in batch for result in self.run_inference([example], model)]

    def encode_batch(self, batch: Sequence[TextToEncode], model: LoadedEncoder) -> list[PredictionResult]:
        """Tokenise the whole batch once, then run the model on length-sorted chunks of it."""
        texts = [example.text for example in batch]
        embeddings: list[np.ndarray | AnnotatedEmbedding | None] = [None] * len(batch)
        for chunk, output in self.forward_chunks(texts, model):
            vectors = output.embedding.to(torch.float32).cpu().numpy()
            notes = None
            if self.annotate:
                notes = annotate(model.encoder, output, self.abstention, [texts[i] for i in chunk])
            for row, index in enumerate(chunk):
                vector = vectors[row]
                embeddings[index] = AnnotatedEmbedding(vector, notes[row]) if notes else vector
        return [PredictionResult(example, vector) for example, vector in zip(batch, embeddings, strict=True)]

    def forward_chunks(
        self, texts: Sequence[str], model: LoadedEncoder
    ) -> Iterator[tuple[list[int], EncoderOutput]]:
        """The model's output on `texts`, chunk by length-sorted chunk: each chunk's indices into `texts`
        and its output (on the model's device)."""
        self.batches.inc()
        if self.first_batch_at is None:
            self.first_batch_at = time.perf_counter()
        if self.progress is not None:
            self.progress.add(len(texts))
        # The model's own tokenize (MURAL adds guiding tokens), padded to the batch's longest text;
        # each chunk keeps the columns up to its own longest text, rounded up to a multiple of
        # PAD_MULTIPLE (the extra positions are masked out). Rounding gives the allocator a few
        # tensor shapes instead of one per length: with every length, glibc's heap fragmented and
        # peak RSS crept up by ~30 MB over the first 60k products (tiny model), now it does not.
        # 8 rather than 16: 3-4 % faster on ONNX Runtime at 64 tokens (less padding), still few shapes.
        tokens = model.encoder.tokenize(model.tokenizer, list(texts), self.side)
        # Chunks are cut in NumPy (shared with torch, no copies): torch's indexing cost ~1 ms a batch more.
        input_ids, attention_mask = tokens.input_ids.numpy(), tokens.attention_mask.numpy()
        lengths = attention_mask.sum(axis=1)
        device = next(model.encoder.parameters()).device
        with torch.inference_mode():
            for chunk in length_sorted_chunks(lengths, self.chunk_size):
                mask = attention_mask[chunk]
                last = int(np.flatnonzero(mask.any(axis=0)).max())  # right padding: all columns before it
                width = min(-(-(last + 1) // PAD_MULTIPLE) * PAD_MULTIPLE, mask.shape[1])
                chunk_tokens = TokenizedBatch(
                    torch.from_numpy(np.ascontiguousarray(input_ids[chunk, :width])),
                    torch.from_numpy(np.ascontiguousarray(mask[:, :width])),
                )
                started = time.perf_counter()
                output = model.forward(chunk_tokens.to(device), self.side)
                self.model_seconds += time.perf_counter() - started
                yield chunk, output

    def model_share(self) -> str:
        """How much of the time since the first batch the model ran: the rest, the device (a GPU, or the
        CPU's cores the model uses) waited on this process's reading, tokenizing and writing."""
        if self.first_batch_at is None:
            return ""
        elapsed = max(time.perf_counter() - self.first_batch_at, 1e-9)
        share = min(self.model_seconds / elapsed, 1.0)
        return f"the model ran {share:.0%} of the time, it waited on this process the rest"

    def get_num_bytes(self, batch: Sequence[TextToEncode]) -> int:
        return sum(len(example.text.encode("utf-8")) for example in batch)

    def get_metrics_namespace(self) -> str:
        return "madr_encoder"

    def batch_elements_kwargs(self) -> dict[str, Any]:
        return dict(self._batching_kwargs)
