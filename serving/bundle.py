"""A serving bundle: everything a search server loads, in one folder its manifest vouches for.

    manifest.json        kind "madr-serving-bundle": every file's sha256, the model fingerprint that binds
                         the encoder to the index, the encoder's inputs and precision, the catalog's size
    encoder/query.onnx   the model's query side as an ONNX graph (`serving.query_encoder`)
    encoder/tokenizer.json
    index/               the index artifact as it was published (its own manifest, schedule, BM25)
    catalog.parquet      per index row: product_id, title, the aspect values filters match
    vectors.npy          only where the index keeps no float32 vectors (an int8 re-ranking index): per
                         index row, the embedding, for filters too selective to over-fetch; otherwise
                         those are read from the index's own shards (`index_builder.stored_vectors`)

`madr export-serving` writes one (`pipelines.serve.serving_export`); `open_bundle` refuses one whose files do
not match the manifest, that holds a file the manifest does not list, or whose encoder another model made than
the index's. Each file is read once and its bytes checked before they are used.
"""

from __future__ import annotations

import hashlib
import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from index_builder.numpy_exact import NumpyExactSearcher
from index_builder.partitioned import open_index
from index_builder.stored_vectors import read_stored_vectors
from schemas.manifest import MANIFEST_FILE, ArtifactError, read_manifest, verify_manifest
from serving.catalog import Catalog, ShownValues
from serving.query_encoder import OnnxQueryEncoder, QueryEncoderSpec

BUNDLE_KIND = "madr-serving-bundle"
# 2: vectors.npy only where the index keeps no vectors of its own (version 1 always wrote it, a copy of
# the index's: 15 GB at 10M x 384). Both are served.
BUNDLE_VERSION = 2
SERVED_VERSIONS = (1, 2)
ENCODER_DIR = "encoder"
GRAPH_FILE = f"{ENCODER_DIR}/query.onnx"
TOKENIZER_FILE = f"{ENCODER_DIR}/tokenizer.json"
INDEX_DIR = "index"
CATALOG_FILE = "catalog.parquet"
VECTORS_FILE = "vectors.npy"
REBUILD = "export the bundle again with `madr export-serving`"

SHOWN_ASPECT = pa.struct(
    [("aspect", pa.string()), ("values", pa.list_(pa.string())), ("confidence", pa.float64())]
)
CATALOG_SCHEMA = pa.schema(
    [("product_id", pa.string()), ("title", pa.string()), ("aspects", pa.list_(SHOWN_ASPECT))]
)


@dataclass
class ServingBundle:
    """A verified bundle, loaded: its query encoder, index and catalog."""

    root: Path
    manifest: dict[str, Any]
    encoder: OnnxQueryEncoder
    index: Any
    catalog: Catalog

    @property
    def lexical(self) -> bool:
        return getattr(self.index, "lexical", None) is not None

    def describe(self) -> dict[str, Any]:
        """What /health reports: which bundle, built when, from what."""
        return {
            "bundle": str(self.root),
            "created_at": self.manifest.get("created_at"),
            "files_digest": self.manifest.get("files_digest"),
            "products": len(self.catalog.ids),
            "dimension": self.manifest["encoder"]["dimension"],
            "precision": self.manifest["encoder"]["precision"],
            "lexical": self.lexical,
            "model_fingerprint": self.manifest.get("model_fingerprint"),
        }


def _checked_bytes(root: Path, manifest: dict[str, Any], name: str) -> bytes:
    """The bytes of `name`, read once and refused unless they are the ones the manifest lists (the bundle's
    check leaves their hash to this read: `_hashed_when_read`)."""
    entry = manifest["files"].get(name)
    if entry is None:
        raise ArtifactError(f"{root / 'manifest.json'} lists no {name}, which a bundle holds: {REBUILD}")
    data = (root / name).read_bytes()
    if hashlib.sha256(data).hexdigest() != entry["sha256"]:
        raise ArtifactError(f"{root / name} does not have the sha256 the manifest lists: {REBUILD}")
    return data


# Files `open_bundle` hashes as it reads them, so that the bundle's check does not read them first: the
# graph, the tokenizer and the catalog (`_checked_bytes`). A manifest naming other files for them gets those
# hashed twice and these (then unread) not at all: nothing unchecked is used.
READ_WHOLE = frozenset({GRAPH_FILE, TOKENIZER_FILE, CATALOG_FILE})


