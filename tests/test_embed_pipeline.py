"""The embed stage on a real Beam runner, a real tokenizer and a tiny random model."""

from __future__ import annotations

import json
from pathlib import Path

import apache_beam as beam
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from apache_beam.ml.inference.base import PredictionResult, RunInference
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from jobs.cli import parse_command
from model import Side, content_hash, document_text, load_encoder
from model.text_encoder import length_sorted_chunks
from pipelines.embed.batches import ProductBatchHandler
from pipelines.embed.counts import DeadLetterThresholdExceeded
from pipelines.embed.stage import (
    EmbedConfig,
    EmbedProducts,
    embed_catalog,
)
from pipelines.inference import EncoderModelHandler, ModelIdentity, TextToEncode, load_text_encoder
from pipelines.io.catalog_io import DEAD_LETTERS, VALID, ListRowGroups, ReadValidatedFn
from pipelines.io.parquet_reading import read_embeddings
from pipelines.settings.options import EmbedSettings, ModelSettings, PredictionThreshold
from pipelines.settings.stage_config import config_from_values
from schemas import JUDGMENT_SCHEMA, PRODUCT_SCHEMA, QUERY_SCHEMA, validate_product


def catalog(count: int) -> list[dict]:
    return [
        {
            "product_id": f"p{i}",
            "title": f"Nike crew sock {i}",
            "description": "soft cotton blend " * (i % 9) or None,
            "bullet_points": ["machine washable"] if i % 2 else [],
            "brand": "Nike",
            "color": None,
            "category_path": ["Clothing", "Socks"],
            "aspects": {"brand": ["Nike"]},
            "locale": "us",
        }
        for i in range(count)
    ]


def write_catalog(path: Path, rows: list[dict], row_group_size: int | None = None) -> str:
    pq.write_table(pa.Table.from_pylist(rows, schema=PRODUCT_SCHEMA), path, row_group_size=row_group_size)
    return str(path)


def write_test_queries(folder: Path, count: int = 4, stride: int = 5) -> tuple[str, str]:
    """`count` test queries over the products of `catalog`, each judging products p{i*stride}..+2 with
    grades 3, 2, 1: the queries.parquet and judgments.parquet the evaluation stages read."""
    queries = [
        {"query_id": f"q{i}", "text": f"nike sock {i}", "aspects": None, "split": "test"}
        for i in range(count)
    ]
    judgments = [
        {"query_id": f"q{i}", "product_id": f"p{i * stride + j}", "grade": 3 - j, "label": None}
        for i in range(count)
        for j in range(3)
    ]
    paths = str(folder / "queries.parquet"), str(folder / "judgments.parquet")
    pq.write_table(pa.Table.from_pylist(queries, schema=QUERY_SCHEMA), paths[0])
    pq.write_table(pa.Table.from_pylist(judgments, schema=JUDGMENT_SCHEMA), paths[1])
    return paths


def test_length_sorted_chunks_cover_every_index_once() -> None:
    chunks = length_sorted_chunks([5, 1, 9, 3, 7], 2)
    assert chunks == [[1, 3], [0, 4], [2]]


def test_read_validated_splits_valid_and_dead_letters_with_positions(tmp_path, local_runner) -> None:
    # Two files of row groups of 2: positions must count rows across row groups, per file.
    rows = [*catalog(4), {**catalog(1)[0], "product_id": "no-title", "title": ""}]
    first = write_catalog(tmp_path / "a.parquet", rows, row_group_size=2)
    second = write_catalog(tmp_path / "b.parquet", [{**catalog(1)[0], "product_id": "q0"}], row_group_size=2)
    with TestPipeline(runner=local_runner) as pipeline:
        groups = pipeline | ListRowGroups(str(tmp_path / "*.parquet"))
        read = ReadValidatedFn("product", validate_product)
        products = groups | beam.ParDo(read).with_outputs(DEAD_LETTERS, main=VALID)
        expected = [*((f"p{i}", (first, i)) for i in range(4)), ("q0", (second, 0))]
        assert_that(
            products.valid | beam.Map(lambda p: (p.record["product_id"], p.position)), equal_to(expected)
        )
        assert_that(
            products.dead_letters | beam.Map(lambda d: (d["record_id"], "'title' is missing" in d["reason"])),
            equal_to([("no-title", True)]),
            label="dead letters",
        )
        assert_that(groups | beam.combiners.Count.Globally(), equal_to([4]), label="row groups")


def test_list_row_groups_names_a_pattern_that_matches_nothing(tmp_path) -> None:
    with pytest.raises(FileNotFoundError, match="no files match"):
        beam.Pipeline() | ListRowGroups(str(tmp_path / "*.parquet"))


