"""Nightly incremental embedding: reuse unchanged rows, embed new and changed, drop removed."""

from __future__ import annotations

import shutil

import numpy as np
import pyarrow as pa
import pytest

from jobs.cli import parse_command
from model import content_hash, document_text, load_encoder
from model.annotations import ANNOTATION_COLUMNS
from pipelines.embed.batches import ProductBatch
from pipelines.embed.dedupe import KeptCopy
from pipelines.embed.incremental import TonightKeys, _PlanFn, embedding_table
from pipelines.embed.key_index import KeyIndex, content_key, id_key
from pipelines.embed.stage import embed_catalog
from pipelines.inference import ModelIdentity
from pipelines.io.parquet_reading import read_embeddings, read_parquet_table
from pipelines.io.validated_batches import ValidatedBatch
from schemas import ArtifactError, embedding_schema, write_manifest
from tests.test_embed_pipeline import catalog, write_catalog


def _embed(products: str, model: str, out: str, *flags: str) -> dict[str, int]:
    options = ["--products", products, "--model", model, "--output", out, "--max_dead_letter_fraction", "0.2"]
    return embed_catalog(*parse_command("embed", [*options, *flags]))


@pytest.mark.parametrize("plan_chunk", [1024, 4])  # 4: the changed, new and duplicate fall in other chunks
def test_second_night_reuses_unchanged_products(tmp_path, tiny_model_dir, monkeypatch, plan_chunk) -> None:
    monkeypatch.setattr("pipelines.embed.incremental.PLAN_CHUNK", plan_chunk)
    first_night = catalog(30)
    monday = _embed(
        write_catalog(tmp_path / "mon.parquet", first_night), str(tiny_model_dir), str(tmp_path / "mon")
    )
    assert (monday["products_embedded"], monday["products_reused"]) == (30, 0)

    second_night = [dict(p) for p in first_night if p["product_id"] != "p3"]  # p3 left the catalog
    second_night[0]["title"] = "Nike crew sock 0, now in wool"  # p0 changed
    second_night.append({**first_night[1], "product_id": "p99"})  # new
    second_night.append({**first_night[5], "title": "another copy of p5"})  # duplicate id
    tuesday = _embed(
        write_catalog(tmp_path / "tue.parquet", second_night),
        str(tiny_model_dir),
        str(tmp_path / "tue"),
        "--previous",
        str(tmp_path / "mon"),
    )
    assert tuesday["products_read"] == 31
    assert tuesday["products_embedded"] == 2  # p0 (changed) and p99 (new)
    assert tuesday["products_reused"] == 28
    assert tuesday["products_dead_lettered"] == 1  # the duplicate of p5
    assert tuesday["products_dropped_since_previous"] == 1  # p3

    mon_ids, mon_vectors, _ = read_embeddings(str(tmp_path / "mon"))
    tue_ids, tue_vectors, manifest = read_embeddings(str(tmp_path / "tue"))
    assert manifest["counts"]["products_reused"] == 28
    assert sorted(tue_ids) == sorted({*mon_ids, "p99"} - {"p3"})
    monday_rows = dict(zip(mon_ids, mon_vectors, strict=True))
    tuesday_rows = dict(zip(tue_ids, tue_vectors, strict=True))
    np.testing.assert_array_equal(tuesday_rows["p7"], monday_rows["p7"])
    assert not np.allclose(tuesday_rows["p0"], monday_rows["p0"])
    # Reused rows are copied, not re-embedded, into a file set of their own.
    reused = read_parquet_table(str(tmp_path / "tue"), "embeddings-reused").to_pylist()
    assert sorted(row["product_id"] for row in reused) == sorted({*mon_ids} - {"p0", "p3"})
    assert all(row["model_version"] == "test" for row in reused)
    # Copied column-wise, every column as Monday wrote it (vector, hash, annotations).
    monday_written = {
        row["product_id"]: row for row in read_parquet_table(str(tmp_path / "mon"), "embeddings").to_pylist()
    }
    assert all(row == monday_written[row["product_id"]] for row in reused)


