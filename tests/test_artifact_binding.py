"""Artifacts that vouch for each other (issue 24, item 1).

Each manifest records one digest over all its file entries (`schemas.manifest.files_digest`), so a file
swapped in from another valid artifact, with its manifest entry copied along, is refused. An index
records the embed output it was built from, and evaluate refuses it beside other --embeddings. embed
--previous reuses nothing from embeddings of other weights.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from bench.reliability_binding import swap_in
from index_builder import ScannIndex, ScannIndexBuilder
from index_builder.artifact import IndexArtifactError
from jobs.cli import parse_command
from model import new_encoder
from pipelines.embed.stage import embed_catalog
from pipelines.evaluate.stage import evaluate_retrieval
from pipelines.storage.stage_manifests import verify_stage_folder
from pipelines.storage.verify import ModelMismatchError, verify_model
from schemas import ArtifactError, write_manifest
from schemas.manifest import files_digest
from tests.conftest import index_embeddings, tiny_backbone
from tests.test_embed_pipeline import catalog, write_catalog, write_test_queries
from tests.test_verify_artifacts import SHARD, _embeddings

SWAPPED = "swapped in from another artifact"


def _index(vectors: np.ndarray, ids: list[str], folder: Path) -> Path:
    ScannIndexBuilder.for_corpus(len(ids), vectors.shape[1], depth=10).build(vectors, ids).save(
        folder, model_id="m", model_version="1"
    )
    return folder


@pytest.fixture(scope="module")
def two_indexes(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Two valid indexes of the same catalog, one over it in reversed order (other vectors too)."""
    root = tmp_path_factory.mktemp("indexes")
    rng = np.random.default_rng(5)
    vectors = rng.normal(size=(300, 8)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    ids = [f"sku-{i}" for i in range(300)]
    return _index(vectors, ids, root / "a"), _index(vectors[::-1].copy(), ids[::-1], root / "b")


@pytest.mark.parametrize("relative", ["ids.parquet", "scann"])
def test_index_files_swapped_in_from_another_index_with_their_entries_are_refused(
    two_indexes: tuple[Path, Path], tmp_path: Path, relative: str
) -> None:
    """Issue 24: ids.parquet from an index of the same catalog in reversed order gave recall 0.000, and a
    whole scann/ from another index passed every per-file check."""
    a, b = two_indexes
    copy = Path(shutil.copytree(a, tmp_path / "a"))
    ScannIndex.load(copy)  # whole before the swap
    swap_in(copy, b, relative)
    with pytest.raises(IndexArtifactError, match=SWAPPED) as refused:
        ScannIndex.load(copy)
    assert "madr build-index" in str(refused.value)


def test_an_embeddings_shard_swapped_in_with_its_entry_is_refused(tmp_path: Path) -> None:
    ours, theirs = _embeddings(tmp_path / "ours", count=64), _embeddings(tmp_path / "theirs", count=32)
    verify_stage_folder(str(ours), "madr-embeddings", "fix")
    swap_in(ours, theirs, SHARD)
    with pytest.raises(ArtifactError, match=SWAPPED):
        verify_stage_folder(str(ours), "madr-embeddings", "run `madr embed` again")


def _other_model(folder: Path) -> Path:
    torch.manual_seed(11)
    encoder, tokenizer = new_encoder(
        "bibert", pretrained=False, backbone=tiny_backbone(), projection_dim=16, model_version="test"
    )
    encoder.save_pretrained(folder, tokenizer)
    write_manifest(folder, "madr-model", {"variant": "bibert", "model_version": "test"})
    return folder


def test_model_weights_swapped_in_with_their_entry_are_refused(tmp_path: Path, tiny_model_dir: Path) -> None:
    ours = Path(shutil.copytree(tiny_model_dir, tmp_path / "ours"))
    swap_in(ours, _other_model(tmp_path / "theirs"), "model.safetensors")
    with pytest.raises(ArtifactError, match=SWAPPED):
        verify_model(str(ours))


def test_a_manifest_whose_digest_was_rewritten_too_is_still_checked_file_by_file(
    two_indexes: tuple[Path, Path], tmp_path: Path
) -> None:
    """The digest binds files to each other; it is not a signature: whoever rewrites it as well gets an
    index whose files all match, and the per-file checks are what is left. The test keeps that honest."""
    copy = Path(shutil.copytree(two_indexes[0], tmp_path / "a"))
    manifest = json.loads((copy / "manifest.json").read_text())
    manifest["files"]["ids.parquet"]["sha256"] = "0" * 64
    manifest["files_digest"] = files_digest(manifest["files"])
    (copy / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(IndexArtifactError, match=r"ids\.parquet: sha256 .* does not match"):
        ScannIndex.load(copy)


def test_evaluate_refuses_an_index_built_from_other_embeddings(tmp_path: Path, tiny_model_dir: Path) -> None:
    """Same model, two embed outputs: the index of the first beside the second is refused both ways of
    being wrong named, and --allow_model_mismatch records it."""
    model = str(tiny_model_dir)
    for name, count in (("first", 12), ("second", 10)):
        products = write_catalog(tmp_path / f"{name}.parquet", catalog(count))
        embed_catalog(
            *parse_command(
                "embed", ["--products", products, "--model", model, "--output", str(tmp_path / name)]
            )
        )
    index_embeddings(str(tmp_path / "first"), str(tmp_path / "index"), depth=10)
    manifest = json.loads((tmp_path / "index" / "manifest.json").read_text())
    assert (
        manifest["extra"]["embeddings_digest"]
        == json.loads((tmp_path / "first" / "manifest.json").read_text())["files_digest"]
    )
    queries, judgments = write_test_queries(tmp_path)
    flags = [
        "--queries",
        queries,
        "--judgments",
        judgments,
        "--model",
        model,
        "--index",
        str(tmp_path / "index"),
    ]
    flags += ["--searcher", "ann", "--depth", "10"]

    evaluate_retrieval(
        *parse_command(
            "evaluate", [*flags, "--embeddings", str(tmp_path / "first"), "--output", str(tmp_path / "ok")]
        )
    )
    with pytest.raises(ModelMismatchError, match=r"was built from the embeddings with digest") as refused:
        evaluate_retrieval(
            *parse_command(
                "evaluate",
                [*flags, "--embeddings", str(tmp_path / "second"), "--output", str(tmp_path / "no")],
            )
        )
    assert str(tmp_path / "second") in str(refused.value) and not (tmp_path / "no").exists()


def test_embed_reuses_nothing_from_previous_embeddings_of_other_weights(
    tmp_path: Path, tiny_model_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Reused rows are matched by model id and version, names a retrained model may share: the weights'
    fingerprint decides whether the previous run's vectors are this model's."""
    other = _other_model(tmp_path / "other")
    products = write_catalog(tmp_path / "products.parquet", catalog(8))
    embed_catalog(
        *parse_command(
            "embed", ["--products", products, "--model", str(other), "--output", str(tmp_path / "old")]
        )
    )
    flags = ["--products", products, "--model", str(tiny_model_dir), "--previous", str(tmp_path / "old")]
    counts = embed_catalog(*parse_command("embed", [*flags, "--output", str(tmp_path / "new")]))
    assert counts["products_embedded"] == 8 and counts.get("products_reused", 0) == 0
    assert "was embedded by another model" in caplog.text

    again = embed_catalog(
        *parse_command("embed", [*flags[:-1], str(tmp_path / "new"), "--output", str(tmp_path / "newer")])
    )
    assert again.get("products_reused", 0) == 8  # the same weights: everything reused


def test_a_model_or_embeddings_file_linked_from_outside_is_refused(
    tmp_path: Path, tiny_model_dir: Path
) -> None:
    """Issue 24: a symlinked model.safetensors pointing outside the model was accepted (its bytes matched).
    The folder itself may be a link (a `current` pointing to a version)."""
    model = Path(shutil.copytree(tiny_model_dir, tmp_path / "model"))
    current = tmp_path / "current"
    current.symlink_to(model)
    verify_model(str(current))
    outside = tmp_path / "outside.safetensors"
    (model / "model.safetensors").rename(outside)
    (model / "model.safetensors").symlink_to(outside)
    with pytest.raises(ArtifactError, match=r"model\.safetensors is a symbolic link to .*outside"):
        verify_model(str(model))

    embeddings = _embeddings(tmp_path / "embeddings")
    (embeddings / SHARD).rename(tmp_path / SHARD)
    (embeddings / SHARD).symlink_to(tmp_path / SHARD)
    with pytest.raises(ArtifactError, match="is a symbolic link to"):
        verify_stage_folder(str(embeddings), "madr-embeddings", "run `madr embed` again")
