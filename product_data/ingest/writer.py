"""An `IngestResult` on disk, in the layout every later stage reads.

::

    OUT/products/products-00000-of-0000N.parquet   PRODUCT_SCHEMA, sharded
    OUT/queries.parquet                            QUERY_SCHEMA
    OUT/judgments.parquet                          JUDGMENT_SCHEMA
    OUT/dead_letters.jsonl                         DEAD_LETTER_SCHEMA rows, one JSON object a line
    OUT/manifest.json                              kind "dataset": counts, provenance, grades, file hashes

All three tables are written even for a stream that was not loaded (then empty), so
readers need no special case; the manifest's ``streams`` says which were loaded. The
manifest is written last (`schemas.manifest.write_manifest`): a directory without one is
an unfinished write.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from product_data.ingest.common import IngestResult, Record
from schemas import JUDGMENT_SCHEMA, PRODUCT_SCHEMA, QUERY_SCHEMA
from schemas.manifest import MANIFEST_FILE, read_manifest, write_manifest

DATASET_KIND = "dataset"
DEFAULT_ROWS_PER_SHARD = 100_000


def _write_table(records: Sequence[Record], schema: pa.Schema, path: Path) -> None:
    pq.write_table(pa.Table.from_pylist(list(records), schema=schema), path)


def _prepare(out: Path, overwrite: bool) -> None:
    """Refuse to mix with other files; replace only an earlier dataset, and only when asked."""
    if not out.exists():
        out.mkdir(parents=True)
        return
    if not any(out.iterdir()):
        return
    if not overwrite:
        raise FileExistsError(f"{out} is not empty; pass overwrite=True to replace an earlier dataset")
    if not (out / MANIFEST_FILE).is_file():
        raise FileExistsError(f"{out} is not empty and holds no dataset manifest; refusing to delete it")
    read_manifest(out, DATASET_KIND)  # raises if it is some other artifact (a model, an index)
    shutil.rmtree(out)
    out.mkdir(parents=True)


def write_dataset(
    result: IngestResult,
    out_dir: str | Path,
    *,
    rows_per_shard: int = DEFAULT_ROWS_PER_SHARD,
    overwrite: bool = False,
) -> Path:
    """Write ``result`` under ``out_dir``; returns the manifest path."""
    if isinstance(rows_per_shard, bool) or not isinstance(rows_per_shard, int) or rows_per_shard <= 0:
        raise ValueError(f"rows_per_shard must be a positive int, got {rows_per_shard!r}")
    out = Path(out_dir)
    _prepare(out, overwrite)
    (out / "products").mkdir()
    products = result.products
    shards = max(1, -(-len(products) // rows_per_shard))  # one empty shard still carries the schema
    for index in range(shards):
        chunk = products[index * rows_per_shard : (index + 1) * rows_per_shard]
        name = f"products-{index:05d}-of-{shards:05d}.parquet"
        _write_table(chunk, PRODUCT_SCHEMA, out / "products" / name)
    _write_table(result.queries, QUERY_SCHEMA, out / "queries.parquet")
    _write_table(result.judgments, JUDGMENT_SCHEMA, out / "judgments.parquet")
    with (out / "dead_letters.jsonl").open("w", encoding="utf-8") as handle:
        for letter in result.dead_letters:
            handle.write(json.dumps(letter.to_row(), ensure_ascii=False) + "\n")
    gains = result.gain_map.items() if result.gain_map is not None else ()
    splits: dict[str, int] = {}
    for query in result.queries:
        splits[query["split"]] = splits.get(query["split"], 0) + 1
    info = {
        "source": result.source,
        "streams": list(result.streams),
        "counts": {stream: counts.to_json() for stream, counts in result.counts.items()},
        "rows": {
            "products": len(products),
            "queries": len(result.queries),
            "judgments": len(result.judgments),
            "dead_letters": len(result.dead_letters),
        },
        "product_shards": shards,
        "query_splits": dict(sorted(splits.items())),
        "positive_min_grade": result.positive_min_grade,
        # JSON object keys are strings; readers turn them back into int grades.
        "gain_map": None if result.gain_map is None else {str(g): v for g, v in sorted(gains)},
        "provenance": dict(result.provenance),
    }
    return write_manifest(out, DATASET_KIND, info)
