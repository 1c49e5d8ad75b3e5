"""The saved index directory: self-describing, movable, and refused when altered or incomplete."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from index_builder import IndexArtifactError, ScannIndex, ScannIndexBuilder, Scoring
from schemas.manifest import ArtifactError, files_digest, verify_manifest
from tests.test_no_pickle import _relist

N, DIM = 6_000, 16


def unit_vectors(rng: np.random.Generator, centres: np.ndarray, count: int) -> np.ndarray:
    points = centres[rng.integers(0, len(centres), count)] + rng.normal(size=(count, centres.shape[1]))
    return (points / np.linalg.norm(points, axis=1, keepdims=True)).astype(np.float32)


@pytest.fixture(scope="module")
def corpus() -> tuple[np.ndarray, list[str], np.ndarray]:
    rng = np.random.default_rng(99)
    centres = rng.normal(size=(20, DIM))
    return unit_vectors(rng, centres, N), [f"sku-{i}" for i in range(N)], unit_vectors(rng, centres, 30)


@pytest.fixture(scope="module")
def index(corpus) -> ScannIndex:
    embeddings, ids, _ = corpus
    built = ScannIndexBuilder.for_corpus(N, DIM, depth=100).build(embeddings, ids)
    assert built.config.uses_tree and built.config.scoring is Scoring.ASYMMETRIC_HASHING
    return built


@pytest.fixture(scope="module")
def saved(index: ScannIndex, tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("artifact") / "index"
    index.save(directory, model_id="madr-minilm", model_version="2024-06-11", extra={"source": "shards/"})
    return directory


@pytest.fixture
def copy(saved: Path, tmp_path: Path) -> Path:
    """A private copy that a test may damage."""
    return Path(shutil.copytree(saved, tmp_path / "copy"))


def assert_same_results(first: ScannIndex, second: ScannIndex, queries: np.ndarray) -> None:
    for k in (10, 100, N):
        a, b = first.search(queries, k), second.search(queries, k)
        np.testing.assert_array_equal(a.indices, b.indices)
        np.testing.assert_array_equal(a.scores, b.scores)
        assert a.ids == b.ids


def test_layout_and_manifest(saved: Path, index: ScannIndex, corpus) -> None:
    _, ids, _ = corpus
    manifest = json.loads((saved / "manifest.json").read_text())
    assert (manifest["format"], manifest["format_version"]) == ("madr-scann-index", 1)
    assert (manifest["model_id"], manifest["model_version"]) == ("madr-minilm", "2024-06-11")
    assert (manifest["dimension"], manifest["count"]) == (DIM, N)
    assert manifest["config"] == index.config.to_dict()
    assert manifest["scann_version"] == "1.4.2" and manifest["created_at"]
    assert manifest["extra"] == {"source": "shards/"}
    on_disk = {p.relative_to(saved).as_posix() for p in saved.rglob("*") if p.is_file()}
    assert set(manifest["files"]) == on_disk - {"manifest.json"}
    assert {"ids.parquet", "scann/scann_assets.pbtxt"} <= set(manifest["files"])
    for relative, entry in manifest["files"].items():
        assert entry["bytes"] == (saved / relative).stat().st_size and len(entry["sha256"]) == 64
    table = pq.read_table(saved / "ids.parquet")
    assert table.schema.names == ["product_id"] and table.column("product_id").to_pylist() == ids
    # no absolute path leaks into ScaNN's assets (that is what breaks a moved index)
    assert str(saved) not in (saved / "scann" / "scann_assets.pbtxt").read_text()


def test_project_wide_manifest_checks_accept_the_index(saved: Path) -> None:
    assert verify_manifest(saved, "madr-scann-index")["count"] == N
    assert issubclass(IndexArtifactError, ArtifactError)


def test_save_load_gives_identical_results(saved: Path, index: ScannIndex, corpus) -> None:
    loaded = ScannIndex.load(saved)
    assert loaded.config == index.config and loaded.ids == index.ids
    assert loaded.manifest is not None and loaded.manifest.model_id == "madr-minilm"
    assert_same_results(index, loaded, corpus[2])


def test_moved_directory_still_loads(saved: Path, index: ScannIndex, corpus, tmp_path: Path) -> None:
    original = Path(shutil.copytree(saved, tmp_path / "built-here"))
    moved = Path(shutil.copytree(original, tmp_path / "elsewhere" / "index"))
    shutil.rmtree(original)
    assert_same_results(index, ScannIndex.load(moved), corpus[2])


@pytest.mark.parametrize("relative", ["ids.parquet", "scann/dataset.npy", "scann/scann_config.pb"])
def test_altered_file_is_refused_by_name(copy: Path, relative: str) -> None:
    target = copy / relative
    data = bytearray(target.read_bytes())
    data[len(data) // 2] ^= 0xFF
    target.write_bytes(bytes(data))
    with pytest.raises(IndexArtifactError, match=relative.split("/")[-1]) as caught:
        ScannIndex.load(copy)
    assert "madr build-index" in str(caught.value)


def test_missing_manifest_is_refused(copy: Path) -> None:
    (copy / "manifest.json").unlink()
    with pytest.raises(IndexArtifactError, match=r"manifest\.json is missing"):
        ScannIndex.load(copy)


def test_missing_listed_file_is_refused(copy: Path) -> None:
    (copy / "ids.parquet").unlink()
    with pytest.raises(IndexArtifactError, match=r"ids\.parquet is missing"):
        ScannIndex.load(copy)


def test_manifest_without_id_file_is_refused(copy: Path) -> None:
    manifest = json.loads((copy / "manifest.json").read_text())
    del manifest["files"]["ids.parquet"]
    manifest["files_digest"] = files_digest(manifest["files"])
    (copy / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(IndexArtifactError, match=r"does not list ids\.parquet"):
        ScannIndex.load(copy)


def test_unlisted_file_in_scann_dir_is_refused(copy: Path) -> None:
    # ScaNN's loader would unpickle this and silently replace the id mapping.
    (copy / "scann" / "scann_docids.pkl").write_bytes(b"not ours")
    with pytest.raises(IndexArtifactError, match=r"scann_docids\.pkl"):
        ScannIndex.load(copy)


@pytest.mark.parametrize(
    "edit",
    [
        lambda m: m.update(format_version=2),
        lambda m: m.update(format="something-else"),
        lambda m: m["config"].update(num_leaves_to_search=0),
        lambda m: m.pop("config"),
    ],
)
def test_invalid_manifest_is_refused(copy: Path, edit) -> None:
    manifest = json.loads((copy / "manifest.json").read_text())
    edit(manifest)
    (copy / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(IndexArtifactError, match="manifest"):
        ScannIndex.load(copy)


def test_missing_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(IndexArtifactError, match="does not exist"):
        ScannIndex.load(tmp_path / "nowhere")


def test_save_refuses_non_empty_directory_and_bad_arguments(index: ScannIndex, tmp_path: Path) -> None:
    (tmp_path / "stale.txt").write_text("old build")
    with pytest.raises(FileExistsError):
        index.save(tmp_path, model_id="m", model_version="1")
    with pytest.raises(ValueError):
        index.save(tmp_path / "a", model_id="", model_version="1")
    with pytest.raises(ValueError):
        index.save(tmp_path / "b", model_id="m", model_version="1", extra={"bad": object()})


def test_brute_force_index_round_trips(corpus, tmp_path: Path) -> None:
    embeddings, ids, queries = corpus
    tiny = ScannIndexBuilder.for_corpus(300, DIM, depth=10).build(embeddings[:300], ids[:300])
    assert tiny.config.scoring is Scoring.BRUTE_FORCE
    tiny.save(tmp_path / "tiny", model_id="m", model_version="1")
    loaded = ScannIndex.load(tmp_path / "tiny")
    for k in (10, 300):
        np.testing.assert_array_equal(tiny.search(queries, k).indices, loaded.search(queries, k).indices)


@pytest.fixture
def exact_copy(corpus, tmp_path: Path) -> Path:
    """A saved brute-force (exact) index that a test may damage."""
    embeddings, ids, _ = corpus
    tiny = ScannIndexBuilder.for_corpus(300, DIM, depth=10).build(embeddings[:300], ids[:300])
    assert tiny.config.scoring is Scoring.BRUTE_FORCE
    tiny.save(tmp_path / "exact", model_id="m", model_version="1")
    return tmp_path / "exact"


def test_an_exact_index_loads_its_vectors_from_the_bytes_it_hashed(
    corpus, exact_copy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No private copy is written and read back: the searcher's matrix is a writable view of the
    # verified bytes, equal to what was saved.
    def no_copy(*_args: object) -> None:
        raise AssertionError("an exact index was copied to disk")

    monkeypatch.setattr("index_builder.scann_index.copy_verified_files", no_copy)
    loaded = ScannIndex.load(exact_copy).exact_searcher
    assert loaded is not None and loaded.corpus.flags.writeable
    np.testing.assert_array_equal(loaded.corpus, np.load(exact_copy / "scann" / "dataset.npy"))
    np.testing.assert_array_equal(loaded.corpus, corpus[0][:300])


@pytest.mark.parametrize("relative", ["ids.parquet", "scann/dataset.npy"])
def test_an_altered_exact_index_file_is_refused_by_name(exact_copy: Path, relative: str) -> None:
    target = exact_copy / relative
    data = bytearray(target.read_bytes())
    data[len(data) // 2] ^= 0xFF
    target.write_bytes(bytes(data))
    with pytest.raises(IndexArtifactError, match=rf"{relative.split('/')[-1]}: sha256 .* does not match"):
        ScannIndex.load(exact_copy)


def test_exact_vectors_holding_python_objects_are_refused(exact_copy: Path) -> None:
    # Listed with its true digest, as an attacker who can rewrite the manifest would: np.load's
    # allow_pickle=False rule still holds for the in-memory parse.
    np.save(
        exact_copy / "scann" / "dataset.npy", np.array([[object()]] * 300, dtype=object), allow_pickle=True
    )
    _relist(exact_copy, "scann/dataset.npy")
    with pytest.raises(IndexArtifactError, match=r"dataset\.npy is unreadable: it holds Python objects"):
        ScannIndex.load(exact_copy)


def test_an_asset_path_leaving_the_index_is_refused(copy: Path, saved: Path, tmp_path: Path) -> None:
    # Another valid index's vectors, outside this one: ScaNN would load them if the asset file said so.
    shutil.copytree(saved, tmp_path / "outside")
    assets = copy / "scann" / "scann_assets.pbtxt"
    text = assets.read_text()
    first = re.search(r'asset_path: "([^"]+)"', text).group(1)
    assets.write_text(text.replace(f'"{first}"', f'"../../outside/scann/{first}"', 1))
    _relist(copy, "scann/scann_assets.pbtxt")
    with pytest.raises(IndexArtifactError, match=r"scann_assets\.pbtxt:\d+ names an asset outside"):
        ScannIndex.load(copy)


@pytest.mark.parametrize("linked", ["scann/scann_config.pb", "scann", "ids.parquet"])
def test_a_symbolic_link_in_the_index_is_refused(copy: Path, tmp_path: Path, linked: str) -> None:
    target = copy / linked
    # The same bytes, so every hash in the manifest still matches: only the link gives it away.
    moved = tmp_path / "elsewhere" / Path(linked).name
    moved.parent.mkdir()
    shutil.move(target, moved)
    target.symlink_to(moved)
    with pytest.raises(IndexArtifactError, match="is a symbolic link"):
        ScannIndex.load(copy)
