"""An inverted index over UHD sparse vectors (uhd-bert §3.4, §3.7), binarized or weighted: an artifact.

A text is B buckets of n dimensions with few winners each (WTA, Eq. 2-4); binarized (§3.7), a
document is just its set of active (bucket, dim) pairs. Relevance is the sum of bucket-wise dot
products (Eq. 7), Rel(q, d) = Σ_j B_q^j · B_d^j: for a binary document, the sum of the query's
weights over the pairs it shares. A weighted index (``binary=False``) also keeps each posting's
bucket value, so it scores Eq. 7 on the real values ("only the non-zero dimensions of a document
enter the inverted index with their weights", §3.7). Either way a query reads only the posting
lists of its own active dimensions and adds their (products of) weights into per-document
accumulators with one bincount (§3.1: weak signals cost nothing); accumulators and top-k are a
dense O(num_docs) array per query, which in numpy beats any per-candidate structure. Term
t = bucket·n + dim is the column of the concatenated vector (`UhdOutput.embedding`'s layout; its
1/sqrt(B) scale does not change the ranking).

Layout, under `artifact`'s rules (manifest written LAST with every file's sha256 and size, verified
on load; arrays read with allow_pickle=False, so an altered file can never run code)::

    <dir>/manifest.json   format "madr-inverted-index" v1 (binarized) or v2 (weighted)
    <dir>/ids.parquet     product_id; row i is document i
    <dir>/indptr.npy      int64 [B·n + 1]: term t's postings are docs[indptr[t]:indptr[t + 1]]
    <dir>/docs.npy        int32 (int64 past 2^31 documents) [nnz]: ascending rows within each term
    <dir>/values.npy      float32 [nnz], weighted indexes only: the bucket value of each posting

A binarized index is still written as v1, so readers that predate weighted indexes keep reading it;
a weighted one is v2, which they refuse rather than silently scoring it as binary.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path, PurePosixPath
from typing import Any

import numpy as np

from index_builder import artifact
from index_builder.artifact import IDS_FILE, IndexArtifactError
from index_builder.exact import ExactSearcher
from index_builder.searcher import CorpusRows, SearchResult, effective_k, make_result
from index_builder.sparse_rows import SparseRows, csr_rows, densify, indptr_of, top_k_rows
from schemas.manifest import (
    MANIFEST_FILE,
    ArtifactError,
    FileEntry,
    file_entries,
    manifest_document,
    manifest_json,
    parse_manifest,
)

INVERTED_FORMAT = "madr-inverted-index"
INVERTED_FORMAT_VERSION = 1  # binarized documents
WEIGHTED_FORMAT_VERSION = 2  # documents keep their bucket values (values.npy)
INDPTR_FILE, DOCS_FILE, VALUES_FILE = "indptr.npy", "docs.npy", "values.npy"
REBUILD_HINT = "rebuild it with `pipelines.index.sparse.build_inverted_index`"
# Per (query, document) cell of a block: 8-byte accumulator, float32 score and its negation, argpartition's
# int64 index, and ~8 bytes of gathered postings (a query touches ~q_terms·k/n ≈ 0.5 postings per document).
_BLOCK_BYTES = 256 * 1024 * 1024
_BYTES_PER_CELL = 32


def _check_ids(ids: Sequence[str]) -> np.ndarray:
    id_array = np.asarray([ids] if isinstance(ids, str) else list(ids), dtype=object)
    if not all(isinstance(i, str) and i for i in id_array) or len(set(id_array.tolist())) != len(id_array):
        raise ValueError("ids must be unique, non-empty strings: every product appears once in an index")
    return id_array


def _postings_problem(indptr: np.ndarray, docs: np.ndarray, terms: int, count: int) -> tuple[str, str] | None:
    """(file, defect) if the CSR arrays are not a valid index of ``count`` documents, else None."""
    if indptr.dtype != np.int64 or indptr.shape != (terms + 1,):
        return INDPTR_FILE, f"must be int64 of shape ({terms + 1},), got {indptr.dtype} {indptr.shape}"
    if indptr[0] != 0 or indptr[-1] != docs.size or (np.diff(indptr) < 0).any():
        return INDPTR_FILE, f"must rise from 0 to {docs.size} (the postings count)"
    if docs.ndim != 1 or docs.dtype not in (np.int32, np.int64):
        return DOCS_FILE, f"must be a 1-D int32/int64 array, got {docs.dtype} {docs.shape}"
    if docs.size and (docs.min() < 0 or docs.max() >= count):
        return DOCS_FILE, f"holds document rows outside [0, {count})"
    starts = np.zeros(docs.size, dtype=bool)
    starts[indptr[:-1][indptr[:-1] < docs.size]] = True
    if ((np.diff(docs) <= 0) & ~starts[1:]).any():
        return DOCS_FILE, "has a posting list that is not strictly ascending"
    return None


def _values_problem(values: np.ndarray | None, nnz: int) -> tuple[str, str] | None:
    """(file, defect) if a weighted index's posting values do not fit its postings, else None."""
    if values is None:
        return None
    if values.dtype != np.float32 or values.shape != (nnz,):
        return VALUES_FILE, f"must be float32 of shape ({nnz},), got {values.dtype} {values.shape}"
    if not np.isfinite(values).all():
        return VALUES_FILE, "holds NaN or infinite values"
    return None


