"""Verify before use: every stage checks its input artifacts against their manifests (issue 13, item 1).

A changed model, tokenizer or embeddings shard is refused before any work, naming the file and both
hashes; --no_verify lets it through with a warning; a model that produces non-finite or all-zero
vectors has those rows dead-lettered, and the job fails past --max_dead_letter_fraction.
"""

from __future__ import annotations

import json
import logging
import re
import shutil
import struct
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from apache_beam.ml.inference.base import PredictionResult
from safetensors.torch import load_file, save_file

from jobs.cli import main, parse_command
from model import new_encoder
from pipelines.embed.batches import EncodedBatch, ProductBatch, _ToEmbeddingTable, embedding_defect
from pipelines.embed.counts import DeadLetterThresholdExceeded
from pipelines.embed.enrich import EnrichConfig, enrich_catalog
from pipelines.embed.export import ExportVertexConfig, export_vertex
from pipelines.embed.stage import embed_catalog
from pipelines.evaluate.stage import evaluate_retrieval
from pipelines.index.partitioned import build_partitioned
from pipelines.inference import ModelIdentity
from pipelines.storage.stage_manifests import write_stage_manifest
from pipelines.storage.verify import ModelMismatchError, model_fingerprint
from product_data.synthetic import SyntheticConfig, generate_benchmark
from schemas import EMBEDDING_ANNOTATION_COLUMNS, ArtifactError, embedding_schema, write_manifest
from schemas.manifest import sha256_file
from tests.conftest import index_embeddings, tiny_backbone
from tests.test_embed_pipeline import catalog, write_catalog, write_test_queries

WEIGHTS = "model.safetensors"
SHARD = "embeddings-00000-of-00001.parquet"
DIM = 8


def _copy(source: Path, target: Path) -> Path:
    return Path(shutil.copytree(source, target))


def _listed_sha256(folder: Path, name: str) -> str:
    return json.loads((folder / "manifest.json").read_text())["files"][name]["sha256"]


def _assert_names_file_and_both_hashes(error: pytest.ExceptionInfo, path: Path, expected: str) -> None:
    message = str(error.value)
    actual = sha256_file(path)
    assert actual != expected
    assert message.startswith(f"{path}: sha256 {actual} does not match the manifest's {expected}; ")
    assert "the artifact was changed after it was written: " in message


def _flip_first_weight_byte(model: Path) -> Path:
    """XOR the lowest byte of the first float32 weight: a change nothing downstream would notice."""
    path = model / WEIGHTS
    data = bytearray(path.read_bytes())
    (header,) = struct.unpack("<Q", data[:8])  # safetensors: u64 header length, JSON header, tensors
    data[8 + header] ^= 0x01
    path.write_bytes(bytes(data))
    return path


def _embed_flags(tmp_path: Path, model: Path, count: int = 6) -> list[str]:
    products = write_catalog(tmp_path / "products.parquet", catalog(count))
    return ["--products", products, "--model", str(model), "--output", str(tmp_path / "embeddings")]


# --- the model ---------------------------------------------------------------------------------


def test_a_flipped_byte_in_the_weights_is_refused_by_embed(tmp_path: Path, tiny_model_dir: Path) -> None:
    model = _copy(tiny_model_dir, tmp_path / "model")
    weights = _flip_first_weight_byte(model)
    with pytest.raises(ArtifactError) as refused:
        embed_catalog(*parse_command("embed", _embed_flags(tmp_path, model)))
    _assert_names_file_and_both_hashes(refused, weights, _listed_sha256(tiny_model_dir, WEIGHTS))
    assert "madr train" in str(refused.value)  # the fix
    assert not (tmp_path / "embeddings").exists()  # refused before anything was written


def test_a_swapped_tokenizer_is_refused_by_evaluate(tmp_path: Path, tiny_model_dir: Path) -> None:
    model = _copy(tiny_model_dir, tmp_path / "model")
    tokenizer = json.loads((model / "tokenizer.json").read_text())
    tokenizer["model"]["vocab"]["sock"], tokenizer["model"]["vocab"]["shoe"] = (
        tokenizer["model"]["vocab"]["shoe"],
        tokenizer["model"]["vocab"]["sock"],
    )
    (model / "tokenizer.json").write_text(json.dumps(tokenizer))
    # The queries and judgments are never opened: the model is checked before anything else.
    flags = ["--queries", "q.parquet", "--judgments", "j.parquet", "--model", str(model)]
    with pytest.raises(ArtifactError) as refused:
        evaluate_retrieval(
            *parse_command("evaluate", [*flags, "--output", str(tmp_path / "eval"), "--searcher", "exact"])
        )
    _assert_names_file_and_both_hashes(
        refused, model / "tokenizer.json", _listed_sha256(model, "tokenizer.json")
    )


