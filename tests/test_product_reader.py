"""The one in-process catalog reader (issue 48): the valid products in file and row order, the invalid
ones passed over and counted, read from real Parquet files."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipelines.io.product_reader import SkippedProducts, valid_products
from tests.test_embed_pipeline import catalog, write_catalog


def test_valid_products_in_order_with_the_invalid_ones_counted(tmp_path: Path) -> None:
    rows = catalog(5)
    rows[1] = {**rows[1], "title": "   "}  # no title: schemas.validate_product rejects it
    rows[3] = {**rows[3], "product_id": ""}
    folder = tmp_path / "products"
    folder.mkdir()
    write_catalog(folder / "b.parquet", catalog(7)[5:])
    write_catalog(folder / "a.parquet", rows)
    skipped = SkippedProducts()
    found = [product["product_id"] for product in valid_products(str(folder), skipped)]
    assert found == ["p0", "p2", "p4", "p5", "p6"]  # a.parquet first, then b.parquet
    assert skipped.count == 2 and "title" in (skipped.first_reason or "")
    assert skipped.describe().startswith("2 invalid products skipped (first: ")
    assert SkippedProducts().describe() == ""


def test_only_ids_reads_those_products_alone(tmp_path: Path) -> None:
    path = write_catalog(tmp_path / "catalog.parquet", catalog(6))
    found = [product["product_id"] for product in valid_products(path, only_ids={"p4", "p1", "nowhere"})]
    assert found == ["p1", "p4"]


def test_no_file_is_an_error_naming_the_pattern(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="nothing-here"):
        list(valid_products(str(tmp_path / "nothing-here" / "*.parquet")))
