"""What the model reads of a product, and the content hash that nightly runs compare.

The hash covers exactly the text the encoder sees, so a change to a field the
model ignores (say, a price) never triggers a re-embedding.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

if TYPE_CHECKING:
    from model.config import EncoderConfig

FIELD_SEPARATOR = " . "


def document_text(product: Mapping[str, Any]) -> str:
    """Title, bullet points and description, in the order a listing shows them.

    madral-kdd22 §8.2 concatenates all document features; structured brand and color
    fields are left to the aspect-aware variants (they are usually in the title).
    """
    parts = [product["title"]]
    parts.extend(product.get("bullet_points") or [])
    if product.get("description"):
        parts.append(product["description"])
    return FIELD_SEPARATOR.join(part for part in parts if part)


def document_text_column(products: pa.RecordBatch) -> pa.Array:
    """`document_text` of every product of a batch at once, with Arrow's string kernels: for products as
    validation returns them (`schemas.product_columns` finds the rows read that way)."""
    names = products.schema.names
    parts = [products.column("title").cast(pa.string())]
    for name in ("bullet_points", "description"):
        if name not in names or pa.types.is_null(products.schema.field(name).type):
            continue
        column = products.column(name)
        if name == "bullet_points":
            column = pc.binary_join(column, FIELD_SEPARATOR)  # a null list joins to null, an empty one to ""
        column = column.cast(pa.string())
        # `document_text` leaves an empty part out; "skip" below leaves out nulls.
        parts.append(pc.if_else(pc.equal(column, ""), pa.scalar(None, pa.string()), column))
    return pc.binary_join_element_wise(*parts, FIELD_SEPARATOR, null_handling="skip")


def document_text_with_aspects(product: Mapping[str, Any], aspects: Sequence[str]) -> str:
    """`document_text` with each aspect's values after an indicator (BiBERT-CONCAT, repro-ecir24 §7).

    The indicator is the aspect's name ("brand: nike"), a word the wordpiece
    vocabulary already has; BERT's [unusedN] tokens would need a changed tokenizer.
    The aspects follow the title rather than the description, so truncation at
    `max_document_length` cuts the description, not the aspects. Aspects without
    values are left out; several values are joined by commas.
    """
    annotations = product.get("aspects") or {}
    tagged = [f"{name}: {', '.join(annotations[name])}" for name in aspects if annotations.get(name)]
    parts = [product["title"], *tagged]
    parts.extend(product.get("bullet_points") or [])
    if product.get("description"):
        parts.append(product["description"])
    return FIELD_SEPARATOR.join(part for part in parts if part)


def content_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def text_for_model(product: Mapping[str, Any], config: EncoderConfig) -> str:
    """The exact text `config`'s variant reads of a product (and whose hash nightly runs compare)."""
    if config.appends_aspects_to_documents:
        return document_text_with_aspects(product, config.aspects)
    return document_text(product)


def text_column_for_model(products: pa.RecordBatch, config: EncoderConfig) -> pa.Array | None:
    """`text_for_model` of a batch of validated products, or None for a variant that appends aspects
    (their values need `validate_product`'s reshaping, record by record)."""
    if config.appends_aspects_to_documents:
        return None
    return document_text_column(products)
