"""A catalog read in-process, product by product, validated as the Beam stages validate it.

Training, adaptation, the annotation check and the sparse index read a catalog inside one process (a
driver, not a pipeline). They all need the same thing: the valid products in file and row order, the
invalid ones passed over and counted (the embed stage dead-letters them with the reason; these readers
only say how many). One reader, so that they pass over the same records.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from typing import Any

from pipelines.io.parquet_reading import parquet_rows
from schemas import InvalidRecord, validate_product

LOGGER = logging.getLogger(__name__)


@dataclass
class SkippedProducts:
    """What a `valid_products` read passed over: how many, and the first reason (for a log line)."""

    count: int = 0
    first_reason: str | None = None

    def add(self, reason: str) -> None:
        self.count += 1
        if self.first_reason is None:
            self.first_reason = reason

    def describe(self) -> str:
        """'3 invalid products skipped (first: ...)', or '' when none was."""
        if not self.count:
            return ""
        products = "product" if self.count == 1 else "products"
        return (
            f"{self.count} invalid {products} skipped (first: {self.first_reason}; `madr embed` "
            "dead-letters them with the reason)"
        )


def valid_products(
    pattern: str, skipped: SkippedProducts | None = None, only_ids: Collection[str] | None = None
) -> Iterator[dict[str, Any]]:
    """The valid products of the Parquet files matching `pattern`, in file-name and row order, streamed.

    An invalid record is counted in `skipped` and passed over. `only_ids` keeps the rows whose raw
    product_id is among them, before validating (a reader that wants a few products of a large catalog).
    FileNotFoundError when no file matches.
    """
    for row in parquet_rows(pattern):
        if only_ids is not None and row.get("product_id") not in only_ids:
            continue
        try:
            yield validate_product(row)
        except InvalidRecord as error:
            LOGGER.debug("skipping product: %s", error)
            if skipped is not None:
                skipped.add(str(error.reason))


__all__ = ["SkippedProducts", "valid_products"]
