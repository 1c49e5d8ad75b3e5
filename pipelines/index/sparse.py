"""Build the UHD variant's inverted index from a catalog (uhd-bert §3.4, §3.7), on one machine.

UHD-BERT's buckets are sparse enough (k winners of n per token, max-pooled, Eq. 2-4) to binarize
and index like terms (§3.7): `build_inverted_index` encodes every product on the document side,
keeps each bucket's active dimensions (`UhdEncoder.sparse_buckets`, then `SparseVector.binarized`,
the `model.sparse.binarize` rule on the non-zeros) and writes an `index_builder.InvertedIndex`
artifact. With ``binary=False`` the postings keep their bucket values instead (a weighted index,
which scores Eq. 7 on the real values). `build_inverted_indexes` writes several indexes from one
encoding of the catalog. Search them with `sparse_queries` output, or with dense embeddings
through `open_index`.

This is a driver-side build: the whole catalog is read, encoded and held in one process. A Beam
build (encoding on workers, merging per-shard postings as `pipelines.index.partitioned` does for ScaNN) is out
of scope. `InvertedIndex.build` also takes the embed pipeline's dense rows (their non-zeros are the
active dims), but at the paper's sizes a row is B·n = 491,520 floats, so this driver encodes directly.
"""

from __future__ import annotations

import hashlib
import logging
import shutil
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from apache_beam.io.filesystems import FileSystems
from transformers import PreTrainedTokenizerBase

from index_builder import InvertedIndex
from model import DenseEncoder, Side, load_encoder, text_for_model
from model.sparse import SparseVector
from pipelines.index.sparse_checkpoints import EncodingCheckpoints
from pipelines.io.product_reader import SkippedProducts, valid_products
from pipelines.progress import ProgressLog
from pipelines.storage.local_copies import local_output
from pipelines.storage.staged_output import is_local
from pipelines.storage.verify import model_fingerprint, verify_model

LOGGER = logging.getLogger(__name__)


def require_sparse(encoder: DenseEncoder, source: str | Path) -> None:
    """Refuse a model without sparse buckets: only they can be binarized into postings.

    Checked by capability, not by variant name, so a future sparse variant is accepted as is.
    """
    if not callable(getattr(encoder, "sparse_buckets", None)):
        raise ValueError(
            f"{source} holds a {encoder.config.variant!r} model, which has no sparse buckets "
            f"(`sparse_buckets`); an inverted index needs a UHD model (train one with --variant uhd)"
        )


def encode_sparse(
    encoder: DenseEncoder,
    tokenizer: PreTrainedTokenizerBase,
    texts: Sequence[str],
    side: Side,
    batch_size: int = 64,
    binary: bool = True,
    progress: ProgressLog | None = None,
) -> list[list[SparseVector]]:
    """Per text, per bucket, the active dimensions: binarized (§3.7) or with their bucket values.

    Texts are encoded in length-sorted batches (less padding) and returned in input order. A
    binary query scores by counting shared winners (§3.4); ``binary=False`` keeps the query's
    weights, so `InvertedIndex.search` computes Eq. 7 against the binarized documents.
    ``progress`` counts each batch's texts (a catalog takes hours on CPU).
    """
    require_sparse(encoder, "the encoder")
    if batch_size < 1:
        raise ValueError(f"batch_size must be positive, got {batch_size}")
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    vectors: list[list[SparseVector]] = [[] for _ in texts]
    for start in range(0, len(order), batch_size):
        chosen = order[start : start + batch_size]
        output = encoder.embed_texts(tokenizer, [texts[i] for i in chosen], side)
        for i, buckets in zip(chosen, encoder.sparse_buckets(output), strict=True):
            vectors[i] = [bucket.binarized() for bucket in buckets] if binary else buckets
        if progress is not None:
            progress.add(len(chosen))
    return vectors


def sparse_queries(
    encoder: DenseEncoder,
    tokenizer: PreTrainedTokenizerBase,
    texts: Sequence[str],
    batch_size: int = 64,
    binary: bool = True,
) -> list[list[SparseVector]]:
    """Query-side `encode_sparse`: what `InvertedIndex.search` takes."""
    return encode_sparse(encoder, tokenizer, texts, Side.QUERY, batch_size, binary)


def read_products(products_pattern: str) -> tuple[list[dict[str, Any]], int]:
    """Valid products of every Parquet file matching the pattern (local or gs://), and the skip count.

    Invalid records and repeated product ids are skipped with a warning rather than failing the
    build (the embed pipeline dead-letters them the same way); an index needs unique ids.
    """
    products: dict[str, dict[str, Any]] = {}
    skipped = SkippedProducts()
    for product in valid_products(products_pattern, skipped):
        if product["product_id"] in products:
            LOGGER.warning("skipping repeated product id %r", product["product_id"])
            skipped.add(f"repeated product id {product['product_id']!r}")
            continue
        products[product["product_id"]] = product
    if skipped.count:
        LOGGER.warning("%s", skipped.describe())
    return list(products.values()), skipped.count