def test_an_added_file_or_a_missing_manifest_is_refused(tmp_path: Path, tiny_model_dir: Path) -> None:
    model = _copy(tiny_model_dir, tmp_path / "model")
    # The tokenizer loader would read this file by name; the manifest never saw it.
    (model / "special_tokens_map.json").write_text('{"cls_token": "[SEP]"}')
    with pytest.raises(ArtifactError, match=r"special_tokens_map\.json is not listed in the manifest\.json"):
        embed_catalog(*parse_command("embed", _embed_flags(tmp_path, model)))
    (model / "special_tokens_map.json").unlink()
    (model / "manifest.json").unlink()
    with pytest.raises(ArtifactError, match=r"has no manifest\.json: it is not a finished madr-model"):
        embed_catalog(*parse_command("embed", _embed_flags(tmp_path, model)))


def test_no_verify_embeds_with_a_changed_model_and_warns(
    tmp_path: Path, tiny_model_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    model = _copy(tiny_model_dir, tmp_path / "model")
    _flip_first_weight_byte(model)
    with caplog.at_level(logging.WARNING, logger="pipelines.storage.verify"):
        counts = embed_catalog(*parse_command("embed", [*_embed_flags(tmp_path, model), "--no_verify"]))
    assert counts["products_embedded"] == 6
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("--no_verify" in w and str(model) in w for w in warnings), warnings


# --- the embeddings ----------------------------------------------------------------------------


def _embeddings(folder: Path, count: int = 64) -> Path:
    """An embed output as `madr embed` leaves it: one shard and its manifest."""
    folder.mkdir(parents=True)
    vectors = np.random.default_rng(0).normal(size=(count, DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)  # as the encoders write them
    rows = [
        {
            "product_id": f"p{i}",
            "embedding": vectors[i].tolist(),
            "model_id": "m",
            "model_version": "1",
            "content_hash": "0" * 64,
            **dict.fromkeys(EMBEDDING_ANNOTATION_COLUMNS),
        }
        for i in range(count)
    ]
    pq.write_table(pa.Table.from_pylist(rows, schema=embedding_schema(DIM)), folder / SHARD)
    info = {"model_id": "m", "model_version": "1", "dimension": DIM, "counts": {"products_embedded": count}}
    write_stage_manifest(str(folder), kind="madr-embeddings", info=info)
    return folder


def _tamper(folder: Path) -> Path:
    """Rewrite the shard with one vector changed: still valid Parquet, so only its hash can tell."""
    table = pq.read_table(folder / SHARD).to_pylist()
    table[3]["embedding"] = [DIM**-0.5] * DIM
    pq.write_table(pa.Table.from_pylist(table, schema=embedding_schema(DIM)), folder / SHARD)
    return folder / SHARD


def _products(tmp_path: Path) -> str:
    return write_catalog(tmp_path / "catalog.parquet", catalog(4))


# Every stage that reads an embed output, called as its command calls it.
READERS: dict[str, Callable[[Path, Path], object]] = {
    "build-index": lambda emb, tmp: index_embeddings(str(emb), str(tmp / "index")),
    "build-index --num_index_shards": lambda emb, tmp: build_partitioned(
        *parse_command(
            "build-index",
            ["--embeddings", str(emb), "--output", str(tmp / "index"), "--num_index_shards", "2"],
        )
    ),
    "enrich": lambda emb, tmp: enrich_catalog(
        EnrichConfig(products=_products(tmp), embeddings=str(emb), output=str(tmp / "enriched"))
    ),
    "export-vertex": lambda emb, tmp: export_vertex(
        ExportVertexConfig(products=_products(tmp), embeddings=str(emb), output=str(tmp / "vertex"))
    ),
}


@pytest.mark.parametrize("stage", sorted(READERS))
def test_a_tampered_embeddings_shard_is_refused(tmp_path: Path, stage: str) -> None:
    embeddings = _embeddings(tmp_path / "embeddings")
    expected = _listed_sha256(embeddings, SHARD)
    shard = _tamper(embeddings)
    with pytest.raises(ArtifactError) as refused:
        READERS[stage](embeddings, tmp_path)
    _assert_names_file_and_both_hashes(refused, shard, expected)
    assert "madr embed" in str(refused.value)


def test_evaluate_refuses_tampered_embeddings(tmp_path: Path, tiny_model_dir: Path) -> None:
    embeddings = _embeddings(tmp_path / "embeddings")
    expected = _listed_sha256(embeddings, SHARD)
    shard = _tamper(embeddings)
    flags = ["--queries", "q.parquet", "--judgments", "j.parquet", "--model", str(tiny_model_dir)]
    flags += ["--embeddings", str(embeddings), "--searcher", "exact", "--output", str(tmp_path / "eval")]
    with pytest.raises(ArtifactError) as refused:
        evaluate_retrieval(*parse_command("evaluate", flags))
    _assert_names_file_and_both_hashes(refused, shard, expected)


def test_a_shard_added_after_the_manifest_is_refused(tmp_path: Path) -> None:
    embeddings = _embeddings(tmp_path / "embeddings")
    shutil.copy(embeddings / SHARD, embeddings / "embeddings-stale.parquet")  # read by the shard glob
    with pytest.raises(ArtifactError, match=re.escape("embeddings-stale.parquet is not listed")):
        index_embeddings(str(embeddings), str(tmp_path / "index"))


def test_no_verify_builds_the_index_from_tampered_embeddings_and_warns(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    embeddings = _embeddings(tmp_path / "embeddings")
    _tamper(embeddings)
    out = tmp_path / "index"
    with caplog.at_level(logging.WARNING, logger="pipelines.storage.verify"):
        assert main(["build-index", "--embeddings", str(embeddings), "--out", str(out), "--no_verify"]) == 0
    assert "indexed 64 x 8" in capsys.readouterr().out
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("--no_verify" in w and str(embeddings) in w for w in warnings), warnings
    # Without it, the same command refuses: one line naming the file, exit code 2.
    assert main(["build-index", "--embeddings", str(embeddings), "--out", str(tmp_path / "again")]) == 2
    refusal = capsys.readouterr().err.strip().splitlines()[-1]
    assert refusal.startswith("madr build-index: error: ") and "does not match the manifest" in refusal


# --- the vectors the embed stage writes --------------------------------------------------------


def test_embedding_defect_names_non_finite_and_zero_vectors() -> None:
    assert embedding_defect(np.array([0.6, 0.8], np.float32)) is None
    assert "1 of 3 values are not finite" in str(embedding_defect(np.array([0.0, np.nan, 1.0], np.float32)))
    assert "not finite" in str(embedding_defect(np.array([np.inf, 0.0], np.float32)))
    assert "every value is zero" in str(embedding_defect(np.zeros(4, np.float32)))


def test_bad_vectors_become_dead_letters_and_good_ones_rows(tiny_model_dir: Path) -> None:
    identity = ModelIdentity.of(str(tiny_model_dir))
    to_table = _ToEmbeddingTable(identity)
    keys = ["good", "nan", "zero", "failed", "good2"]
    vectors = np.zeros((5, identity.dimension), dtype=np.float32)
    vectors[0, 0] = vectors[4, 1] = 1.0
    vectors[1, :2] = [np.nan, 1.0]
    products = ProductBatch(keys, [f"text {key}" for key in keys], [f"hash {key}" for key in keys])
    encoded = EncodedBatch(vectors, None, {3: "RuntimeError('boom')"})
    out = list(to_table.process(PredictionResult(products, encoded)))
    letters = {letter.value["record_id"]: letter.value["reason"] for letter in out if hasattr(letter, "tag")}
    assert all(letter.tag == "dead_letters" for letter in out if hasattr(letter, "tag"))
    assert "not finite" in letters["nan"] and "every value is zero" in letters["zero"]
    assert "inference failed: RuntimeError('boom')" in letters["failed"] and len(letters) == 3
    (table,) = [item for item in out if isinstance(item, pa.Table)]
    assert table.schema == embedding_schema(identity.dimension)
    assert table.column("product_id").to_pylist() == ["good", "good2"]
    assert table.column("content_hash").to_pylist() == ["hash good", "hash good2"]
    np.testing.assert_array_equal(
        np.stack(table.column("embedding").to_numpy(zero_copy_only=False)), vectors[[0, 4]]
    )


def _broken_model(tmp_path: Path, source: Path, value: float) -> Path:
    """The tiny model with its projection set to `value` (0: all-zero vectors, NaN: NaN vectors),
    its manifest rewritten: verification passes, only the vectors can tell."""
    model = _copy(source, tmp_path / "broken-model")
    (model / "manifest.json").unlink()
    weights = load_file(str(model / WEIGHTS))
    for name in ("projections.shared.weight", "projections.shared.bias"):
        weights[name] = torch.full_like(weights[name], value)
    save_file(weights, str(model / WEIGHTS), metadata={"variant": "bibert"})
    write_manifest(model, "madr-model", {"variant": "bibert"})
    return model


def _letters(folder: Path) -> list[dict]:
    return [
        json.loads(line) for f in folder.glob("dead_letters*.jsonl") for line in f.read_text().splitlines()
    ]


@pytest.mark.parametrize(("value", "reason"), [(0.0, "every value is zero"), (float("nan"), "not finite")])
def test_a_model_writing_bad_vectors_fails_the_job_with_them_dead_lettered(
    tmp_path: Path, tiny_model_dir: Path, value: float, reason: str
) -> None:
    model = _broken_model(tmp_path, tiny_model_dir, value)
    flags = _embed_flags(tmp_path, model)
    with pytest.raises(
        DeadLetterThresholdExceeded, match=r"6 of 6 products .*6 of them for an invalid embedding"
    ):
        embed_catalog(*parse_command("embed", flags))
    # The failed output is not published: its dead letters wait in the staging folder (fresh_output).
    letters = _letters(tmp_path / ".embeddings.staging")
    assert sorted(letter["record_id"] for letter in letters) == [f"p{i}" for i in range(6)]
    assert all(reason in letter["reason"] for letter in letters)
    assert not (tmp_path / "embeddings").exists()  # so no later stage can read it

    if value == 0.0:  # under the threshold the job succeeds, and the counts still reconcile
        counts = embed_catalog(*parse_command("embed", [*flags, "--max_dead_letter_fraction", "1"]))
        assert (counts["products_read"], counts["products_embedded"]) == (6, 0)
        assert counts["products_dead_lettered"] == counts["embeddings_invalid"] == 6


# --- commands that load a model outside Beam ---------------------------------------------------


def test_explain_refuses_a_flipped_byte_and_no_verify_lets_it_through(
    tmp_path: Path,
    tiny_model_dir: Path,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    model = _copy(tiny_model_dir, tmp_path / "model")
    weights = _flip_first_weight_byte(model)
    flags = ["explain", "--model", str(model), "--query", "breville juicer", "--product", "Juicer"]
    assert main(flags) == 2
    error = capsys.readouterr().err
    expected, actual = _listed_sha256(tiny_model_dir, WEIGHTS), sha256_file(weights)
    assert error.startswith(f"madr explain: error: {weights}: sha256 {actual} does not match the manifest's ")
    assert expected in error and actual != expected
    with caplog.at_level(logging.WARNING, logger="pipelines.storage.verify"):
        assert main([*flags, "--no_verify"]) == 0
    assert "score" in capsys.readouterr().out.lower()
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("--no_verify" in w and str(model) in w for w in warnings), warnings


def test_neighbours_refuses_a_tampered_model(
    tmp_path: Path, tiny_model_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = _copy(tiny_model_dir, tmp_path / "model")
    weights = _flip_first_weight_byte(model)
    flags = ["neighbours", "--model", str(model), "--aspect", "category", "--value", "Bedding"]
    assert main(flags) == 2
    assert f"madr neighbours: error: {weights}: sha256 " in capsys.readouterr().err


def test_train_init_from_a_tampered_model_is_refused(
    tmp_path: Path,
    tiny_model_dir: Path,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    model = _copy(tiny_model_dir, tmp_path / "model")
    weights = _flip_first_weight_byte(model)
    data = str(tmp_path / "data")
    generate_benchmark(SyntheticConfig(num_products=80, num_queries=8, seed=5), data)
    flags = ["train", "--data", data, "--out", str(tmp_path / "out"), "--init_from", str(model)]
    flags += ["--max_steps", "1", "--batch_size", "4", "--max_document_length", "16"]
    assert main(flags) == 2
    error = capsys.readouterr().err
    expected = _listed_sha256(tiny_model_dir, WEIGHTS)
    actual = sha256_file(weights)
    assert f"madr train: error: {weights}: sha256 {actual} does not match the manifest's " in error
    assert expected in error
    assert not (tmp_path / "out").exists() and not (tmp_path / ".out.staging").exists()
    with caplog.at_level(logging.WARNING, logger="pipelines.storage.verify"):
        assert main([*flags, "--no_verify"]) == 0
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("--no_verify" in w and str(model) in w for w in warnings), warnings


def test_build_sparse_index_refuses_a_tampered_model(
    tmp_path: Path, tiny_model_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = _copy(tiny_model_dir, tmp_path / "model")
    weights = _flip_first_weight_byte(model)
    products = write_catalog(tmp_path / "products.parquet", catalog(4))
    flags = ["--model", str(model), "--products", products, "--out", str(tmp_path / "i")]
    assert main(["build-sparse-index", *flags]) == 2
    assert f"madr build-sparse-index: error: {weights}: sha256 " in capsys.readouterr().err
    assert not (tmp_path / "i").exists()


# --- artifacts of another model -------------------------------------------------------------------


def test_evaluate_refuses_an_index_and_embeddings_of_another_model(
    tmp_path: Path, tiny_model_dir: Path
) -> None:
    """Issue 24: an index built from model B's vectors, evaluated with model A, ranked nonsense at exit 0.
    The embeddings and the index record the model's fingerprint; evaluate compares it with --model's."""
    torch.manual_seed(7)
    other, tokenizer = new_encoder(
        "bibert", pretrained=False, backbone=tiny_backbone(), projection_dim=16, model_version="test"
    )
    model_b = tmp_path / "model-b"
    other.save_pretrained(model_b, tokenizer)
    write_manifest(model_b, "madr-model", {"variant": "bibert", "model_version": "test"})
    assert model_fingerprint(str(model_b)) != model_fingerprint(str(tiny_model_dir))

    embed_catalog(*parse_command("embed", _embed_flags(tmp_path, model_b, count=12)))
    embeddings = tmp_path / "embeddings"
    assert json.loads((embeddings / "manifest.json").read_text())["model_fingerprint"] == model_fingerprint(
        str(model_b)
    )
    index_embeddings(str(embeddings), str(tmp_path / "index"), depth=10)
    queries, judgments = write_test_queries(tmp_path)
    flags = ["--queries", queries, "--judgments", judgments, "--index", str(tmp_path / "index")]
    flags += ["--embeddings", str(embeddings), "--searcher", "ann", "--depth", "10"]

    with pytest.raises(
        ModelMismatchError, match=r"--index .* was made by the model with fingerprint"
    ) as refused:
        evaluate_retrieval(
            *parse_command(
                "evaluate", [*flags, "--model", str(tiny_model_dir), "--output", str(tmp_path / "a")]
            )
        )
    assert "--embeddings" in str(refused.value) and "--allow_model_mismatch" in str(refused.value)
    assert not (tmp_path / "a").exists()

    # The model that made them passes; another one passes only when asked, and the output says so.
    evaluate_retrieval(
        *parse_command("evaluate", [*flags, "--model", str(model_b), "--output", str(tmp_path / "b")])
    )
    assert "allowed_model_mismatches" not in json.loads((tmp_path / "b" / "manifest.json").read_text())
    allowed = [
        *flags,
        "--model",
        str(tiny_model_dir),
        "--output",
        str(tmp_path / "c"),
        "--allow_model_mismatch",
    ]
    evaluate_retrieval(*parse_command("evaluate", allowed))
    recorded = json.loads((tmp_path / "c" / "manifest.json").read_text())["allowed_model_mismatches"]
    assert len(recorded) == 2 and all(str(tiny_model_dir) in line for line in recorded)
