"""`madr export-serving`: the serving bundle of an index artifact and the model that built it.

The bundle (`serving.bundle`) holds what `madr serve` loads: the model's query side as an ONNX graph (the
one `madr embed --runtime onnxruntime` runs, from the cache keyed by the weights' sha256) and its Rust
tokenizer; the index artifact copied as published (its schedule, BM25, manifests); the catalog view
`madr search` shows and filters (titles, catalog values, predictions at --min_confidence); and the float32
vectors a selective filter scores exactly. Before the manifest is written, the bundle is opened as a server
opens it and its encoder checked against the torch model on probe texts: a bundle that would answer other
vectors than `madr search` encodes is never written.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import torch

from index_builder.stored_vectors import keeps_vectors
from index_builder.tf_export import export_saved_model, require_tensorflow
from model import load_encoder
from model.batch import Side
from model.encoder import DenseEncoder
from model.onnx_runtime import ONNX_PRECISIONS, PROBE_MIN_COSINE, PROBE_TEXTS, cached_graph
from pipelines.serve.search import open_index_and_catalog
from pipelines.settings.options import ConfidenceThreshold
from pipelines.settings.stage_config import nested, setting
from pipelines.storage.verify import model_fingerprint
from schemas.manifest import ArtifactError, write_manifest
from serving import bundle as layout
from serving.bundle import BUNDLE_KIND, BUNDLE_VERSION, CATALOG_SCHEMA, open_bundle
from serving.query_encoder import QueryEncoderSpec

# --saved_model: the index as a TensorFlow SavedModel inside the bundle, one signature per depth.
SAVED_MODEL_DIR = "saved_model"
SAVED_MODEL_DEPTHS = (10, 100)

PRECISION_REASONS = {
    "fp32": "fp32: the query vectors `madr search` encodes, to float32 rounding (--precision int8 is "
    "ONNX Runtime's dynamic quantisation: faster on CPUs with VNNI, vectors at cosine >= 0.95)",
    "int8": "int8, as --precision asked: ONNX Runtime's dynamic quantisation of the fp32 graph",
}


@dataclass(frozen=True)
class ExportServingConfig:
    """`madr export-serving`: which artifact, which model, where the bundle goes."""

    index: str = setting(
        "", "Index artifact folder (`madr build-index`, a nightly run's index/)", required=True
    )
    model: str = setting("", "The model whose embeddings the index holds", required=True)
    output: str = setting("", "Bundle folder to write (must not exist, or be empty)", required=True)
    precision: str = setting(
        "fp32",
        "Query encoder graph: fp32 answers what `madr search` prints; int8 is ONNX Runtime's dynamic "
        "quantisation (faster on CPUs with VNNI, vectors moved slightly)",
        choices=ONNX_PRECISIONS,
    )
    products: str | None = setting(
        None,
        "The catalog's product Parquet, for titles and catalog values (default: the products the index's "
        "embeddings were made from)",
    )
    # --min_confidence: the lowest confidence of a predicted aspect value the bundle shows and filters on.
    threshold: ConfidenceThreshold = nested(ConfidenceThreshold)
    saved_model: bool = setting(
        False,
        "Also write saved_model/: the index's own trees as a TensorFlow SavedModel (signatures top_10, "
        "top_100; needs the serving extra: pip install 'madr[serving]')",
    )

    def __post_init__(self) -> None:
        target = Path(self.output)
        if target.exists() and (not target.is_dir() or any(target.iterdir())):
            raise ValueError(f"--output {self.output} already holds files: give a new folder, or remove it")


def query_encoder_files(
    model_dir: str, precision: str, target: Path, dimension: int
) -> tuple[QueryEncoderSpec, Any, Any]:
    """Write the query graph and tokenizer into `target`; the spec, and the torch encoder and tokenizer."""
    encoder, tokenizer = load_encoder(model_dir, device="cpu")
    if type(encoder).tokenize is not DenseEncoder.tokenize:
        raise ArtifactError(
            f"{model_dir} is a {encoder.config.variant} model, whose queries are tokenized its own way "
            "(guiding tokens): a serving bundle encodes with the plain tokenizer, so it cannot serve it yet"
        )
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None or tokenizer.padding_side != "right" or tokenizer.truncation_side != "right":
        raise ArtifactError(
            f"{model_dir}'s tokenizer is not a right-padding Rust tokenizer: it cannot be bundled"
        )
    graph, graph_layout = cached_graph(model_dir, encoder, tokenizer, Side.QUERY, precision)
    (target / layout.ENCODER_DIR).mkdir(parents=True)
    shutil.copyfile(graph, target / layout.GRAPH_FILE)
    (target / layout.TOKENIZER_FILE).write_text(backend.to_str(), encoding="utf-8")
    spec = QueryEncoderSpec(
        graph=layout.GRAPH_FILE,
        tokenizer=layout.TOKENIZER_FILE,
        precision=precision,
        max_length=encoder.max_length(Side.QUERY),
        min_length=graph_layout.min_length,
        pad_id=int(tokenizer.pad_token_id or 0),
        dimension=dimension,
    )
    return spec, encoder, tokenizer


def write_catalog(catalog: Any, target: Path, with_vectors: bool) -> None:
    """catalog.parquet (index row order), from `madr search`'s catalog view, and `with_vectors` vectors.npy
    (for an index that keeps no float32 vectors of its own, which servers read otherwise)."""
    rows = [
        {
            "product_id": product_id,
            "title": title,
            "aspects": [
                {"aspect": name, "values": list(shown.values), "confidence": shown.confidence}
                for name, shown in sorted(aspects.items())
            ],
        }
        for product_id, title, aspects in zip(catalog.ids, catalog.titles, catalog.aspects, strict=True)
    ]
    pq.write_table(pa.Table.from_pylist(rows, schema=CATALOG_SCHEMA), target / layout.CATALOG_FILE)
    if not with_vectors:
        return
    vectors = catalog.vectors(np.arange(len(catalog.ids)))
    np.save(target / layout.VECTORS_FILE, np.ascontiguousarray(vectors, dtype=np.float32), allow_pickle=False)


def probe_cosine(bundle_dir: Path, encoder: Any, tokenizer: Any) -> float:
    """The least cosine between the bundle's encoder and the torch model on `PROBE_TEXTS` (query side)."""
    served = open_bundle(bundle_dir)
    actual = served.encoder.encode(list(PROBE_TEXTS))
    with torch.inference_mode():
        expected = encoder.embed_texts(tokenizer, list(PROBE_TEXTS), Side.QUERY).embedding.float().numpy()
    return float((actual * expected).sum(axis=1).min())


