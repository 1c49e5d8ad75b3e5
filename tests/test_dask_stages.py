"""madr's stages on `--runner dask` (a 2-process dask.distributed cluster) against the local runner.

The nightly runs each Beam stage (embed, the 2-shard index build, evaluate, enrich) with the job's
Beam flags: run with `--runner dask`, every stage runs on the cluster. What comes out must be what the
local runner writes: the same embedding rows (vectors to 1e-6), the same enriched rows, the same index
(ids and search results), the same metrics; the stock DaskRunner is refused by the CLI with its reason.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.compute as pc
import pytest

from index_builder import open_index
from jobs.cli import main
from pipelines.io.parquet_reading import read_parquet_table
from tests.test_embed_pipeline import catalog, write_catalog, write_test_queries

distributed = pytest.importorskip("distributed", reason="the Dask runner needs the dask extra")


@pytest.fixture(scope="module")
def nights(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """`madr nightly` as typed, on the local runner and with `--runner dask --dask_workers 2` (a local
    cluster of 2 worker processes per stage), over one small catalog."""
    root = tmp_path_factory.mktemp("dask-stages")
    rows = [*catalog(30), dict(catalog(30)[4])]  # a repeated id: dead-lettered the same way on both
    products = write_catalog(root / "catalog.parquet", rows, row_group_size=7)
    queries, judgments = write_test_queries(root)
    argv = ["nightly", "--products", products, "--model", str(tiny_model_dir), "--run_id", "night",
            "--queries", queries, "--judgments", judgments, "--num_index_shards", "2", "--depth", "20",
            "--enrich", "--report", "false", "--evaluate_flags", "--zero_shot false",
            "--embed_flags", "--max_dead_letter_fraction 0.1"]  # fmt: skip
    assert main([*argv, "--output", str(root / "local")]) == 0
    assert main([*argv, "--output", str(root / "dask"), "--runner", "dask", "--dask_workers", "2"]) == 0
    return {"local": root / "local" / "night", "dask": root / "dask" / "night"}


def _rows(folder: Path, prefix: str, sort: str = "product_id") -> list[dict]:
    table = read_parquet_table(str(folder), prefix)
    return table.take(pc.sort_indices(table, [(sort, "ascending")])).to_pylist()


def test_embeddings_and_enriched_rows_equal_the_local_runners(nights: dict[str, Path]) -> None:
    local, on_dask = (_rows(nights[run] / "embeddings", "embeddings") for run in ("local", "dask"))
    assert [row["product_id"] for row in on_dask] == [row["product_id"] for row in local]
    assert len(local) == 30  # the repeated id is one row on both, not two
    vectors = [np.asarray([row["embedding"] for row in rows], np.float32) for rows in (local, on_dask)]
    np.testing.assert_allclose(vectors[1], vectors[0], atol=1e-6)
    strip = [{k: v for k, v in row.items() if k != "embedding"} for row in on_dask]
    assert strip == [{k: v for k, v in row.items() if k != "embedding"} for row in local]
    enriched = [_rows(nights[run] / "enriched", "enriched") for run in ("local", "dask")]
    assert enriched[1] == enriched[0] and len(enriched[0]) == 31  # enrich keeps every catalog row


def test_the_index_and_the_metrics_equal_the_local_runners(nights: dict[str, Path]) -> None:
    local, on_dask = (open_index(nights[run] / "index") for run in ("local", "dask"))
    assert len(on_dask.shards) == len(local.shards) == 2
    assert list(on_dask.ids) == list(local.ids)
    queries = np.eye(local.dimension, dtype=np.float32)[:5]
    a, b = local.search(queries, 10), on_dask.search(queries, 10)
    assert a.ids == b.ids and np.allclose(a.scores, b.scores, atol=1e-6)
    metrics = [json.loads((nights[run] / "eval" / "metrics.json").read_text()) for run in ("local", "dask")]
    assert metrics[1]["metrics"] == metrics[0]["metrics"]
