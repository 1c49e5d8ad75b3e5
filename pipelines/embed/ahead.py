"""The model a batch ahead of the stage's own work, its texts tokenized ahead of it: what keeps a GPU busy.

RunInference calls the model on each batch in turn on the thread Beam runs the stage on, so while Beam
reads, validates, plans, tokenizes, builds the rows and writes them, the device waits, and while the
device runs, those wait: on an H100 the embed stage ran at ~2,000 products/s at every precision, bound
by that CPU work. `EncodeAhead` runs the work in three threads, each on its own batch:

- Beam's thread reads, validates and plans batch i + 2, and builds and writes batch i's rows;
- a tokenizing thread tokenizes batch i + 2 (`ProductBatchHandler.tokenize`);
- the model's thread runs batch i + 1 (the forward passes, the annotations), its tokens ready.

torch, ONNX Runtime and the Rust tokenizer release the GIL while they work, so the threads overlap
wherever the work is not Python's. The progress line says how much of the time the model ran, and how
much of its waiting was for tokens (`EncoderModelHandler.model_share`).

Same handler, same outputs, order and dead letters as RunInference's path (`ProductBatchHandler`): a
batch whose tokenizing fails is encoded again on the model's thread, where a failing record is isolated
as before. The model is loaded once per process (Beam's `Shared`, as RunInference does). `--encode_ahead
auto` turns it on where the model runs on a GPU; on a CPU the model's own threads already use the cores.
"""

from __future__ import annotations

import collections
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Protocol

import apache_beam as beam
from apache_beam.ml.inference.base import PredictionResult
from apache_beam.utils.shared import Shared
from apache_beam.utils.windowed_value import WindowedValue

from model.text_encoder import TextEncoder

# Batches in flight beyond the one being written: one keeps the device fed while Beam's thread writes.
DEFAULT_DEPTH = 1


class BatchHandler(Protocol):
    """What `EncodeAhead` needs of its handler (`pipelines.embed.batches.ProductBatchHandler`, whose
    `EmbedBatches` runs this DoFn): the model loaded, a batch encoded with it, and its model calls
    counted (`batches`, a Beam counter, on Beam's thread; `counted_off_thread` set, so the handler does not
    touch Beam's counters on the model's thread)."""

    counted_off_thread: bool
    batches_encoded: int
    batches: Any
    waited_for_tokens_s: float

    def load_model(self) -> TextEncoder: ...

    def tokenize(self, products: Any, model: TextEncoder) -> Any: ...

    def encode_products(self, products: Any, model: TextEncoder, tokens: Any = None) -> Any: ...


class _LoadedModel:
    """The process's model (a weak-referenceable holder, as `Shared` needs)."""

    def __init__(self, model: TextEncoder) -> None:
        self.model = model


class EncodeAhead(beam.DoFn):
    """A batch -> PredictionResult(batch, its encoding), as RunInference(handler) gives, with the model in
    its own thread `depth` batches ahead of Beam's."""

    def __init__(self, handler: BatchHandler, depth: int = DEFAULT_DEPTH) -> None:
        if depth < 1:
            raise ValueError(f"depth must be at least 1, got {depth}")
        self.handler = handler
        self.depth = depth
        self._shared = Shared()

    def setup(self) -> None:
        self.handler.counted_off_thread = True
        self._model = self._shared.acquire(lambda: _LoadedModel(self.handler.load_model()), tag="encoder")
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="madr-encode")
        self._tokenizer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="madr-tokenize")

    def start_bundle(self) -> None:
        self._pending: collections.deque[tuple[Future, Any, Any]] = collections.deque()

    def process(
        self,
        products: Any,
        window: Any = beam.DoFn.WindowParam,
        timestamp: Any = beam.DoFn.TimestampParam,
    ) -> Iterator[WindowedValue]:
        tokens = self._tokenizer.submit(self.handler.tokenize, products, self._model.model)
        encoded = self._worker.submit(self._encode, products, tokens)
        self._pending.append((encoded, products, (timestamp, window)))
        while len(self._pending) > self.depth:
            yield self._done(*self._pending.popleft())

    def finish_bundle(self) -> Iterator[WindowedValue]:
        while self._pending:
            yield self._done(*self._pending.popleft())

    def teardown(self) -> None:
        for name in ("_tokenizer", "_worker"):
            pool = getattr(self, name, None)
            if pool is not None:
                pool.shutdown(wait=True, cancel_futures=True)

    def _encode(self, products: Any, tokens: Future) -> tuple[Any, int]:
        """On the model's thread: the batch encoded from its tokens, and how many model calls it took (a
        batch that failed is retried record by record)."""
        waiting = time.perf_counter()
        try:
            tokenized = tokens.result()
        except Exception:
            tokenized = None  # tokenized again by the model's thread, where a failing record is isolated
        self.handler.waited_for_tokens_s += time.perf_counter() - waiting
        before = self.handler.batches_encoded
        encoded = self.handler.encode_products(products, self._model.model, tokenized)
        return encoded, self.handler.batches_encoded - before

    def _done(self, future: Future, products: Any, where: tuple[Any, Any]) -> WindowedValue:
        """On Beam's thread: the batch's result once the model has it (its error, raised here, fails the
        bundle as RunInference's would), its model calls counted."""
        encoded, calls = future.result()
        self.handler.batches.inc(calls)
        timestamp, window = where
        return WindowedValue(PredictionResult(products, encoded), timestamp, [window])


__all__ = ["DEFAULT_DEPTH", "BatchHandler", "EncodeAhead"]