def export_serving(config: ExportServingConfig) -> dict[str, Any]:
    """Write the bundle of `config.index` and `config.model` to `config.output`; its manifest's info."""
    if config.saved_model:  # before any work: the error names the TensorFlow to install
        try:
            require_tensorflow()
        except ImportError as error:
            raise ValueError(f"--saved_model: {error}") from error
    index, catalog = open_index_and_catalog(
        config.index, config.model, config.products, config.threshold.min_confidence
    )
    if catalog.warning:
        print(catalog.warning)
    output = Path(config.output)
    output.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{output.name}.", dir=output.parent))
    try:
        spec, encoder, tokenizer = query_encoder_files(
            config.model, config.precision, staging, index.dimension
        )
        shutil.copytree(config.index, staging / layout.INDEX_DIR, symlinks=False)
        index_keeps_vectors = keeps_vectors(staging / layout.INDEX_DIR)
        write_catalog(catalog, staging, with_vectors=not index_keeps_vectors)
        if config.saved_model:
            export_saved_model(staging / layout.INDEX_DIR, staging / SAVED_MODEL_DIR, SAVED_MODEL_DEPTHS)
        info = {
            "format_version": BUNDLE_VERSION,
            "model": str(config.model),
            "model_fingerprint": model_fingerprint(config.model),
            "encoder": {**spec.to_dict(), "precision_reason": PRECISION_REASONS[config.precision]},
            "index": {
                "source": str(config.index),
                "products": len(catalog.ids),
                "lexical": index.lexical is not None,
                # Where a server reads the vectors it scores a selective filter's products with.
                "vectors": "index" if index_keeps_vectors else layout.VECTORS_FILE,
            },
            "catalog": {"products": config.products, "min_confidence": config.threshold.min_confidence},
        }
        if config.saved_model:
            info["saved_model"] = {
                "path": SAVED_MODEL_DIR,
                "signatures": [f"top_{k}" for k in SAVED_MODEL_DEPTHS],
            }
        write_manifest(staging, BUNDLE_KIND, info)
        cosine = probe_cosine(staging, encoder, tokenizer)
        if cosine < PROBE_MIN_COSINE[config.precision]:
            raise ArtifactError(
                f"the bundled query encoder does not encode as {config.model} does (least cosine "
                f"{cosine:.4f} on probe texts): delete the ONNX cache and export again"
            )
        info["encoder"]["probe_cosine"] = round(cosine, 6)
        write_manifest(staging, BUNDLE_KIND, info)
        if output.exists():
            output.rmdir()  # empty, as __post_init__ checked
        os.replace(staging, output)
    finally:
        if staging.exists():
            shutil.rmtree(staging)
    return info
