"""One manifest API (issue 25, item 2): every artifact madr writes has a manifest built by
`schemas.manifest.manifest_document`: its kind, when it was made, a sha256 and byte count for every file
it holds, and the digest binding them. Each kind is written here by the code that writes it in production
and read back with the same checks."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from index_builder import InvertedIndex
from jobs.cli import parse_command
from pipelines.embed.stage import embed_catalog
from pipelines.index.partitioned import build_partitioned
from pipelines.nightly.run import run_nightly
from product_data.ingest.export_folder import ingest_export_folder
from product_data.synthetic import SyntheticConfig, generate_benchmark
from schemas.manifest import (
    MANIFEST_FILE,
    FileEntry,
    check_files_digest,
    file_entries,
    files_digest,
    manifest_document,
)
from tests.conftest import ONE_SHARD, index_embeddings
from tests.test_publish_guard import _job

REPO = Path(__file__).resolve().parents[1]


def _listed_as_on_disk(folder: Path) -> dict:
    """The manifest of `folder`, after checking it lists each file it holds (its nested artifacts' files
    are theirs to list) with that file's sha256 and size, and its digest."""
    manifest = json.loads((folder / MANIFEST_FILE).read_text())
    assert {"kind", "created_at", "files", "files_digest"} <= set(manifest)
    for name, entry in file_entries(manifest).items():
        assert FileEntry.of(folder / name) == entry, name
        assert set(manifest["files"][name]) == {"sha256", "bytes"}  # one entry form for every writer
    check_files_digest(manifest, str(folder), "rebuild it")
    return manifest


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory: pytest.TempPathFactory, tiny_model_dir: Path) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("every-kind")
    benchmark = root / "benchmark"
    generate_benchmark(SyntheticConfig(num_products=120, num_queries=6, seed=2), str(benchmark))
    products = str(benchmark / "products" / "*.parquet")
    embed_catalog(
        *parse_command(
            "embed", ["--products", products, "--model", str(tiny_model_dir), "--output", str(root / "emb")]
        )
    )
    index_embeddings(str(root / "emb"), str(root / "index"), depth=10)
    build_partitioned(
        *parse_command(
            "build-index",
            ["--embeddings", str(root / "emb"), "--output", str(root / "parts"), "--num_index_shards", "2"],
        )
    )
    vectors = [[np.array([i % 4]), np.array([(i + 1) % 4])] for i in range(6)]
    InvertedIndex.build(vectors, [f"p{i}" for i in range(6)], buckets=2, dimensions=4, binary=True).save(
        root / "inverted", "m", "1"
    )
    ingest_export_folder(str(REPO / "examples" / "store_export"), str(root / "dataset"))
    run_nightly(_job(root, tiny_model_dir, products, "mon"))
    return {
        "model": tiny_model_dir,
        "benchmark": benchmark,
        "madr-embeddings": root / "emb",
        "madr-scann-index": root / "index" / ONE_SHARD,  # build-index's one shard
        "madr-partitioned-index": root / "parts",
        "madr-inverted-index": root / "inverted",
        "dataset": root / "dataset",
        "madr-nightly-run": root / "nightly" / "mon",
    }


@pytest.mark.parametrize(
    "kind",
    [
        "model",
        "benchmark",
        "madr-embeddings",
        "madr-scann-index",
        "madr-partitioned-index",
        "madr-inverted-index",
        "dataset",
        "madr-nightly-run",
    ],
)
def test_every_kind_lists_its_files_in_one_form_with_the_digest(
    artifacts: dict[str, Path], kind: str
) -> None:
    manifest = _listed_as_on_disk(artifacts[kind])
    assert manifest["kind"] == ("madr-model" if kind == "model" else kind)
    assert manifest["files"], "an artifact with no file listed binds nothing"


def test_the_benchmark_is_byte_identical_for_a_config(tmp_path: Path) -> None:
    """Its manifest is dated by SOURCE_DATE_EPOCH, not the clock, so a config still gives the same bytes."""
    config = SyntheticConfig(num_products=60, num_queries=4, seed=5)
    for name in ("a", "b"):
        generate_benchmark(config, str(tmp_path / name))
    assert (tmp_path / "a" / MANIFEST_FILE).read_bytes() == (tmp_path / "b" / MANIFEST_FILE).read_bytes()


def test_an_index_manifest_of_the_old_entry_form_still_reads() -> None:
    """Index manifests said "size" before every writer shared one entry form."""
    old = {"files": {"ids.parquet": {"sha256": "0" * 64, "size": 10}}}
    assert file_entries(old) == {"ids.parquet": FileEntry("0" * 64, 10)}
    document = manifest_document("k", {}, file_entries(old), "2026-01-01T00:00:00+00:00")
    assert document["files"] == {"ids.parquet": {"sha256": "0" * 64, "bytes": 10}}
    assert document["files_digest"] == files_digest(old["files"])  # the digest reads names and hashes only