def build_inverted_index(
    model_dir: str | Path,
    products_pattern: str,
    out: str | Path,
    batch_size: int = 64,
    device: str | None = None,
    binary: bool = True,
    verify: bool = True,
    checkpoints: str | Path | None = None,
) -> InvertedIndex:
    """Encode a catalog with a UHD model and save an inverted index of its buckets at ``out``.

    Args:
        model_dir: a saved model directory; its model must have sparse buckets (UHD).
        products_pattern: Parquet files with `schemas.PRODUCT_SCHEMA` rows.
        out: a new or empty directory for the artifact, local or gs:// (manifest written last).
        batch_size: products per forward pass.
        device: torch device; the GPU when there is one by default.
        binary: binarize the documents (§3.7); False keeps each posting's bucket value.
        verify: check the model directory against its manifest first (`pipelines.storage.verify`); False
            (--no_verify) loads it unchecked, with a warning.
        checkpoints: a local folder that keeps each finished chunk of the encoding, so that the same
            build run again after a crash encodes only what is left
            (`pipelines.index.sparse_checkpoints`); removed once the index is saved. None: no
            checkpoints.

    Returns:
        The index, with its `manifest` set.
    """
    verify_model(str(model_dir), verify)
    targets = [(out, binary)]
    return build_inverted_indexes(model_dir, products_pattern, targets, batch_size, device, checkpoints)[0]


def _require_new(out: str) -> None:
    """Refuse an output that exists with files in it (local or gs://): an index is never merged into one."""
    if is_local(out):
        if Path(out).exists() and (not Path(out).is_dir() or any(Path(out).iterdir())):
            raise FileExistsError(f"{out} exists and is not an empty directory; choose a new path")
    elif FileSystems.match([FileSystems.join(out, "**")])[0].metadata_list:
        raise FileExistsError(f"{out} already holds objects; choose a new path")


def default_checkpoints(out: str) -> str:
    """Where `madr build-sparse-index` keeps its encoding's chunks by default: beside a local output; for
    a gs:// one, in a local folder named after it (the chunks are read back in this process only)."""
    if is_local(out):
        return f"{out.rstrip('/')}.checkpoints"
    digest = hashlib.sha256(out.encode()).hexdigest()[:16]
    return str(Path(tempfile.gettempdir()) / f"madr-sparse-checkpoints-{digest}")


def build_inverted_indexes(
    model_dir: str | Path,
    products_pattern: str,
    outs: Sequence[tuple[str | Path, bool]],
    batch_size: int = 64,
    device: str | None = None,
    checkpoints: str | Path | None = None,
) -> list[InvertedIndex]:
    """`build_inverted_index` for several (out, binary) targets, encoding the catalog once.

    Encoding dominates the cost (every product through the backbone and B WTA layers), so a
    binarized and a weighted index of the same model share it.
    """
    encoder, tokenizer = load_encoder(model_dir, device)
    require_sparse(encoder, model_dir)
    for out, _ in outs:
        _require_new(str(out))
    started = time.perf_counter()
    products, skipped = read_products(products_pattern)
    if not products:
        raise ValueError(f"{products_pattern!r} holds no valid products ({skipped} skipped)")
    texts = [text_for_model(product, encoder.config) for product in products]
    binary_only = all(binary for _, binary in outs)

    progress = ProgressLog("catalog texts encoded (sparse)", total=len(texts))

    def encode(chunk: Sequence[str]) -> list[list[SparseVector]]:
        return encode_sparse(encoder, tokenizer, chunk, Side.DOCUMENT, batch_size, binary_only, progress)

    fingerprint = model_fingerprint(str(model_dir))
    if checkpoints is None:
        documents = encode(texts)
    else:
        kept = EncodingCheckpoints(checkpoints, fingerprint)
        documents = kept.encode(texts, f"{Side.DOCUMENT.value} binary={binary_only}", encode, progress)
    encoded = time.perf_counter()
    buckets = len(documents[0])
    # Every variant's embedding is the B buckets concatenated, so its width gives n without asking
    # for variant-specific config fields.
    width = encoder.config.projection_dim
    dimensions, remainder = divmod(width, buckets)
    if remainder:
        raise ValueError(f"projection_dim {width} is not a multiple of {buckets} buckets")
    ids = [product["product_id"] for product in products]
    extra = {
        "products": str(products_pattern),
        "products_indexed": len(ids),
        "products_skipped": skipped,
        "winners": getattr(encoder, "winners", None),
        "max_document_length": encoder.config.max_document_length,
        "encode_seconds": round(encoded - started, 3),
        # The model that made it: its evaluation refuses it with another (`pipelines.storage.verify`).
        "model_fingerprint": fingerprint,
    }
    indexes = []
    for out, binary in outs:
        index = InvertedIndex.build(documents, ids, buckets=buckets, dimensions=dimensions, binary=binary)
        # A gs:// output is saved in a local folder, then copied there, manifest last (`local_output`).
        with local_output(str(out)) as folder:
            index.save(folder, encoder.config.model_id, encoder.config.model_version, extra=extra)
        indexes.append(index)
        LOGGER.info("indexed %d products (%d skipped) into %s: %s", len(ids), skipped, out, index)
    if checkpoints is not None:
        shutil.rmtree(checkpoints, ignore_errors=True)  # every index is saved: nothing left to resume
    LOGGER.info("encode %.1fs, build + save %.1fs", encoded - started, time.perf_counter() - encoded)
    return indexes
