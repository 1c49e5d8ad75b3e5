"""The BM25 index an artifact carries beside its vectors (`madr build-index --products`).

Fused with the dense ranking by reciprocal rank (`index_builder.lexical.hybrid_search`), BM25 puts an
adapted model ahead of BM25 + zero-shot on catalogs madr never saw (docs/RESULTS.md). It is built over
the text the model reads of each product (`model.text.document_text`: title, bullet points,
description), row for row with the index's ids, so the two rankings fuse by corpus row.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from index_builder.lexical import Bm25Index, Bm25Settings
from model.text import document_text
from pipelines.artifacts import parquet_rows

LOGGER = logging.getLogger(__name__)


def catalog_lexical_index(
    products: str, ids: Sequence[str], settings: Bm25Settings | None = None
) -> Bm25Index:
    """BM25 over `products`' text for `ids`, in their order; an id the catalog lacks gets no text (it is
    still found by its vector) and is counted in the log."""
    wanted = set(ids)
    texts: dict[str, str] = {}
    for row in parquet_rows(products, ["product_id", "title", "bullet_points", "description"]):
        if row.get("product_id") in wanted and row.get("title"):
            texts[row["product_id"]] = document_text(row)
    missing = len(wanted) - len(texts)
    if missing:
        LOGGER.warning("BM25: %d of %d indexed products have no title in %s", missing, len(wanted), products)
    LOGGER.info("BM25: indexing the text of %d products", len(texts))
    return Bm25Index(list(ids), [texts.get(product_id, "") for product_id in ids], settings or Bm25Settings())


__all__ = ["catalog_lexical_index"]