@dataclass(frozen=True, kw_only=True)
class InvertedManifest:
    """What an inverted index holds; its JSON adds ``dimension`` = buckets × dimensions (embedding width)."""

    model_id: str
    model_version: str
    buckets: int
    dimensions: int
    count: int
    nnz: int
    files: dict[str, FileEntry]
    binary: bool = True
    created_at: str = field(default_factory=lambda: datetime.now(timezone.utc).isoformat(timespec="seconds"))
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> str:
        """The manifest as written (`schemas.manifest.manifest_document`, with "format" beside "kind")."""
        info = {
            "format": INVERTED_FORMAT,
            "format_version": INVERTED_FORMAT_VERSION if self.binary else WEIGHTED_FORMAT_VERSION,
            "binary": self.binary,
            "model_id": self.model_id,
            "model_version": self.model_version,
            "buckets": self.buckets,
            "dimensions": self.dimensions,
            "dimension": self.buckets * self.dimensions,
            "count": self.count,
            "nnz": self.nnz,
            "extra": self.extra,
        }
        return manifest_json(manifest_document(INVERTED_FORMAT, info, self.files, self.created_at))

    @classmethod
    def from_json(cls, text: str, source: Path) -> InvertedManifest:
        """Parse and check; every defect is an IndexArtifactError naming ``source``."""
        try:
            data = parse_manifest(text, str(source), REBUILD_HINT)
            found = (data.get("format"), data.get("format_version"))
            binary = found[1] == INVERTED_FORMAT_VERSION
            versions = (INVERTED_FORMAT_VERSION, WEIGHTED_FORMAT_VERSION)
            if found[0] != INVERTED_FORMAT or found[1] not in versions:
                raise ValueError(f"format is {found}, expected {INVERTED_FORMAT!r} v1 or v2")
            if data.get("binary", True) is not binary:
                raise ValueError(f"binary is {data.get('binary')!r} in a v{found[1]} index")
            manifest = cls(
                **{key: str(data[key]) for key in ("model_id", "model_version", "created_at")},
                **{key: int(data[key]) for key in ("buckets", "dimensions", "count", "nnz")},
                files=file_entries(data),
                extra=dict(data.get("extra") or {}),
                binary=binary,
            )
            if min(manifest.buckets, manifest.dimensions, manifest.count) < 1 or manifest.nnz < 0:
                raise ValueError("buckets, dimensions and count must be positive")
        except ArtifactError as err:
            raise IndexArtifactError(str(err)) from err
        except (ValueError, KeyError, TypeError, AttributeError) as err:
            message = f"{source} is not a valid inverted index manifest ({err}); {REBUILD_HINT}"
            raise IndexArtifactError(message) from err
        return manifest


def _verified_manifest(directory: Path) -> InvertedManifest:
    """The manifest, after checking every file it lists (and that it lists the ones we read)."""
    path = directory / MANIFEST_FILE
    if not directory.is_dir() or not path.is_file():
        raise IndexArtifactError(
            f"{path} is missing: not a finished index (the manifest is written last); {REBUILD_HINT}"
        )
    manifest = InvertedManifest.from_json(path.read_text(encoding="utf-8"), path)
    for required in (IDS_FILE, INDPTR_FILE, DOCS_FILE) + (() if manifest.binary else (VALUES_FILE,)):
        if required not in manifest.files:
            raise IndexArtifactError(f"{path} does not list {required}; {REBUILD_HINT}")
    for relative, expected in manifest.files.items():
        if PurePosixPath(relative).is_absolute() or ".." in PurePosixPath(relative).parts:
            raise IndexArtifactError(f"{path} lists an invalid path {relative!r}; {REBUILD_HINT}")
        file = directory / relative
        if not file.is_file():
            raise IndexArtifactError(f"{file} is missing from the index artifact; {REBUILD_HINT}")
        if artifact.file_entry(file) != expected:
            raise IndexArtifactError(
                f"{file} does not match the sha256/size in the manifest: the file was altered or truncated; "
                f"{REBUILD_HINT}"
            )
    return manifest


