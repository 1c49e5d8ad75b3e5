"""What the model reads of a product, and the content hash that nightly runs compare.

The hash covers exactly the text the encoder sees, so a change to a field the
model ignores (say, a price) never triggers a re-embedding.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

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


def content_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
