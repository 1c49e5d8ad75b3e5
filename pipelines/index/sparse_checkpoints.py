"""Resumable encoding for the driver-side inverted-index build (`pipelines.index.sparse`).

Encoding a catalog with a UHD model is the build's whole cost (about 85 products/s on 2 CPU cores, so
an hour and a half for 500,000 products), and the build holds it in one process: a crash, a pre-empted
machine or a session's end at 90 % used to lose all of it. With checkpoints, the catalog is encoded in
chunks of `chunk_size` texts and each chunk's sparse vectors are kept on disk as they finish; the same
build run again loads the finished chunks and encodes only the rest.

A chunk's file is named by a digest of what it encodes (the model's fingerprint, the side, binary or
weighted, and the chunk's texts in order), so a chunk made by another model, or over texts that changed,
is never loaded: it is encoded again under its own name. A chunk is written to a temporary name and
renamed, so a crash mid-write leaves nothing that loads.
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from model.sparse import SparseVector
from pipelines.progress import ProgressLog

LOGGER = logging.getLogger(__name__)
CHUNK_TEXTS = 8_192  # about 1.5 minutes of UHD encoding on 2 CPU cores: little is lost to a crash

EncodeChunk = Callable[[Sequence[str]], list[list[SparseVector]]]


def save_chunk(path: Path, vectors: list[list[SparseVector]]) -> None:
    """Per text, per bucket, (indices, values), flattened into three arrays; atomically."""
    buckets = len(vectors[0]) if vectors else 0
    flat = [bucket for text in vectors for bucket in text]
    lengths = np.array([len(bucket.indices) for bucket in flat], dtype=np.int64)
    indices = np.concatenate([b.indices for b in flat]) if flat else np.zeros(0, np.int64)
    values = np.concatenate([b.values for b in flat]) if flat else np.zeros(0, np.float32)
    partial = path.with_name(path.name + ".partial")
    with partial.open("wb") as handle:
        np.savez(handle, buckets=np.array([buckets]), lengths=lengths, indices=indices, values=values)
    os.replace(partial, path)


def load_chunk(path: Path) -> list[list[SparseVector]]:
    with np.load(path) as stored:
        buckets = int(stored["buckets"][0])
        lengths, indices, values = stored["lengths"], stored["indices"], stored["values"]
    bounds = np.cumsum(lengths)[:-1]
    flat = [
        SparseVector(dims, found)
        for dims, found in zip(np.split(indices, bounds), np.split(values, bounds), strict=True)
    ]
    return [flat[start : start + buckets] for start in range(0, len(flat), buckets)] if buckets else []


class EncodingCheckpoints:
    """The finished chunks of one catalog's encoding, kept in `folder`.

    Args:
        folder: where the chunks go (created when first needed); delete it to start afresh.
        model_key: what identifies the model, e.g. `pipelines.storage.verify.model_fingerprint`.
        chunk_size: texts per chunk.
    """

    def __init__(self, folder: str | Path, model_key: str, chunk_size: int = CHUNK_TEXTS) -> None:
        if chunk_size < 1:
            raise ValueError(f"chunk_size must be positive, got {chunk_size}")
        self.folder, self.model_key, self.chunk_size = Path(folder), model_key, chunk_size

    def chunk_path(self, texts: Sequence[str], what: str) -> Path:
        digest = hashlib.sha256(f"{self.model_key}\0{what}".encode())
        for text in texts:
            digest.update(text.encode() + b"\0")
        return self.folder / f"chunk-{digest.hexdigest()[:24]}.npz"

    def encode(
        self,
        texts: Sequence[str],
        what: str,
        encode_chunk: EncodeChunk,
        progress: ProgressLog | None = None,
    ) -> list[list[SparseVector]]:
        """Every text's vectors, in order: finished chunks loaded, the others encoded and kept.

        `what` names the encoding beyond the model (side, binary or not); `encode_chunk` encodes a
        list of texts as `pipelines.index.sparse.encode_sparse` does, counting them into `progress`;
        the finished chunks read back are taken out of its total, so they do not pace its ETA.
        """
        self.folder.mkdir(parents=True, exist_ok=True)
        vectors: list[list[SparseVector]] = []
        reused = 0
        for start in range(0, len(texts), self.chunk_size):
            chunk = texts[start : start + self.chunk_size]
            path = self.chunk_path(chunk, what)
            if path.is_file():
                vectors.extend(load_chunk(path))
                if progress is not None:
                    progress.skip(len(chunk))
                reused += len(chunk)
                continue
            encoded = encode_chunk(chunk)
            save_chunk(path, encoded)
            vectors.extend(encoded)
        LOGGER.info(
            "%d texts: %d encoded, %d read back from finished chunks in %s",
            len(texts),
            len(texts) - reused,
            reused,
            self.folder,
        )
        return vectors
