"""Arrow/Parquet schemas and record validation shared by every madr stage."""

from schemas.aspects import ECOMMERCE_ASPECTS, PEOPLE_SEARCH_ASPECTS, AspectSchema
from schemas.manifest import ArtifactError, read_manifest, verify_manifest, write_manifest
from schemas.records import (
    ASPECTS_TYPE,
    DEAD_LETTER_SCHEMA,
    EMBEDDING_ANNOTATION_COLUMNS,
    ENRICHED_PRODUCT_SCHEMA,
    JUDGMENT_SCHEMA,
    PRODUCT_SCHEMA,
    PROVENANCE_CATALOG,
    PROVENANCE_PREDICTED,
    QUERY_SCHEMA,
    QUERY_SPLITS,
    RETRIEVAL_DEPTH,
    RUN_SCHEMA,
    embedding_schema,
    per_query_metrics_schema,
)
from schemas.validation import InvalidRecord, validate_judgment, validate_product, validate_query

__all__ = [
    "ASPECTS_TYPE",
    "DEAD_LETTER_SCHEMA",
    "ECOMMERCE_ASPECTS",
    "EMBEDDING_ANNOTATION_COLUMNS",
    "ENRICHED_PRODUCT_SCHEMA",
    "JUDGMENT_SCHEMA",
    "PEOPLE_SEARCH_ASPECTS",
    "PRODUCT_SCHEMA",
    "PROVENANCE_CATALOG",
    "PROVENANCE_PREDICTED",
    "QUERY_SCHEMA",
    "QUERY_SPLITS",
    "RETRIEVAL_DEPTH",
    "RUN_SCHEMA",
    "ArtifactError",
    "AspectSchema",
    "InvalidRecord",
    "embedding_schema",
    "per_query_metrics_schema",
    "read_manifest",
    "validate_judgment",
    "validate_product",
    "validate_query",
    "verify_manifest",
    "write_manifest",
]