def test_rows_written_before_the_annotation_columns_are_reused_with_them_empty() -> None:
    old = pa.RecordBatch.from_pydict(
        {
            "product_id": ["p1"],
            "embedding": pa.array([[0.5, 0.5]], pa.list_(pa.float32())),  # a variable-size list then
            "model_id": ["bibert"],
            "model_version": ["1"],
            "content_hash": ["ab" * 32],
        }
    )
    table = embedding_table(old, 2)
    assert table.schema == embedding_schema(2)
    assert table.to_pylist()[0] == {
        **dict.fromkeys(ANNOTATION_COLUMNS),
        **{name: old.column(name)[0].as_py() for name in old.schema.names},
    }


def test_a_kept_copy_whose_key_another_id_shares_is_embedded_not_reused(tiny_model_dir) -> None:
    """64-bit keys of two ids can collide; the plan then never matches on them (embeds instead)."""
    identity = ModelIdentity.of(str(tiny_model_dir))
    product = catalog(1)[0]
    key, digest = id_key("p0"), content_key(content_hash(document_text(product)))
    previous = KeyIndex(np.array([key], dtype=np.uint64), np.array([digest], dtype=np.uint64))
    candidates = KeyIndex(repeated=np.array([key], dtype=np.uint64))
    plan = _PlanFn(identity, with_previous=True, batch_size=1)
    plan.start_bundle()

    def planned(sole_id: bool) -> list:
        kept = {"p0": KeptCopy(("f", 0), "h", sole_id)}
        tonight = TonightKeys()
        batch = pa.RecordBatch.from_pylist([product])
        read = ValidatedBatch("f", 0, batch, np.empty(0, np.int64), [(0, product)])
        outputs = list(plan.plan(read, candidates, kept, previous, tonight))
        assert [array.tolist() for array in tonight.arrays()] == [[key], [digest]]
        return outputs

    assert planned(sole_id=True) == []  # reused: nothing to embed
    text = document_text(product)
    assert planned(sole_id=False) == [ProductBatch(["p0"], [text], [content_hash(text)])]


def test_a_new_model_version_re_embeds_everything(tmp_path, tiny_model_dir) -> None:
    products = write_catalog(tmp_path / "catalog.parquet", catalog(12))
    _embed(products, str(tiny_model_dir), str(tmp_path / "v1"))
    encoder, tokenizer = load_encoder(tiny_model_dir)
    encoder.config = encoder.config.replace(model_version="test-2")
    new_model = tmp_path / "model-v2"
    encoder.save_pretrained(new_model, tokenizer)
    write_manifest(new_model, "madr-model", {"model_version": "test-2"})  # embed verifies the model
    counts = _embed(products, str(new_model), str(tmp_path / "v2"), "--previous", str(tmp_path / "v1"))
    assert (counts["products_embedded"], counts["products_reused"]) == (12, 0)


def test_previous_may_be_a_run_folder_but_must_be_finished(tmp_path, tiny_model_dir) -> None:
    products = write_catalog(tmp_path / "catalog.parquet", catalog(6))
    _embed(products, str(tiny_model_dir), str(tmp_path / "run" / "embeddings"))
    counts = _embed(
        products, str(tiny_model_dir), str(tmp_path / "next"), "--previous", str(tmp_path / "run")
    )
    assert counts["products_reused"] == 6
    (tmp_path / "run" / "embeddings" / "manifest.json").unlink()  # as after a crash mid-stage
    shutil.rmtree(tmp_path / "next")
    with pytest.raises(ArtifactError, match=r"is a finished embed output \(no manifest\.json of kind"):
        _embed(products, str(tiny_model_dir), str(tmp_path / "next"), "--previous", str(tmp_path / "run"))
