"""What a one-index build reads besides the embeddings: the catalog's text for the BM25 index the artifact
carries (`madr build-index --products`), and queries to tune the search schedule on (`--tuning_queries`).

Fused with the dense ranking by reciprocal rank (`index_builder.lexical.hybrid_search`), BM25 puts an
adapted model ahead of BM25 + zero-shot on catalogs madr never saw (docs/RESULTS.md). It is built over
the text the model reads of each product (`model.text.document_text`: title, bullet points,
description), row for row with the index's ids, so the two rankings fuse by corpus row.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from index_builder.lexical import Bm25Index, Bm25Settings
from pipelines.evaluate.calibration import encode_queries
from pipelines.options import ModelSettings
from pipelines.texts import product_texts, read_query_texts
from pipelines.verify import check_same_model

if TYPE_CHECKING:
    from pipelines.index.config import IndexBuildConfig

# Tuning queries encoded at most: the depth tuner subsamples them per depth (index_builder.depth_tuning).
MAX_TUNING_QUERIES = 1_000

LOGGER = logging.getLogger(__name__)


def catalog_lexical_index(
    products: str, ids: Sequence[str], settings: Bm25Settings | None = None
) -> Bm25Index:
    """BM25 over `products`' text for `ids`, in their order; an id the catalog lacks gets no text (it is
    still found by its vector) and is counted in the log."""
    wanted = set(ids)
    texts = product_texts(products, wanted)
    missing = len(wanted) - len(texts)
    if not texts:
        raise ValueError(
            f"--products {products} holds none of the {len(wanted):,} indexed products (such as "
            f"{next(iter(ids), '?')!r}) with a title: give the catalog the embeddings were made from"
        )
    if missing:
        LOGGER.warning("BM25: %d of %d indexed products have no title in %s", missing, len(wanted), products)
    LOGGER.info("BM25: indexing the text of %d products", len(texts))
    return Bm25Index(list(ids), [texts.get(product_id, "") for product_id in ids], settings or Bm25Settings())


def tuning_query_vectors(build: IndexBuildConfig, embeddings: str) -> np.ndarray | None:
    """--tuning_queries (a dataset's test split left out) encoded by --model, which must be the model of
    the embeddings; None without them."""
    if not build.tuning_queries or not build.model:
        return None
    check_same_model(build.model, {"--embeddings": embeddings})
    queries = read_query_texts(build.tuning_queries, exclude_split="test", limit=MAX_TUNING_QUERIES)
    if not queries:
        raise ValueError(f"--tuning_queries {build.tuning_queries} holds no query outside the test split")
    LOGGER.info("encoding %d tuning queries with %s", len(queries), build.model)
    return encode_queries(queries, ModelSettings(build.model))


__all__ = ["MAX_TUNING_QUERIES", "catalog_lexical_index", "tuning_query_vectors"]
