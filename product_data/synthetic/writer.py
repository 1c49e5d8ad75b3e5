"""Parquet and JSON writing: records go out in bounded chunks, and bytes are reproducible.

No timestamps, host names or dict-order accidents end up in a file, so the same config
writes byte-identical files (pyarrow's ``created_by`` only changes with its version).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

# Rows per row group / per Arrow conversion. Bounds the memory of a shard write, whatever the
# shard size: only one chunk of Python dicts exists at a time.
CHUNK_ROWS = 8_192
COMPRESSION = "zstd"


def _chunks(records: Iterable[dict[str, Any]], size: int) -> Iterator[list[dict[str, Any]]]:
    chunk: list[dict[str, Any]] = []
    for record in records:
        chunk.append(record)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def write_parquet(path: Path, records: Iterable[dict[str, Any]], schema: pa.Schema,
                  chunk_rows: int = CHUNK_ROWS) -> int:
    """Stream ``records`` into one Parquet file with ``schema``; returns the number of rows.

    An empty iterable still writes a valid file with the schema, so readers need no special case.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = 0
    with pq.ParquetWriter(path, schema, compression=COMPRESSION) as writer:
        for chunk in _chunks(records, chunk_rows):
            writer.write_table(pa.Table.from_pylist(chunk, schema=schema))
            rows += len(chunk)
    return rows


def shard_name(shard: int, num_shards: int) -> str:
    return f"products-{shard:05d}-of-{num_shards:05d}.parquet"


def remove_stale_shards(directory: Path, keep: set[str]) -> list[str]:
    """Delete product shards of an earlier run with another shard count, so a directory never
    mixes two catalogs; only files named like our shards are touched."""
    removed = []
    if directory.is_dir():
        for path in sorted(directory.glob("products-*-of-*.parquet")):
            if path.name not in keep:
                path.unlink()
                removed.append(path.name)
    return removed


def write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")