def test_embed_products_matches_the_model_run_directly(tiny_model_dir, local_runner) -> None:
    products = catalog(23)
    encoder, tokenizer = load_encoder(tiny_model_dir)
    texts = [document_text(p) for p in products]
    expected = encoder.embed_texts(tokenizer, texts, Side.DOCUMENT).embedding.numpy()
    identity = ModelIdentity.of(str(tiny_model_dir))
    # Small chunks force length-sorted sub-batches; results must not depend on them.
    handler = ProductBatchHandler(
        ModelSettings(str(tiny_model_dir), batch_size=10, chunk_size=3), Side.DOCUMENT
    )

    def check(tables: list[pa.Table]) -> None:
        rows = [row for table in tables for row in table.to_pylist()]
        assert sorted(r["product_id"] for r in rows) == sorted(p["product_id"] for p in products)
        for row in rows:
            i = int(row["product_id"][1:])
            np.testing.assert_allclose(row["embedding"], expected[i], atol=2e-5)
            assert row["content_hash"] == content_hash(texts[i])
            assert (row["model_id"], row["model_version"]) == ("bibert", "test")

    with TestPipeline(runner=local_runner) as pipeline:
        embedded = pipeline | beam.Create(products) | EmbedProducts(handler, identity)
        assert_that(embedded["rows"], check)
        assert_that(embedded["dead_letters"], equal_to([]), label="no dead letters")


class _FailingHandler(ProductBatchHandler):
    """A model that raises for any batch holding a product whose text says BOOM."""

    def encode_texts(self, texts, model, tokens=None):
        if any("BOOM" in text for text in texts):
            raise RuntimeError("simulated inference failure")
        return super().encode_texts(texts, model, tokens)


def test_a_failing_batch_keeps_its_good_records_and_dead_letters_the_bad_one(
    tiny_model_dir, local_runner
) -> None:
    # One Beam batch of four holds the bad product: the three good ones must still be embedded.
    products = [*catalog(3), {**catalog(1)[0], "product_id": "boom", "title": "BOOM sock"}]
    identity = ModelIdentity.of(str(tiny_model_dir))
    handler = _FailingHandler(ModelSettings(str(tiny_model_dir), batch_size=4), Side.DOCUMENT)
    with TestPipeline(runner=local_runner) as pipeline:
        embedded = pipeline | beam.Create(products) | EmbedProducts(handler, identity)
        rows = embedded["rows"] | beam.FlatMap(lambda table: table.to_pylist())
        assert_that(rows | beam.Map(lambda r: r["product_id"]), equal_to(["p0", "p1", "p2"]))
        assert_that(
            embedded["dead_letters"]
            | beam.Map(lambda d: (d["record_id"], "simulated inference" in d["reason"])),
            equal_to([("boom", True)]),
            label="dead letters",
        )
        assert_that(rows | beam.combiners.Count.Globally(), equal_to([3]), label="each good record once")


def test_run_embed_writes_shards_dead_letters_and_a_manifest(tmp_path, tiny_model_dir) -> None:
    rows = [*catalog(40), {**catalog(1)[0], "product_id": "", "title": "no id"}]
    path = write_catalog(tmp_path / "products.parquet", rows)
    out = tmp_path / "embeddings"
    counts = embed_catalog(
        *parse_command(
            "embed",
            [
                "--products",
                path,
                "--model",
                str(tiny_model_dir),
                "--output",
                str(out),
                "--num_shards",
                "3",
                "--max_dead_letter_fraction",
                "0.05",
            ],
        )
    )
    assert counts["products_read"] == 41
    assert (counts["products_embedded"], counts["products_reused"], counts["products_dead_lettered"]) == (
        40,
        0,
        1,
    )
    ids, matrix, manifest = read_embeddings(str(out))
    assert sorted(ids) == sorted(f"p{i}" for i in range(40))
    assert matrix.shape == (40, 16) and matrix.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(matrix, axis=1), 1.0, atol=1e-5)
    assert len([name for name in manifest["files"] if name.startswith("embeddings-")]) == 3
    letters = [
        json.loads(line) for f in out.glob("dead_letters*.jsonl") for line in f.read_text().splitlines()
    ]
    assert [letter["reason"] for letter in letters] == ["product without a usable id: 'product_id' is empty"]


