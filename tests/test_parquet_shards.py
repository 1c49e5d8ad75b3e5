"""Embedding shards on a real Beam runner: every row written once, dictionary encoding on text only."""

from __future__ import annotations

from pathlib import Path

import apache_beam as beam
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from apache_beam.testing.test_pipeline import TestPipeline

from pipelines.io.parquet_shards import WriteParquetShards, dictionary_columns
from schemas import embedding_schema

DIMENSION = 16


def rows(count: int) -> list[dict]:
    vectors = np.random.default_rng(5).normal(size=(count, DIMENSION)).astype(np.float32)
    return [
        {
            "product_id": f"p{i}",
            "embedding": vectors[i].tolist(),
            "model_id": "madr-test",
            "model_version": "1",
            "content_hash": f"{i:064x}",
            "aspect_values": {"brand": "nike"} if i % 2 else None,
            "aspect_confidences": {"brand": 0.75} if i % 2 else None,
        }
        for i in range(count)
    ]


def written(folder: Path) -> pa.Table:
    return pq.read_table(sorted(folder.glob("*.parquet")), schema=embedding_schema(DIMENSION))


def test_text_leaves_alone_get_a_dictionary() -> None:
    assert dictionary_columns(embedding_schema(DIMENSION)) == [
        "product_id",
        "model_id",
        "model_version",
        "content_hash",
        "aspect_values.key_value.key",
        "aspect_values.key_value.value",
        "aspect_confidences.key_value.key",
        "aspect_presence.key_value.key",
        "fusion_weights.key_value.key",
    ]


@pytest.mark.parametrize("batched", [False, True])
def test_rows_and_tables_are_written_once_each_and_vectors_plainly(tmp_path: Path, batched: bool) -> None:
    schema = embedding_schema(DIMENSION)
    source = rows(1_000)
    # Row dicts are gathered into tables of 100 rows (row_group_bytes / row_bytes).
    elements = [pa.Table.from_pylist(source[i : i + 300], schema=schema) for i in range(0, 1_000, 300)]
    with TestPipeline() as pipeline:
        _ = (
            pipeline
            | beam.Create(elements if batched else source, reshuffle=False)
            | WriteParquetShards(
                str(tmp_path / "embeddings"), schema, batched=batched, row_group_bytes=100 * 64, row_bytes=64
            )
        )
    table = written(tmp_path)
    assert (
        sorted(table.to_pylist(), key=lambda row: int(row["product_id"][1:]))
        == pa.Table.from_pylist(source, schema=schema).to_pylist()
    )
    for path in tmp_path.glob("*.parquet"):
        metadata = pq.ParquetFile(path).metadata
        for group in range(metadata.num_row_groups):
            row_group = metadata.row_group(group)
            assert row_group.num_rows <= (300 if batched else 100)
            columns = [row_group.column(c) for c in range(metadata.num_columns)]
            encodings = {column.path_in_schema: column.encodings for column in columns}
            assert "RLE_DICTIONARY" not in encodings["embedding.list.element"]
            assert "RLE_DICTIONARY" in encodings["model_id"]


def test_small_tables_are_gathered_into_row_groups_of_about_the_size_asked(tmp_path: Path) -> None:
    """The embed stage sends one table per inference batch: a row group each would be far smaller than
    --row_group_mb asks, and readers pay per row group."""
    schema = embedding_schema(DIMENSION)
    source = rows(1_000)
    elements = [pa.Table.from_pylist(source[i : i + 30], schema=schema) for i in range(0, 1_000, 30)]
    with TestPipeline() as pipeline:
        _ = (
            pipeline
            | beam.Create(elements, reshuffle=False)
            | WriteParquetShards(
                str(tmp_path / "embeddings"), schema, batched=True, row_group_bytes=100 * 64, row_bytes=64
            )
        )
    assert sorted(written(tmp_path).column("product_id").to_pylist()) == sorted(
        r["product_id"] for r in source
    )
    sizes = [
        pq.ParquetFile(path).metadata.row_group(group).num_rows
        for path in tmp_path.glob("*.parquet")
        for group in range(pq.ParquetFile(path).metadata.num_row_groups)
    ]
    # Each gathered group holds 100 rows or a few more (whole tables of 30); only a bundle's last is smaller.
    assert sum(size < 100 for size in sizes) <= len(list(tmp_path.glob("*.parquet")))
    assert max(sizes) < 130 and len(sizes) < 1_000 // 30
