"""Arrow schemas of every record that enters or leaves a stage.

Aspect annotations live in one generic column, ``aspects``: a map from aspect
name to the list of its values (madral-kdd22 §5 allows several annotations per
aspect, e.g. category = {Sandals, Shoes}). ``brand``, ``color`` and
``category_path`` are kept as first-class product fields because they are what a
catalog has; which of them count as aspects is configuration (`AspectSchema`).
"""

from __future__ import annotations

import pyarrow as pa

ASPECTS_TYPE = pa.map_(pa.string(), pa.list_(pa.string()))

PRODUCT_SCHEMA = pa.schema(
    [
        pa.field("product_id", pa.string(), nullable=False),
        pa.field("title", pa.string(), nullable=False),
        pa.field("description", pa.string()),
        pa.field("bullet_points", pa.list_(pa.string())),
        pa.field("brand", pa.string()),
        pa.field("color", pa.string()),
        pa.field("category_path", pa.list_(pa.string())),
        pa.field("aspects", ASPECTS_TYPE),
        pa.field("locale", pa.string()),
    ]
)

QUERY_SPLITS: tuple[str, ...] = ("train", "valid", "test")

QUERY_SCHEMA = pa.schema(
    [
        pa.field("query_id", pa.string(), nullable=False),
        pa.field("text", pa.string(), nullable=False),
        pa.field("aspects", ASPECTS_TYPE),
        pa.field("split", pa.string(), nullable=False),
    ]
)

JUDGMENT_SCHEMA = pa.schema(
    [
        pa.field("query_id", pa.string(), nullable=False),
        pa.field("product_id", pa.string(), nullable=False),
        pa.field("grade", pa.int32(), nullable=False),
        # The source's own label (ESCI's E/S/C/I, WANDS' Exact/Partial/...), kept for audits.
        pa.field("label", pa.string()),
    ]
)

# How deep a query's retrieval goes, the index is built to serve well, and a run file ranks: Recall@10k
# (madral-kdd22 §8.3). Each command's depth flag defaults to it.
RETRIEVAL_DEPTH = 10_000

RUN_SCHEMA = pa.schema(
    [
        pa.field("query_id", pa.string(), nullable=False),
        pa.field("product_id", pa.string(), nullable=False),
        pa.field("rank", pa.int32(), nullable=False),
        pa.field("score", pa.float32(), nullable=False),
    ]
)

DEAD_LETTER_SCHEMA = pa.schema(
    [
        pa.field("stage", pa.string(), nullable=False),
        pa.field("record_id", pa.string()),
        pa.field("reason", pa.string(), nullable=False),
        pa.field("record_json", pa.string(), nullable=False),
    ]
)


# Per-aspect annotation columns of embedding rows (madral-kdd22 Table 8); null for single-vector variants.
EMBEDDING_ANNOTATION_COLUMNS: tuple[str, ...] = (
    "aspect_values",
    "aspect_confidences",
    "aspect_presence",
    "fusion_weights",
)


def embedding_schema(dimension: int) -> pa.Schema:
    """Rows the embed stage writes: one fixed-size float32 vector per product."""
    if dimension <= 0:
        raise ValueError(f"embedding dimension must be positive, got {dimension}")
    return pa.schema(
        [
            pa.field("product_id", pa.string(), nullable=False),
            pa.field("embedding", pa.list_(pa.float32(), dimension), nullable=False),
            pa.field("model_id", pa.string(), nullable=False),
            pa.field("model_version", pa.string(), nullable=False),
            # sha256 of exactly the text the model reads; nightly runs reuse rows whose hash is unchanged.
            pa.field("content_hash", pa.string(), nullable=False),
            # Per-aspect annotations of the multi-aspect variants (madral-kdd22 Table 8); null otherwise.
            pa.field("aspect_values", pa.map_(pa.string(), pa.string())),
            pa.field("aspect_confidences", pa.map_(pa.string(), pa.float32())),
            pa.field("aspect_presence", pa.map_(pa.string(), pa.float32())),
            pa.field("fusion_weights", pa.map_(pa.string(), pa.float32())),
        ]
    )


# Where an enriched product's aspect value comes from: the catalog's own `aspects`, or the model's
# prediction at or above the run's min_confidence (its confidence P(x) is kept beside it).
PROVENANCE_CATALOG = "catalog"
PROVENANCE_PREDICTED = "predicted"

ENRICHED_ASPECT_TYPE = pa.struct(
    [
        pa.field("aspect", pa.string(), nullable=False),
        pa.field("values", pa.list_(pa.string()), nullable=False),
        pa.field("provenance", pa.string(), nullable=False),
        pa.field("confidence", pa.float32()),  # null for catalog values
    ]
)

# Rows of `madr enrich`: every product once, each aspect it has a value for (catalog or predicted).
ENRICHED_PRODUCT_SCHEMA = pa.schema(
    [
        pa.field("product_id", pa.string(), nullable=False),
        pa.field("aspects", pa.list_(ENRICHED_ASPECT_TYPE), nullable=False),
    ]
)


def per_query_metrics_schema(metric_names: list[str]) -> pa.Schema:
    """One row per evaluated query, one float64 column per metric (e.g. ``recall@100``)."""
    if len(set(metric_names)) != len(metric_names):
        raise ValueError(f"metric names repeat: {metric_names}")
    return pa.schema(
        [pa.field("query_id", pa.string(), nullable=False)]
        + [pa.field(name, pa.float64(), nullable=False) for name in metric_names]
    )