def _hashed_when_read(name: str) -> bool:
    """Whether `open_bundle` hashes the bundle's file `name` as it reads it: `READ_WHOLE`, and the index's
    files, which `open_index` checks against the index's manifest (whose own sha256 the bundle's check does
    hash: the chain holds). vectors.npy, read only when a filter needs it, is hashed by the check; the
    index's own vectors, read then in its place, by `read_stored_vectors`."""
    return name in READ_WHOLE or (name.startswith(f"{INDEX_DIR}/") and name != f"{INDEX_DIR}/{MANIFEST_FILE}")


def read_catalog(table: pa.Table, load_vectors: Any) -> Catalog:
    """A bundle's catalog.parquet as the `Catalog` searches filter."""
    ids = table.column("product_id").to_pylist()
    aspects = [
        {shown["aspect"]: ShownValues(tuple(shown["values"]), shown["confidence"]) for shown in row or ()}
        for row in table.column("aspects").to_pylist()
    ]
    return Catalog(ids, table.column("title").to_pylist(), aspects, load_vectors)


def open_bundle(directory: str | Path, threads: int = 1) -> ServingBundle:
    """Verify every file of the bundle at `directory`, check the encoder and index were made by one model,
    and load them (torch-free: the index's exact scoring is NumPy's). ArtifactError names what is wrong."""
    root = Path(directory)
    manifest = verify_manifest(
        root, BUNDLE_KIND, REBUILD, allow_unlisted=False, hashed_by_reader=_hashed_when_read
    )
    if manifest.get("format_version") not in SERVED_VERSIONS:
        raise ArtifactError(
            f"{root} is a serving bundle of version {manifest.get('format_version')!r}; this madr serves "
            f"versions {', '.join(map(str, SERVED_VERSIONS))}: {REBUILD}"
        )
    index_manifest = json.loads((root / INDEX_DIR / "manifest.json").read_text(encoding="utf-8"))
    index_model = index_manifest.get("model_fingerprint") or (index_manifest.get("extra") or {}).get(
        "model_fingerprint"
    )
    if index_model != manifest.get("model_fingerprint"):
        raise ArtifactError(
            f"{root}: its index was built by the model with fingerprint {str(index_model)[:16]}, its encoder "
            f"is of {str(manifest.get('model_fingerprint'))[:16]}: {REBUILD}"
        )
    spec = QueryEncoderSpec.from_dict(manifest["encoder"])
    graph = _checked_bytes(root, manifest, spec.graph)
    tokenizer = _checked_bytes(root, manifest, spec.tokenizer).decode("utf-8")
    encoder = OnnxQueryEncoder(spec, graph, tokenizer, threads)
    index = open_index(root / INDEX_DIR, exact=NumpyExactSearcher)
    table = pq.read_table(pa.BufferReader(_checked_bytes(root, manifest, CATALOG_FILE)))
    if table.column("product_id").to_pylist() != list(index.ids):
        raise ArtifactError(
            f"{root / CATALOG_FILE} does not list the index's products in its order: {REBUILD}"
        )
    if index.dimension != spec.dimension:
        raise ArtifactError(
            f"{root}: the encoder gives {spec.dimension}-dimensional vectors, the index holds "
            f"{index.dimension}: {REBUILD}"
        )

    def load_vectors() -> np.ndarray:
        if VECTORS_FILE not in manifest["files"]:  # the index's own, hashed against its manifests as read
            return read_stored_vectors(root / INDEX_DIR)
        return np.load(io.BytesIO(_checked_bytes(root, manifest, VECTORS_FILE)), allow_pickle=False)

    return ServingBundle(root, manifest, encoder, index, read_catalog(table, load_vectors))


def bundle_size(directory: str | Path) -> dict[str, int]:
    """Bytes per top-level part of a bundle (encoder, index, catalog.parquet, vectors.npy)."""
    manifest = read_manifest(directory, BUNDLE_KIND, REBUILD)
    sizes: dict[str, int] = {}
    for name, entry in manifest["files"].items():
        part = name.split("/", 1)[0]
        sizes[part] = sizes.get(part, 0) + int(entry["bytes"])
    return sizes


__all__ = [
    "BUNDLE_KIND",
    "CATALOG_SCHEMA",
    "ServingBundle",
    "bundle_size",
    "open_bundle",
]
