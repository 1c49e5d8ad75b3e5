"""The embed stage under Beam's local running modes: multi_processing must write what in_memory writes.

`--direct_running_mode multi_processing` (the local scale-out: what the README suggests to use both
cores) runs the DoFns in `python -m apache_beam.runners.worker.sdk_worker_main` subprocesses: they
unpickle the stage's DoFns and load the model themselves, and their counters come back to the driver
over the Fn API. Any of that relying on in-process state (module globals, a shared model, counters read
from objects) would show here as missing or different rows or counts.

What "the same output" can mean, byte for byte. Not the same files: with --num_shards 0 Beam's writer
writes one file per bundle, and the runner cuts bundles per worker. In memory the whole catalog is one
bundle (`embeddings-00000-of-00001.parquet`); with 2 worker processes it is two files of about half the
rows each, and which half gets index 00000 is not fixed (two multi-process runs were seen to write the
same two files under swapped names). A fixed --num_shards does not help: Beam's writer then deals each
bundle's rows to shards round robin from a random start (`iobase._RoundRobinKeyFn`). So the file bytes
cannot match by construction. What must match, and is compared as bytes here, is the content: every
embedding row (ids, model, content hashes, annotations and the vectors' float bits), all shards
concatenated and sorted by product id, written by one fixed writer (Arrow IPC); every dead-letter line;
and the manifest, but for its creation time, its per-file hashes and the bundle-dependent counts.
"""

from __future__ import annotations

import io
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from jobs.cli import parse_command
from pipelines.embed.stage import embed_catalog
from pipelines.io.parquet_reading import read_parquet_table
from pipelines.storage.stage_manifests import list_files, read_stage_manifest
from schemas import PRODUCT_SCHEMA

# What two runs' manifests may differ in: the creation time, the files of the shard split (see above)
# and the counts, which hold the bundle-dependent inference_batches (the records are compared apart).
SPLIT_DEPENDENT = ("created_at", "files", "files_digest", "counts")  # the digest is over the files


def _catalog(path: Path) -> str:
    rows = [
        {
            "product_id": f"p{i:02d}",
            "title": f"Acme {('lamp', 'toaster', 'kettle')[i % 3]} number {i}",
            "description": "warm light " * (i % 4) or None,
            "bullet_points": ["dimmable"] if i % 2 else [],
            "brand": "Acme",
            "color": None,
            "category_path": ["Home"],
            "aspects": {"brand": ["Acme"]},
            "locale": "us",
        }
        for i in range(24)
    ]
    # Duplicates: side inputs and the small dedupe grouping must agree across worker processes.
    rows += [dict(rows[3]), {**rows[5], "title": "Acme lamp, a second copy"}]
    pq.write_table(pa.Table.from_pylist(rows, schema=PRODUCT_SCHEMA), path, row_group_size=7)
    return str(path)


def _canonical_bytes(table: pa.Table) -> bytes:
    """The rows sorted by product id, in one chunk, as an Arrow IPC stream: equal bytes iff equal content."""
    sink = io.BytesIO()
    rows = table.sort_by("product_id").combine_chunks()
    with pa.ipc.new_stream(sink, rows.schema) as writer:
        writer.write_table(rows)
    return sink.getvalue()


def _dead_letter_lines(folder: Path) -> list[bytes]:
    paths = list_files(str(folder), "dead_letters*")
    return sorted(line for path in paths for line in Path(path).read_bytes().splitlines())


def _embed(products: str, model: Path, output: Path, *mode: str) -> dict:
    # Texts encoded one per chunk: the numbers then do not depend on how batches were cut (padding).
    flags = ["--products", products, "--model", str(model), "--output", str(output), "--batch_size", "5",
             "--chunk_size", "1", "--max_dead_letter_fraction", "0.1"]  # fmt: skip
    counts = embed_catalog(*parse_command("embed", [*flags, *mode]))
    manifest = read_stage_manifest(str(output), "madr-embeddings")  # the manifest is written after the run
    table = read_parquet_table(str(output), "embeddings")
    return {
        "counts": counts,
        "rows": sorted(table.to_pylist(), key=lambda r: r["product_id"]),
        "bytes": _canonical_bytes(table),
        "dead_letters": _dead_letter_lines(output),
        "manifest": {key: value for key, value in manifest.items() if key not in SPLIT_DEPENDENT},
    }


def test_multi_processing_writes_the_bytes_and_counts_of_in_memory(tiny_model_dir, tmp_path) -> None:
    products = _catalog(tmp_path / "products.parquet")
    memory = _embed(products, tiny_model_dir, tmp_path / "in_memory", "--direct_running_mode", "in_memory")
    multi = _embed(
        products,
        tiny_model_dir,
        tmp_path / "multi",
        "--direct_running_mode",
        "multi_processing",
        "--direct_num_workers",
        "2",
    )
    # How many inference batches there are depends on how bundles were cut; records must all reconcile.
    records = {name: count for name, count in memory["counts"].items() if name.startswith("products_")}
    assert {name: multi["counts"][name] for name in records} == records
    assert (records["products_read"], records["products_embedded"], records["products_dead_lettered"]) == (
        26,
        24,
        2,
    )
    assert [row["product_id"] for row in multi["rows"]] == [f"p{i:02d}" for i in range(24)]
    assert multi["rows"] == memory["rows"]  # ids, model, content hashes and embeddings, value for value
    assert multi["bytes"] == memory["bytes"]  # ... and bit for bit, schema and its metadata included
    assert len(multi["dead_letters"]) == 2 and multi["dead_letters"] == memory["dead_letters"]
    assert multi["manifest"] == memory["manifest"]
