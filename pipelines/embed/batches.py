"""Products through inference and into Parquet a batch at a time, as Arrow columns.

The plan (`pipelines.embed.incremental`) hands on one `ProductBatch` of up to --batch_size products
rather than one element per product: Beam's cost per element (a few µs for each step it crosses, plus
RunInference's batching) is then paid once per batch, and so are the model call, the annotations
(`model.annotations.ColumnAnnotator`) and the building of the rows, which leave as one Arrow table in
the embedding schema. At one element per product those costs, not the model, were most of the embed
stage's time on a small model (bench.embed_stage_cost), and they are what keeps a GPU waiting.

A batch that raises is retried record by record; only a record that fails alone, or whose vector is
non-finite or all zeros (`embedding_defect`), becomes a dead letter, the rest of its batch is written.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple

import apache_beam as beam
import numpy as np
import pyarrow as pa
import torch
from apache_beam import pvalue
from apache_beam.metrics import Metrics
from apache_beam.ml.inference.base import PredictionResult, RunInference
from apache_beam.transforms.window import GlobalWindows
from apache_beam.utils.windowed_value import WindowedValue

from model import TokenizedBatch, content_hash
from model.annotations import ANNOTATION_COLUMNS, ColumnAnnotator
from model.text_encoder import TextEncoder
from pipelines.embed.ahead import EncodeAhead
from pipelines.inference import EncoderModelHandler, ModelIdentity
from pipelines.io.catalog_io import DEAD_LETTERS, METRICS_NAMESPACE, dead_letter
from schemas import embedding_schema

ROWS = "rows"


class ProductBatch(NamedTuple):
    """Products to embed together: their ids, the exact texts the model reads, and those texts' hashes."""

    keys: list[str]
    texts: list[str]
    hashes: list[str]


class EncodedBatch(NamedTuple):
    """A `ProductBatch`'s inference: its vectors in the batch's order, its annotation columns (None without
    `annotate`), and, for each record that failed even alone, its row and the error."""

    embeddings: np.ndarray
    annotations: dict[str, pa.Array] | None
    failures: dict[int, str]