def test_too_many_dead_letters_fail_the_job_after_writing_them(tmp_path, tiny_model_dir) -> None:
    rows = [*catalog(10), *({**catalog(1)[0], "product_id": f"bad{i}", "title": ""} for i in range(2))]
    path = write_catalog(tmp_path / "products.parquet", rows)
    out = tmp_path / "embeddings"
    flags = ["--products", path, "--model", str(tiny_model_dir), "--output", str(out)]
    with pytest.raises(DeadLetterThresholdExceeded, match="2 of 12 products are dead letters") as failed:
        embed_catalog(*parse_command("embed", [*flags, "--max_dead_letter_fraction", "0.1"]))
    # The output is not published: the dead letters stay in the staging folder the message names.
    staging = tmp_path / ".embeddings.staging"
    assert f"in {staging} (the output was not published)" in str(failed.value)
    assert len((next(staging.glob("dead_letters*.jsonl"))).read_text().splitlines()) == 2
    assert not (staging / "manifest.json").exists() and not out.exists()  # never looks finished


def test_handler_loads_the_model_once_and_batches(tiny_model_dir, local_runner) -> None:
    handler = EncoderModelHandler(ModelSettings(str(tiny_model_dir), batch_size=4), Side.QUERY)
    assert handler.batch_elements_kwargs() == {"min_batch_size": 4, "max_batch_size": 4}
    with TestPipeline(runner=local_runner) as pipeline:
        results = (
            pipeline
            | beam.Create([TextToEncode(f"q{i}", f"query {i}") for i in range(9)])
            | RunInference(handler)
        )
        assert_that(
            results | beam.Map(lambda r: (r.example.key, isinstance(r, PredictionResult), r.inference.shape)),
            equal_to([(f"q{i}", True, (16,)) for i in range(9)]),
        )


def test_searcher_calibration_encodes_queries_as_the_pipeline_does(tiny_model_dir) -> None:
    """`--searcher auto` times the searchers on queries encoded with the stage's own model settings:
    int8 calibration vectors are the int8 pipeline's, not fp32 ones."""
    queries = [TextToEncode(f"q{i}", f"wool socks size {i}") for i in range(5)]
    vectors = {}
    for precision in ("fp32", "int8"):
        settings = ModelSettings(str(tiny_model_dir), precision=precision)
        handler = EncoderModelHandler(settings, Side.QUERY)
        by_pipeline = np.stack([r.inference for r in handler.run_inference(queries, handler.load_model())])
        vectors[precision] = load_text_encoder(settings).encode([q.text for q in queries], Side.QUERY)
        np.testing.assert_allclose(vectors[precision], by_pipeline, atol=1e-6)
    assert not np.allclose(vectors["fp32"], vectors["int8"], atol=1e-6)


@pytest.mark.parametrize("bad", ["", "/nonexistent/model"])
def test_a_missing_model_directory_is_named(bad: str) -> None:
    with pytest.raises(FileNotFoundError, match="not a madr model directory"):
        ModelIdentity.of(bad)


def test_a_driver_embeds_from_a_config_and_a_catalog_folder_reads_its_parquet_files(
    tmp_path, tiny_model_dir
) -> None:
    folder = tmp_path / "products"
    folder.mkdir()
    write_catalog(folder / "part-0.parquet", catalog(6))
    write_catalog(folder / "part-1.parquet", [{**p, "product_id": f"x{i}"} for i, p in enumerate(catalog(4))])
    config = EmbedConfig(
        model=ModelSettings(model=str(tiny_model_dir)),
        embed=EmbedSettings(products=str(folder)),
        output=str(tmp_path / "embeddings"),
    )
    counts = embed_catalog(config)
    # A folder used to be read as one file and dead-lettered whole.
    assert (counts["products_read"], counts["products_embedded"], counts["files_dead_lettered"]) == (
        10,
        10,
        0,
    )
    ids, _, manifest = read_embeddings(config.output)
    assert len(ids) == 10 and manifest["products"] == str(folder)


def test_the_flags_build_the_same_config_a_driver_would(tmp_path, tiny_model_dir) -> None:
    flags = ["--products", "p.parquet", "--model", str(tiny_model_dir), "--output", str(tmp_path / "out")]
    config, _ = parse_command("embed", [*flags, "--precision", "int8", "--min_confidence", "0.4"])
    assert config == EmbedConfig(
        model=ModelSettings(model=str(tiny_model_dir), precision="int8"),
        embed=EmbedSettings(products="p.parquet"),
        threshold=PredictionThreshold(0.4),
        output=str(tmp_path / "out"),
    )
    with pytest.raises(ValueError, match=r"missing required flag\(s\): --output, --products"):
        config_from_values(EmbedConfig, {"model": str(tiny_model_dir)})
    with pytest.raises(ValueError, match="max_dead_letter_fraction must be in"):
        parse_command("embed", [*flags, "--max_dead_letter_fraction", "2"])