def _load_array(path: Path) -> np.ndarray:
    try:
        return np.load(path, allow_pickle=False)
    except (OSError, ValueError) as err:
        raise IndexArtifactError(f"{path} is not a plain .npy array ({err}); {REBUILD_HINT}") from err


class InvertedIndex(CorpusRows):
    """UHD documents as postings per (bucket, dim); `search` scores Eq. 7 from the postings.

    Satisfies the `Searcher` protocol: ``dimension`` is the concatenated width B·n (``dimensions`` is
    n, as in `UhdConfig`), a dense query row is read like `UhdOutput.embedding`. Build with `build`.
    ``values`` (float32, one per posting) makes a weighted index; None, a binarized one.
    """

    def __init__(
        self,
        indptr: np.ndarray,
        docs: np.ndarray,
        ids: Sequence[str],
        *,
        buckets: int,
        dimensions: int,
        values: np.ndarray | None = None,
    ) -> None:
        if buckets < 1 or dimensions < 1:
            raise ValueError(f"buckets and dimensions must be positive, got {buckets}, {dimensions}")
        self._ids = _check_ids(ids)
        if not len(self._ids):
            raise ValueError("an index needs at least one document")
        problem = _postings_problem(indptr, docs, buckets * dimensions, len(self._ids))
        problem = problem or _values_problem(values, docs.size)
        if problem:
            raise ValueError(f"{problem[0].removesuffix('.npy')} {problem[1]}")
        self._indptr, self._docs, self._values = indptr, docs, values
        self.buckets, self.dimensions = buckets, dimensions
        self._manifest: InvertedManifest | None = None

    @classmethod
    def build(
        cls, documents: SparseRows, ids: Sequence[str], *, buckets: int, dimensions: int, binary: bool = True
    ) -> InvertedIndex:
        """Index documents given per bucket as active dims (or a dense [num_docs, B·n] matrix).

        With ``binary`` (the default) documents are binarized (§3.7): any non-zero entry is active,
        values are ignored. Otherwise each posting keeps its document's value (as float32), and
        plain dims without values weigh 1.
        """
        rows, terms, weights = csr_rows(documents, buckets, dimensions, "document")
        count = len(rows) - 1
        dtype = np.int32 if count < 2**31 else np.int64
        doc_of = np.repeat(np.arange(count, dtype=dtype), np.diff(rows))
        order = np.argsort(terms, kind="stable")  # stable: rows stay ascending within each term
        counts = np.bincount(terms, minlength=buckets * dimensions)
        values = None if binary else weights[order].astype(np.float32)
        return cls(
            indptr_of(counts), doc_of[order], ids, buckets=buckets, dimensions=dimensions, values=values
        )

    @property
    def dimension(self) -> int:
        return self.buckets * self.dimensions

    @property
    def size(self) -> int:
        return len(self._ids)

    @property
    def nnz(self) -> int:
        return int(self._docs.size)

    @property
    def binary(self) -> bool:
        """Whether documents are binarized (§3.7); False when postings carry their bucket values."""
        return self._values is None

    @property
    def manifest(self) -> InvertedManifest | None:
        return self._manifest

    def __repr__(self) -> str:
        kind = "binary" if self.binary else "weighted"
        shape = f"{self.buckets} × {self.dimensions} dims"
        return f"InvertedIndex({kind}, {self.size} docs, {shape}, nnz {self.nnz})"

    def search(self, queries: SparseRows, k: int) -> SearchResult:
        """Top-min(k, size) documents per query by Eq. 7 against the indexed documents; float32 scores.

        Query buckets of plain dims weigh 1 each (binary matching, §3.4: against a binarized index
        the score counts shared winners); `.values` or dense entries are the query's weights.
        """
        rows, terms, weights = csr_rows(queries, self.buckets, self.dimensions, "query")
        k_eff = effective_k(k, self.size)
        count = len(rows) - 1
        indices = np.empty((count, k_eff), dtype=np.int64)
        scores = np.empty((count, k_eff), dtype=np.float32)
        block = max(1, _BLOCK_BYTES // (self.size * _BYTES_PER_CELL))
        for start in range(0, count, block):
            stop = min(start + block, count)
            accumulated = self._accumulate(rows[start : stop + 1], terms, weights)
            indices[start:stop], scores[start:stop] = top_k_rows(accumulated, k_eff)
        return make_result(indices, scores, self._ids)

    def _accumulate(self, rows: np.ndarray, terms: np.ndarray, weights: np.ndarray) -> np.ndarray:
        """Σ of each query's weights over the posting lists of its terms: float32 [queries, size]."""
        lo, hi = rows[0], rows[-1]
        terms, weights = terms[lo:hi], weights[lo:hi]
        query_of = np.repeat(np.arange(len(rows) - 1), np.diff(rows))
        begin = self._indptr[terms]
        lengths = self._indptr[terms + 1] - begin
        # Every posting of every query term, gathered without a Python loop over terms.
        positions = np.repeat(begin - (np.cumsum(lengths) - lengths), lengths) + np.arange(lengths.sum())
        cells = np.repeat(query_of * self.size, lengths) + self._docs[positions]
        # Binary queries on a binary index (the common case) count shared winners: a bincount, no weights.
        repeated = None if (weights == 1).all() else np.repeat(weights, lengths)
        if self._values is not None:
            found = self._values[positions].astype(np.float64)
            repeated = found if repeated is None else repeated * found
        totals = np.bincount(cells, repeated, (len(rows) - 1) * self.size)
        return totals.astype(np.float32).reshape(len(rows) - 1, self.size)

    def save(
        self, directory: str | Path, model_id: str, model_version: str, extra: dict[str, Any] | None = None
    ) -> InvertedManifest:
        """Write the index into a new or empty directory; the manifest goes last (atomically)."""
        if not model_id or not model_version:
            raise ValueError("model_id and model_version are required: an index is valid for one encoder")
        extra = dict(extra or {})
        json.dumps(extra)  # TypeError now rather than a half-written artifact
        directory = Path(directory)
        if directory.exists() and (not directory.is_dir() or any(directory.iterdir())):
            raise FileExistsError(f"{directory} exists and is not an empty directory; choose a new path")
        directory.mkdir(parents=True, exist_ok=True)
        np.save(directory / INDPTR_FILE, self._indptr, allow_pickle=False)
        np.save(directory / DOCS_FILE, self._docs, allow_pickle=False)
        if self._values is not None:
            np.save(directory / VALUES_FILE, self._values, allow_pickle=False)
        artifact.write_ids(directory, self._ids.tolist())
        manifest = InvertedManifest(
            model_id=model_id,
            model_version=model_version,
            buckets=self.buckets,
            dimensions=self.dimensions,
            count=self.size,
            nnz=self.nnz,
            files=artifact.list_files(directory),
            binary=self.binary,
            extra=extra,
        )
        temporary = directory / f".{MANIFEST_FILE}.tmp"
        temporary.write_text(manifest.to_json(), encoding="utf-8")
        os.replace(temporary, directory / MANIFEST_FILE)
        self._manifest = manifest
        return manifest

    @classmethod
    def load(cls, directory: str | Path) -> InvertedIndex:
        """Verify every file against the manifest, then load; any defect is an IndexArtifactError."""
        directory = Path(directory)
        manifest = _verified_manifest(directory)
        indptr, docs = _load_array(directory / INDPTR_FILE), _load_array(directory / DOCS_FILE)
        values = None if manifest.binary else _load_array(directory / VALUES_FILE)
        problem = _postings_problem(indptr, docs, manifest.buckets * manifest.dimensions, manifest.count)
        if problem is None and docs.size != manifest.nnz:
            problem = (DOCS_FILE, f"holds {docs.size} postings, the manifest says {manifest.nnz}")
        problem = problem or _values_problem(values, docs.size)
        if problem:
            raise IndexArtifactError(f"{directory / problem[0]} {problem[1]}; {REBUILD_HINT}")
        ids = artifact.read_ids(directory, manifest.count)
        index = cls(
            indptr, docs, ids, buckets=manifest.buckets, dimensions=manifest.dimensions, values=values
        )
        index._manifest = manifest
        return index


class ExactSparseSearcher(ExactSearcher):
    """Ground truth for `InvertedIndex`: Eq. 7 as a dense matrix product, by `ExactSearcher`'s rules.

    It never sees postings (documents are scattered into a dense [num_docs, B·n] float32 matrix,
    binarized unless ``binary=False``), so agreement tests the index. Memory is num_docs × B·n × 4
    bytes: for tests and samples.
    """

    def __init__(
        self, documents: SparseRows, ids: Sequence[str], *, buckets: int, dimensions: int, binary: bool = True
    ) -> None:
        rows, terms, weights = csr_rows(documents, buckets, dimensions, "document")
        weights = np.ones(terms.size) if binary else weights
        super().__init__(densify(rows, terms, weights, buckets * dimensions), ids)
        self.buckets, self.dimensions = buckets, dimensions

    def search(self, queries: SparseRows, k: int) -> SearchResult:
        rows, terms, weights = csr_rows(queries, self.buckets, self.dimensions, "query")
        return super().search(densify(rows, terms, weights, self.dimension), k)