class ProductBatcher:
    """Gathers products into `ProductBatch`es of `size`: `add` gives a full one, `flush` the rest."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.pending = ProductBatch([], [], [])

    def add(self, key: str, text: str, digest: str) -> ProductBatch | None:
        self.pending.keys.append(key)
        self.pending.texts.append(text)
        self.pending.hashes.append(digest)
        return self.flush() if len(self.pending.keys) >= self.size else None

    def extend(self, keys: list[str], texts: list[str], hashes: list[str]) -> Iterator[ProductBatch]:
        """`add` of each product in turn: the batches filled on the way."""
        while keys:
            room = self.size - len(self.pending.keys)
            self.pending.keys.extend(keys[:room])
            self.pending.texts.extend(texts[:room])
            self.pending.hashes.extend(hashes[:room])
            keys, texts, hashes = keys[room:], texts[room:], hashes[room:]
            if len(self.pending.keys) >= self.size:
                yield self.flush()

    def flush(self) -> ProductBatch | None:
        gathered, self.pending = self.pending, ProductBatch([], [], [])
        return gathered if gathered.keys else None


class GatherProducts(beam.DoFn):
    """Validated product records -> `ProductBatch`es of `size` (the last of a bundle smaller)."""

    def __init__(self, identity: ModelIdentity, size: int) -> None:
        self.identity = identity
        self.size = size

    def start_bundle(self) -> None:
        self.batcher = ProductBatcher(self.size)

    def process(self, product: dict[str, Any]) -> Iterator[ProductBatch]:
        text = self.identity.text_of(product)
        full = self.batcher.add(product["product_id"], text, content_hash(text))
        if full:
            yield full

    def finish_bundle(self) -> Iterator[WindowedValue]:
        rest = self.batcher.flush()
        if rest:
            yield GlobalWindows.windowed_value(rest)


def embedding_defect(vector: np.ndarray) -> str | None:
    """Why a vector must not be written, or None for a usable one.

    A damaged model does not raise: one with a byte of its weights flipped was seen to write all-zero
    vectors and exit 0, and exact search and the Vertex export take such rows as they are. Non-finite
    values poison every dot product they enter. Both are caught here, per vector, as dead letters.
    """
    finite = np.isfinite(vector)
    if not finite.all():
        return (
            f"invalid embedding: {int(vector.size - finite.sum())} of {vector.size} values are not finite "
            "(NaN or infinity); is the model damaged?"
        )
    if not vector.any():
        return "invalid embedding: every value is zero; is the model damaged?"
    return None


def _merged(outputs: Sequence[Any], order: np.ndarray) -> Any:
    """The chunks' outputs as one output on the CPU, rows back in the batch's order (`order`: each
    batch row's position among the concatenated chunk rows)."""
    first = outputs[0]
    index = torch.from_numpy(order)

    def joined(tensors: list[torch.Tensor]) -> torch.Tensor:
        return torch.cat([t.cpu() for t in tensors])[index]

    fields: dict[str, Any] = {"embedding": joined([o.embedding for o in outputs])}
    fields["aspect_logits"] = {a: joined([o.aspect_logits[a] for o in outputs]) for a in first.aspect_logits}
    for name in ("presence_logits", "fusion_weights"):
        if getattr(first, name) is not None:
            fields[name] = joined([getattr(o, name) for o in outputs])
    return type(first)(**fields, fusion_slots=first.fusion_slots)


class ProductBatchHandler(EncoderModelHandler):
    """`EncoderModelHandler` over `ProductBatch` examples, one per inference call (each is a batch
    already): -> `EncodedBatch`, annotations as Arrow columns when `annotate`."""

    def batch_elements_kwargs(self) -> dict[str, Any]:
        return {"min_batch_size": 1, "max_batch_size": 1}

    def load_model(self) -> TextEncoder:
        loaded = super().load_model()
        # Python's cyclic collector scans every tracked object at each full collection: with torch,
        # transformers, Beam and the model loaded, a few of those cost 0.29 s over 10,000 products, about
        # 30 us a product (a negligible model). Frozen, the objects alive now are left out of those scans
        # (they are still freed when no longer referenced); once a process, after one collection, so
        # garbage of before is not kept.
        if gc.get_freeze_count() == 0:
            gc.collect()
            gc.freeze()
        return loaded

    def get_num_bytes(self, batch: Sequence[ProductBatch]) -> int:  # type: ignore[override]
        return sum(len(text.encode("utf-8")) for products in batch for text in products.texts)

    def run_inference(  # type: ignore[override]
        self,
        batch: Sequence[ProductBatch],
        model: TextEncoder,
        inference_args: dict[str, Any] | None = None,
    ) -> list[PredictionResult]:
        return [PredictionResult(products, self.encode_products(products, model)) for products in batch]

    def tokenize(self, products: ProductBatch, model: TextEncoder) -> TokenizedBatch:
        """The batch's texts tokenized (`TextEncoder.tokenize`), for `encode_products`' `tokens`."""
        return model.tokenize(products.texts, self.side)

    def encode_products(
        self, products: ProductBatch, model: TextEncoder, tokens: TokenizedBatch | None = None
    ) -> EncodedBatch:
        """The batch encoded (`tokens`: its `tokenize`, if done already); a batch that fails, record by
        record where failures are isolated."""
        try:
            return self.encode_texts(products.texts, model, tokens)
        except Exception as error:
            if not self.isolate_failures:
                raise
            if len(products.texts) == 1:
                return EncodedBatch(np.zeros((1, 0), np.float32), None, {0: repr(error)})
        # Whatever broke the batch, find the records it was: each alone, the failures kept by row.
        parts = [
            self.encode_products(ProductBatch([k], [t], [h]), model)
            for k, t, h in zip(*products, strict=True)
        ]
        dimension = max((part.embeddings.shape[1] for part in parts), default=0)
        vectors = np.zeros((len(parts), dimension), dtype=np.float32)
        failures: dict[int, str] = {}
        for row, part in enumerate(parts):
            if part.failures:
                failures[row] = part.failures[0]
            else:
                vectors[row] = part.embeddings[0]
        good = [part.annotations for part in parts if not part.failures and part.annotations]
        annotations = None
        if good:  # a failed row's annotations: null; it is dead-lettered anyway
            template = {name: pa.nulls(1, good[0][name].type) for name in ANNOTATION_COLUMNS}
            annotations = {
                name: pa.concat_arrays([(part.annotations or template)[name] for part in parts])
                for name in ANNOTATION_COLUMNS
            }
        return EncodedBatch(vectors, annotations, failures)

    def encode_texts(
        self, texts: list[str], model: TextEncoder, tokens: TokenizedBatch | None = None
    ) -> EncodedBatch:
        """`texts` encoded (and annotated) together, in length-sorted chunks; raises if any chunk does."""
        chunks, outputs = [], []
        for chunk, output in self.forward_chunks(texts, model, tokens):
            chunks.append(chunk)
            outputs.append(output)
        order = np.empty(len(texts), dtype=np.int64)
        order[np.concatenate(chunks)] = np.arange(len(texts))
        started = time.perf_counter()
        output = _merged(outputs, order)  # on a GPU, where the CPU waits for the device's last chunk
        model.model_seconds += time.perf_counter() - started
        vectors = output.embedding.to(torch.float32).numpy()
        annotations = None
        if self.annotate:
            if model.annotator is None:
                model.annotator = ColumnAnnotator(model.encoder, self.abstention)
            annotations = model.annotator(output, texts)
        return EncodedBatch(vectors, annotations, {})


class _ToEmbeddingTable(beam.DoFn):
    """(ProductBatch, EncodedBatch) -> one Arrow table of its embedding rows; a record that failed alone,
    or whose vector is non-finite or all zeros -> `dead_letters`."""

    def __init__(self, identity: ModelIdentity) -> None:
        self.identity = identity
        self.schema = embedding_schema(identity.dimension)
        self.embedded = Metrics.counter(METRICS_NAMESPACE, "products_embedded")
        self.rejected = Metrics.counter(METRICS_NAMESPACE, "products_dead_lettered")
        self.invalid = Metrics.counter(METRICS_NAMESPACE, "embeddings_invalid")

    def process(self, result: PredictionResult) -> Iterator[Any]:
        products: ProductBatch = result.example
        encoded: EncodedBatch = result.inference
        vectors = encoded.embeddings
        usable = np.ones(len(products.keys), dtype=bool)
        for row, error in encoded.failures.items():
            usable[row] = False
            yield self._dead_letter(products, row, f"inference failed: {error}")
        checked = vectors[usable] if encoded.failures else vectors
        # Every vector checked at once; only a defective one is looked at row by row.
        suspect = ~(np.isfinite(checked).all(axis=1) & checked.any(axis=1))
        for row in np.flatnonzero(usable)[suspect]:
            usable[row] = False
            self.invalid.inc()
            yield self._dead_letter(products, int(row), embedding_defect(vectors[row]) or "invalid embedding")
        kept = int(usable.sum())
        if not kept:
            return
        self.embedded.inc(kept)
        take = pa.array(np.flatnonzero(usable))
        vectors = np.ascontiguousarray(vectors[usable], dtype=np.float32)
        embedding = pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), self.identity.dimension)
        annotations = encoded.annotations or {
            name: pa.nulls(len(products.keys), self.schema.field(name).type) for name in ANNOTATION_COLUMNS
        }
        columns = {
            "product_id": pa.array(products.keys, pa.string()).take(take),
            "embedding": embedding,
            "model_id": pa.array([self.identity.model_id] * kept, pa.string()),
            "model_version": pa.array([self.identity.model_version] * kept, pa.string()),
            "content_hash": pa.array(products.hashes, pa.string()).take(take),
            **{name: annotations[name].take(take) for name in ANNOTATION_COLUMNS},
        }
        yield pa.Table.from_arrays([columns[field.name] for field in self.schema], schema=self.schema)

    def _dead_letter(self, products: ProductBatch, row: int, reason: str) -> pvalue.TaggedOutput:
        self.rejected.inc()
        key = products.keys[row]
        record = {"product_id": key, "text": products.texts[row]}
        return pvalue.TaggedOutput(DEAD_LETTERS, dead_letter("embed", record, reason, key))


class EmbedBatches(beam.PTransform):
    """ProductBatch -> {"rows": Arrow tables of embedding rows, "dead_letters": products that cannot be
    embedded}. Both leave one ParDo, so the tables flow on to the writer unmerged."""

    def __init__(self, handler: ProductBatchHandler, identity: ModelIdentity, ahead: bool = False) -> None:
        super().__init__()
        self.handler = handler.with_failures_isolated()
        self.identity = identity
        self.ahead = ahead  # the model in a thread of its own a batch ahead (`pipelines.embed.ahead`)

    def expand(self, batches: beam.PCollection) -> dict[str, beam.PCollection]:
        if self.ahead:
            results = batches | "EncodeAhead" >> beam.ParDo(EncodeAhead(self.handler))
        else:
            results = batches | "Encode" >> RunInference(self.handler)
        tables = results | "ToTables" >> beam.ParDo(_ToEmbeddingTable(self.identity)).with_outputs(
            DEAD_LETTERS, main=ROWS
        )
        return {ROWS: tables[ROWS], DEAD_LETTERS: tables[DEAD_LETTERS]}
