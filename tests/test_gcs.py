"""The embed and evaluate stages on gs:// paths, against a local GCS emulator (see tests/gcs_emulator.py).

What Dataflow runs reads and writes Cloud Storage; these tests run the same stage code on Beam's local
runner with every input and output in an emulated bucket, and check the numbers equal a local run.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from apache_beam.io.filesystems import FileSystems
from apache_beam.io.gcp.gcsio import GcsIO
from apache_beam.options.pipeline_options import PipelineOptions
from gcs_emulator import EmulatorError, GcsEmulator, pointed_at, running_emulator
from google.auth.credentials import AnonymousCredentials

from index_builder import open_index
from jobs.cli import parse_command
from pipelines.embed.stage import embed_catalog
from pipelines.evaluate.stage import SearcherSpec, evaluate_retrieval
from pipelines.io.parquet_reading import read_embeddings
from pipelines.storage.local_copies import local_output, localize, publish
from pipelines.storage.stage_manifests import read_stage_manifest
from schemas import JUDGMENT_SCHEMA, PRODUCT_SCHEMA, QUERY_SCHEMA
from tests.conftest import index_embeddings

BUCKET = "madr-test"
ITEMS = ["juicer", "blender", "socks", "sneakers", "lamp", "comforter"]
BRANDS = ["Breville", "Nike", "Acme"]
METRICS = "recall@10,recall@100,ndcg@5,mrr@10"
# An untrained tiny model scores products nearly alike, so a difference in the last float bit reorders
# them. Beam's adaptive batching cuts batches differently on every run, and a batch's padding and shape
# change those bits: encode and search one record at a time, and both runs compute bit-identical numbers.
ONE_AT_A_TIME = ["--batch_size", "1", "--chunk_size", "1"]


@pytest.fixture(scope="session")
def gcs_emulator() -> Iterator[GcsEmulator]:
    """The emulator process, started once per test session and stopped at its end."""
    with running_emulator() as emulator:
        yield emulator


@pytest.fixture(scope="module")
def gcs(gcs_emulator: GcsEmulator) -> Iterator[GcsEmulator]:
    """Every GCS client of this process pointed at the emulator, with the bucket BUCKET, for this module
    only: the environment and google.auth are restored afterwards, so no other test sees the emulator."""
    with pointed_at(gcs_emulator):
        if gcs_emulator.client().lookup_bucket(BUCKET) is None:
            gcs_emulator.create_bucket(BUCKET)
        yield gcs_emulator


def _dataset(root: Path) -> dict[str, Path]:
    products = [
        {
            "product_id": f"p{i}",
            "title": f"{BRANDS[i % 3]} {ITEMS[i % 6]} model {i}",
            "description": None,
            "bullet_points": [],
            "brand": BRANDS[i % 3],
            "color": None,
            "category_path": [ITEMS[i % 6]],
            "aspects": {"category": [ITEMS[i % 6]]},
            "locale": "us",
        }
        for i in range(36)
    ]
    products.append({**products[0], "product_id": "no-title", "title": ""})  # one dead letter
    queries = [
        {"query_id": f"q{j}", "text": f"{BRANDS[j % 3]} {ITEMS[j % 6]}", "aspects": None, "split": "test"}
        for j in range(8)
    ]
    judgments = [
        {"query_id": f"q{j}", "product_id": f"p{i}", "grade": (i + j) % 5, "label": None}
        for j in range(8)
        for i in range(j % 6, 36, 6)
    ]
    paths = {name: root / f"{name}.parquet" for name in ("products", "queries", "judgments")}
    pq.write_table(pa.Table.from_pylist(products, schema=PRODUCT_SCHEMA), paths["products"])
    pq.write_table(pa.Table.from_pylist(queries, schema=QUERY_SCHEMA), paths["queries"])
    pq.write_table(pa.Table.from_pylist(judgments, schema=JUDGMENT_SCHEMA), paths["judgments"])
    return paths


def _embed(products: str, model: Path, output: str) -> dict[str, int]:
    # One product of 37 is a dead letter on purpose: allow it.
    flags = ["--products", products, "--model", str(model), "--output", output, "--num_shards", "2",
             "--max_dead_letter_fraction", "0.5", *ONE_AT_A_TIME]  # fmt: skip
    return embed_catalog(*parse_command("embed", flags))


def _evaluate(queries: str, judgments: str, model: Path, embeddings: str, output: str) -> dict:
    flags = ["--queries", queries, "--judgments", judgments, "--model", str(model), "--output", output,
             "--searcher", "exact", "--embeddings", embeddings, "--metrics", METRICS,
             *ONE_AT_A_TIME]  # fmt: skip
    return evaluate_retrieval(*parse_command("evaluate", flags))


def _blobs(gcs: GcsEmulator, prefix: str) -> set[str]:
    return {blob.name[len(prefix) :] for blob in gcs.client().list_blobs(BUCKET, prefix=prefix)}


def _by_id(ids: list[str], matrix: np.ndarray) -> np.ndarray:
    return matrix[np.argsort(ids)]


def test_embed_and_evaluate_on_gcs_equal_a_local_run(gcs, tiny_model_dir, tmp_path) -> None:
    data = _dataset(tmp_path)
    bucket = gcs.client().bucket(BUCKET)
    # The real google-cloud-storage client uploads the inputs, as a user would with gsutil.
    for name, path in data.items():
        folder = "catalog/products-00000" if name == "products" else name
        bucket.blob(f"in/{folder}.parquet").upload_from_filename(str(path))
    remote = f"gs://{BUCKET}"

    local_counts = _embed(str(data["products"]), tiny_model_dir, str(tmp_path / "embeddings"))
    gcs_counts = _embed(f"{remote}/in/catalog/*.parquet", tiny_model_dir, f"{remote}/run/embeddings")
    # Records must reconcile the same way; how many inference batches there were depends on bundling.
    records = {name: count for name, count in local_counts.items() if name.startswith("products_")}
    assert {name: gcs_counts[name] for name in records} == records
    checked = ("products_read", "products_embedded", "products_dead_lettered")
    assert [gcs_counts[name] for name in checked] == [37, 36, 1]

    embedded = _blobs(gcs, "run/embeddings/")
    shards = {f"embeddings-0000{shard}-of-00002.parquet" for shard in (0, 1)}
    assert {"manifest.json", *shards} <= embedded
    assert any(name.startswith("dead_letters-") for name in embedded)
    assert not any("beam-temp" in name for name in embedded)
    local_ids, local_matrix, _ = read_embeddings(str(tmp_path / "embeddings"))
    gcs_ids, gcs_matrix, manifest = read_embeddings(f"{remote}/run/embeddings")
    assert sorted(gcs_ids) == sorted(local_ids) and manifest["counts"] == gcs_counts
    np.testing.assert_array_equal(_by_id(gcs_ids, gcs_matrix), _by_id(local_ids, local_matrix))

    local = _evaluate(
        str(data["queries"]), str(data["judgments"]), tiny_model_dir, str(tmp_path / "embeddings"),
        str(tmp_path / "eval"),
    )  # fmt: skip
    on_gcs = _evaluate(
        f"{remote}/in/queries.parquet", f"{remote}/in/judgments.parquet", tiny_model_dir,
        f"{remote}/run/embeddings", f"{remote}/run/eval",
    )  # fmt: skip
    assert on_gcs["counts"] == local["counts"] and on_gcs["counts"]["queries_scored"] == 8
    assert on_gcs["summary"].keys() == local["summary"].keys()
    for name, mean in local["summary"].items():
        assert (on_gcs["summary"][name].mean, on_gcs["summary"][name].count) == (mean.mean, mean.count), name

    evaluated = _blobs(gcs, "run/eval/")
    assert {"metrics.json", "per_query.parquet", "manifest.json"} <= evaluated
    assert any(name.startswith("run-") for name in evaluated)
    assert not any(name.startswith("per_query_rows") or "beam-temp" in name for name in evaluated)
    gcs_metrics = json.loads(bucket.blob("run/eval/metrics.json").download_as_bytes())
    assert gcs_metrics == json.loads((tmp_path / "eval" / "metrics.json").read_text())
    eval_manifest = read_stage_manifest(f"{remote}/run/eval", "madr-evaluation")
    assert {"metrics.json", "per_query.parquet"} <= eval_manifest["files"].keys()
    with FileSystems.open(f"{remote}/run/eval/per_query.parquet") as handle:
        gcs_per_query = pq.read_table(handle).to_pylist()
    assert gcs_per_query == pq.read_table(tmp_path / "eval" / "per_query.parquet").to_pylist()


def test_an_index_published_to_gcs_loads_through_localize(gcs, tiny_model_dir, tmp_path) -> None:
    # build-index writes a local folder; publish() puts it on GCS, where the evaluate stage's searcher
    # spec must localize it for ScaNN and find exactly what the local copy finds.
    data = _dataset(tmp_path)
    _embed(str(data["products"]), tiny_model_dir, str(tmp_path / "embeddings"))
    index_embeddings(str(tmp_path / "embeddings"), str(tmp_path / "index"))
    target = f"gs://{BUCKET}/published/index"
    written = publish(str(tmp_path / "index"), target)
    index_dir = tmp_path / "index"
    local_files = {p.relative_to(index_dir).as_posix() for p in index_dir.rglob("*") if p.is_file()}
    assert {path[len(target) + 1 :] for path in written} == local_files
    assert any("/" in name for name in local_files)  # the ScaNN assets sit in a subfolder

    spec = SearcherSpec("ann", target)
    assert spec.corpus_size() == 36
    searcher, reference = spec.open(), open_index(tmp_path / "index")
    _, matrix, _ = read_embeddings(str(tmp_path / "embeddings"))
    found, expected = searcher.search(matrix[:5], 10), reference.search(matrix[:5], 10)
    assert found.ids == expected.ids
    np.testing.assert_allclose(found.scores, expected.scores)


def test_localize_and_publish_copy_bytes_verbatim(gcs, tmp_path) -> None:
    # A .gz name must not be (de)compressed on the way, as FileSystems does by default.
    source = tmp_path / "source"
    (source / "nested").mkdir(parents=True)
    (source / "a.json").write_text('{"x": 1}\n')
    (source / "nested" / "b.jsonl.gz").write_bytes(b"not really gzip \x00\xff")
    publish(str(source), f"gs://{BUCKET}/copy")
    local = localize(f"gs://{BUCKET}/copy", str(tmp_path / "back"))
    assert local == str(tmp_path / "back")
    assert (tmp_path / "back" / "a.json").read_text() == '{"x": 1}\n'
    assert (tmp_path / "back" / "nested" / "b.jsonl.gz").read_bytes() == b"not really gzip \x00\xff"
    assert localize(str(source), str(tmp_path / "unused")) == str(source)  # local paths are used in place
    with pytest.raises(FileNotFoundError, match="holds no files"):
        localize(f"gs://{BUCKET}/nothing-here", str(tmp_path / "empty"))


def test_local_output_publishes_only_when_the_block_succeeds(gcs, tmp_path) -> None:
    with local_output(str(tmp_path)) as folder:
        assert folder == str(tmp_path)  # a local target is written in place
    with pytest.raises(RuntimeError), local_output(f"gs://{BUCKET}/failed") as folder:
        Path(folder, "half.json").write_text("{")
        raise RuntimeError("the writer failed")
    assert _blobs(gcs, "failed/") == set()
    with local_output(f"gs://{BUCKET}/done") as folder:
        Path(folder, "whole.json").write_text("{}")
    assert _blobs(gcs, "done/") == {"whole.json"}


def test_beams_gcs_client_is_anonymous_and_talks_to_the_emulator(gcs) -> None:
    # Without the google.auth patch Beam spends ~22 s retrying google.auth.default() first.
    started = time.monotonic()
    client = GcsIO(pipeline_options=PipelineOptions(["--project", gcs.project])).client
    assert time.monotonic() - started < 5
    assert client.api_endpoint == gcs.endpoint
    assert isinstance(client._credentials, AnonymousCredentials)
    assert client.project == gcs.project
    assert GcsIO().client.project is None  # Beam passes --project through, even when it is unset


def test_an_emulator_that_does_not_answer_in_time_fails_fast_and_says_so() -> None:
    started = time.monotonic()
    silent = r"did not answer on http://127\.0\.0\.1:\d+ within 0s"
    with pytest.raises(EmulatorError, match=silent), running_emulator(timeout=0):
        pass
    assert time.monotonic() - started < 10


def test_publish_copies_the_top_level_manifest_last(gcs, tmp_path) -> None:
    source = tmp_path / "artifact"
    (source / "z").mkdir(parents=True)
    for name in ("manifest.json", "ids.parquet", "z/postings.npy", "z/manifest.json"):
        (source / name).write_text(name)
    written = publish(str(source), f"gs://{BUCKET}/ordered")
    assert written[-1] == f"gs://{BUCKET}/ordered/manifest.json" and len(written) == 4


def test_build_sparse_index_writes_to_gcs_what_it_writes_locally(gcs, tmp_path) -> None:
    """Issue 50: `madr build-sparse-index --output gs://...` was not supported at all."""
    from jobs.cli import main
    from tests.conftest import save_tiny_uhd_model

    data = _dataset(tmp_path)
    model = save_tiny_uhd_model(tmp_path / "uhd", dimensions=64, winners=4)
    argv = ["build-sparse-index", "--model", str(model), "--products", str(data["products"])]
    assert main([*argv, "--output", str(tmp_path / "local-sparse")]) == 0
    target = f"gs://{BUCKET}/sparse"
    assert main([*argv, "--output", target]) == 0
    assert not FileSystems.match([f"gs://{BUCKET}/sparse.checkpoints/**"])[0].metadata_list
    copied = open_index(localize(target, str(tmp_path / "back")))
    local = open_index(tmp_path / "local-sparse")
    assert (copied.size, copied.nnz) == (local.size, local.nnz)
    assert main([*argv, "--output", target]) == 2  # an output that holds objects is refused
