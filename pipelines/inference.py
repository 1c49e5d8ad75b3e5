"""RunInference for madr encoders: load once per worker, batch, and count.

Following Beam's ModelHandler split, the handler only loads a model directory as a
`model.text_encoder.TextEncoder` (which tokenizes, chunks by length, and picks the runtime and
precision) and hands it each batch; RunInference owns batching, model sharing and metrics. It works
for any variant and either side (queries or documents). Record-by-record failure isolation is a
wrapper (`with_failures_isolated`).

Beam's own Hugging Face handler does not import with transformers 5, hence our own.
"""

from __future__ import annotations

import copy
import logging
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import pyarrow as pa
import torch
from apache_beam.metrics import Metrics
from apache_beam.ml.inference.base import ModelHandler, PredictionResult

from model import (
    EncoderConfig,
    EncoderOutput,
    Side,
    TokenizedBatch,
    load_config,
    pick_device,
    text_column_for_model,
    text_for_model,
)
from model.abstention import AbstentionRule
from model.hardware import PrecisionChoice
from model.text_encoder import TextEncoder, resolve_precision
from pipelines.progress import ProgressLog
from pipelines.settings.options import ModelSettings

LOGGER = logging.getLogger(__name__)


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

    def texts_of(self, products: pa.RecordBatch) -> list[str] | None:
        """`text_of` of each product of a batch of products as validation returns them, column-wise; None
        for a variant whose text needs each record validated (`model.text_column_for_model`)."""
        column = text_column_for_model(products, self.config)
        return None if column is None else column.to_pylist()


class EncodingFailed(NamedTuple):
    """The inference of a record that failed even in a batch of its own (`with_failures_isolated`)."""

    error: str


class TextToEncode(NamedTuple):
    """One RunInference example: the record's id and the exact text the model reads."""

    key: str
    text: str


def load_text_encoder(model: ModelSettings) -> TextEncoder:
    """The `TextEncoder` of a stage's model settings, as its Beam handler loads it: for a driver that
    encodes outside Beam (the queries `--searcher auto` times, `madr search`, --tuning_queries); encode
    with `model.batch_size`."""
    return TextEncoder.load(
        model.model,
        precision=model.precision,
        runtime=model.runtime,
        device=model.device,
        chunk_size=model.chunk_size,
    )


class EncoderModelHandler(ModelHandler[TextToEncode, PredictionResult, TextEncoder]):
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
        # Per worker: the model loaded, whose forward calls it times, and when its first batch came.
        self.loaded: TextEncoder | None = None
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
        # Set where the model runs in a thread of its own (`pipelines.embed.ahead`): Beam's counters count
        # only on the thread Beam runs the DoFn on, so that thread adds these up (`batches_encoded`).
        self.counted_off_thread = False
        self.batches_encoded = 0
        # The model thread's wait for the tokenizing thread ahead of it (`pipelines.embed.ahead`).
        self.waited_for_tokens_s = 0.0

    def with_failures_isolated(self) -> EncoderModelHandler:
        """This handler (subclass and all) answering a failed batch record by record: a record that
        fails alone comes back as an `EncodingFailed` result instead of failing the bundle."""
        clone = copy.copy(self)
        clone.isolate_failures = True
        return clone

    def load_model(self) -> TextEncoder:
        if self.num_threads:
            # Process-wide, hence only on request: in a worker process it is the worker's to set.
            torch.set_num_threads(self.num_threads)
        self.progress = ProgressLog(
            f"{self.side.value} texts encoded", self.expected_total, detail=self.model_share
        )
        LOGGER.info("loading %s to encode %s texts", self.model_dir, self.side.value)
        self.loaded = TextEncoder.load(
            self.model_dir,
            precision=self.precision_choice,
            runtime=self.runtime,
            device=self.device,
            chunk_size=self.chunk_size,
            num_threads=self.num_threads,
            sides=(self.side,),
        )
        return self.loaded

    def run_inference(
        self,
        batch: Sequence[TextToEncode],
        model: TextEncoder,
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

    def encode_batch(self, batch: Sequence[TextToEncode], model: TextEncoder) -> list[PredictionResult]:
        """The batch's vectors (or `AnnotatedEmbedding`s), tokenized once and encoded in length-sorted
        chunks by the model."""
        self.count_batch(len(batch))
        texts = [example.text for example in batch]
        rule = self.abstention if self.annotate else None
        encoded = model.encode(texts, self.side, annotate_with=rule, batch_size=max(len(texts), 1))
        return [PredictionResult(example, vector) for example, vector in zip(batch, encoded, strict=True)]

    def forward_chunks(
        self, texts: Sequence[str], model: TextEncoder, tokens: TokenizedBatch | None = None
    ) -> Iterator[tuple[list[int], EncoderOutput]]:
        """`TextEncoder.forward_chunks` of this handler's side (`tokens`: the texts' `tokenize`, if done
        already), the batch counted."""
        self.count_batch(len(texts))
        return model.forward_chunks(texts, self.side, tokens)

    def count_batch(self, size: int) -> None:
        if self.counted_off_thread:
            self.batches_encoded += 1
        else:
            self.batches.inc()
        if self.first_batch_at is None:
            self.first_batch_at = time.perf_counter()
        if self.progress is not None:
            self.progress.add(size)

    def model_share(self) -> str:
        """How much of the time since the first batch the model ran: the rest, the device (a GPU, or the
        CPU's cores the model uses) waited on this process's reading, tokenizing and writing."""
        if self.first_batch_at is None or self.loaded is None:
            return ""
        elapsed = max(time.perf_counter() - self.first_batch_at, 1e-9)
        share = min(self.loaded.model_seconds / elapsed, 1.0)
        said = f"the model ran {share:.0%} of the time, it waited on this process the rest"
        if self.waited_for_tokens_s:
            said += f" ({min(self.waited_for_tokens_s / elapsed, 1.0):.0%} of the time for tokens)"
        return said

    def get_num_bytes(self, batch: Sequence[TextToEncode]) -> int:
        return sum(len(example.text.encode("utf-8")) for example in batch)

    def get_metrics_namespace(self) -> str:
        return "madr_encoder"

    def batch_elements_kwargs(self) -> dict[str, Any]:
        return dict(self._batching_kwargs)
