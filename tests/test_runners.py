"""The embed stage under Beam's local running modes: multi_processing must write what in_memory writes.

`--direct_running_mode multi_processing` (what the README suggests to use both cores) runs the DoFns in
`python -m apache_beam.runners.worker.sdk_worker_main` subprocesses: they unpickle the stage's DoFns and
load the model themselves, and their counters come back to the driver over the Fn API. Any of that
relying on in-process state (module globals, a shared model, counters read from objects) would show
here as missing or different rows or counts.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from apache_beam.options.pipeline_options import PipelineOptions

from pipelines.artifacts import read_parquet_table, read_stage_manifest
from pipelines.embed import run_embed
from schemas import PRODUCT_SCHEMA


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


def _embed(products: str, model: Path, output: Path, *mode: str) -> tuple[dict[str, int], list[dict]]:
    # Texts encoded one per chunk: the numbers then do not depend on how batches were cut (padding).
    flags = ["--products", products, "--model", str(model), "--output", str(output), "--batch_size", "5",
             "--chunk_size", "1", "--max_dead_letter_fraction", "0.1"]  # fmt: skip
    counts = run_embed(PipelineOptions([*flags, *mode]))
    read_stage_manifest(str(output), "madr-embeddings")  # the manifest is written after the run
    rows = sorted(read_parquet_table(str(output), "embeddings").to_pylist(), key=lambda r: r["product_id"])
    return counts, rows


def test_multi_processing_writes_the_rows_and_counts_of_in_memory(tiny_model_dir, tmp_path) -> None:
    products = _catalog(tmp_path / "products.parquet")
    in_memory = _embed(products, tiny_model_dir, tmp_path / "in_memory", "--direct_running_mode", "in_memory")
    multi = _embed(
        products,
        tiny_model_dir,
        tmp_path / "multi",
        "--direct_running_mode",
        "multi_processing",
        "--direct_num_workers",
        "2",
    )
    (memory_counts, memory_rows), (multi_counts, multi_rows) = in_memory, multi
    # How many inference batches there are depends on how bundles were cut; records must all reconcile.
    records = {name: count for name, count in memory_counts.items() if name.startswith("products_")}
    assert {name: multi_counts[name] for name in records} == records
    assert (records["products_read"], records["products_embedded"], records["products_dead_lettered"]) == (
        26,
        24,
        2,
    )
    assert [row["product_id"] for row in multi_rows] == [f"p{i:02d}" for i in range(24)]
    assert multi_rows == memory_rows  # ids, model, content hashes and embeddings, bit for bit
