"""pipelines.index.sparse_checkpoints: a sparse encoding stopped part-way resumes from its finished chunks,
and never reads a chunk made by another model or over other texts."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import pipelines.index.sparse as sparse_build
from jobs.cli import main
from model import load_encoder
from model.sparse import SparseVector
from pipelines.index.sparse import build_inverted_index, sparse_queries
from pipelines.index.sparse_checkpoints import EncodingCheckpoints, load_chunk, save_chunk
from pipelines.progress import ProgressLog
from schemas import PRODUCT_SCHEMA
from tests.conftest import save_tiny_uhd_model

TEXTS = [f"product number {i}" for i in range(8)]


def _vectors(texts: Sequence[str]) -> list[list[SparseVector]]:
    """Two buckets per text, derived from its words; the second bucket of an even text is empty."""
    out = []
    for text in texts:
        number = int(text.split()[-1])
        first = SparseVector(np.array([number, 100 + len(text)], np.int64), np.array([0.5, 1.5], np.float32))
        empty = SparseVector(np.zeros(0, np.int64), np.zeros(0, np.float32))
        second = (
            empty if number % 2 == 0 else SparseVector(np.array([7], np.int64), np.array([2.0], np.float32))
        )
        out.append([first, second])
    return out


class CountingEncoder:
    def __init__(self, fail_on_call: int | None = None) -> None:
        self.calls: list[int] = []
        self.fail_on_call = fail_on_call

    def __call__(self, texts: Sequence[str]) -> list[list[SparseVector]]:
        if self.fail_on_call is not None and len(self.calls) + 1 == self.fail_on_call:
            raise RuntimeError("stopped part-way")
        self.calls.append(len(texts))
        return _vectors(texts)


def _as_lists(vectors: list[list[SparseVector]]) -> list:
    return [[(b.indices.tolist(), b.values.tolist()) for b in text] for text in vectors]


def test_a_chunk_reads_back_as_written(tmp_path: Path) -> None:
    path = tmp_path / "chunk.npz"
    save_chunk(path, _vectors(TEXTS))
    assert _as_lists(load_chunk(path)) == _as_lists(_vectors(TEXTS))
    assert not list(tmp_path.glob("*.partial"))


def test_a_stopped_encoding_resumes_from_its_finished_chunks(tmp_path: Path) -> None:
    checkpoints = EncodingCheckpoints(tmp_path / "kept", "model-a", chunk_size=3)
    stopped = CountingEncoder(fail_on_call=3)  # chunks of 3, 3 and 2 texts: the third never finishes
    with pytest.raises(RuntimeError, match="stopped part-way"):
        checkpoints.encode(TEXTS, "document binary=True", stopped)
    assert len(list((tmp_path / "kept").glob("chunk-*.npz"))) == 2
    (tmp_path / "kept" / "chunk-leftover.npz.partial").write_bytes(b"half a file")
    resumed = CountingEncoder()
    progress = ProgressLog("texts", total=len(TEXTS))
    vectors = checkpoints.encode(TEXTS, "document binary=True", resumed, progress)
    assert resumed.calls == [2]  # only the unfinished chunk
    assert progress.total == 2  # the 6 texts read back do not pace the ETA
    assert _as_lists(vectors) == _as_lists(_vectors(TEXTS))
    again = CountingEncoder(fail_on_call=1)  # nothing left to encode: never called
    assert _as_lists(checkpoints.encode(TEXTS, "document binary=True", again)) == _as_lists(vectors)


def test_a_chunk_of_other_texts_or_another_model_is_encoded_again(tmp_path: Path) -> None:
    checkpoints = EncodingCheckpoints(tmp_path, "model-a", chunk_size=3)
    checkpoints.encode(TEXTS, "document binary=True", CountingEncoder())
    changed = [*TEXTS[:7], "product number 70"]  # the last chunk's texts changed
    encoder = CountingEncoder()
    vectors = checkpoints.encode(changed, "document binary=True", encoder)
    assert _as_lists(vectors) == _as_lists(_vectors(changed))
    assert encoder.calls == [2]
    for other in (EncodingCheckpoints(tmp_path, "model-b", chunk_size=3), checkpoints):
        what = "document binary=True" if other is not checkpoints else "document binary=False"
        encoder = CountingEncoder()
        other.encode(TEXTS, what, encoder)
        assert encoder.calls == [3, 3, 2]
    with pytest.raises(ValueError, match="chunk_size must be positive"):
        EncodingCheckpoints(tmp_path, "model-a", chunk_size=0)


TITLES = [f"{color} {thing}" for color in ("red", "blue", "green") for thing in ("mug", "scarf", "kettle")]


def _tiny_uhd_catalog(tmp_path: Path) -> tuple[Path, str]:
    """A saved tiny random UHD model (with its manifest, as build-sparse-index verifies) and a catalog."""
    model = save_tiny_uhd_model(tmp_path / "model", dimensions=128, winners=6)
    rows = [{"product_id": f"sku-{i}", "title": title} for i, title in enumerate(TITLES)]
    pq.write_table(pa.Table.from_pylist(rows, schema=PRODUCT_SCHEMA), tmp_path / "products.parquet")
    return model, str(tmp_path / "products.parquet")


def test_a_build_stopped_after_encoding_resumes_without_encoding_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, products = _tiny_uhd_catalog(tmp_path)
    reference = build_inverted_index(tmp_path / "model", products, tmp_path / "reference", batch_size=4)

    kept = tmp_path / "kept"
    monkeypatch.setattr(sparse_build.InvertedIndex, "save", _raise)  # stops after the encoding
    with pytest.raises(RuntimeError, match="stopped"):
        build_inverted_index(
            tmp_path / "model", products, tmp_path / "stopped", batch_size=4, checkpoints=kept
        )
    assert list(kept.glob("chunk-*.npz"))
    monkeypatch.undo()
    monkeypatch.setattr(sparse_build, "encode_sparse", _raise)  # a second encoding would fail the build
    index = build_inverted_index(
        tmp_path / "model", products, tmp_path / "resumed", batch_size=4, checkpoints=kept
    )
    monkeypatch.undo()
    assert not kept.exists()  # removed once the index is saved
    assert index.size == reference.size == len(TITLES) and index.nnz == reference.nnz
    model, tokenizer = load_encoder(tmp_path / "model", "cpu")
    queries = sparse_queries(model, tokenizer, TITLES)
    found, expected = index.search(queries, 5), reference.search(queries, 5)
    np.testing.assert_array_equal(found.ids, expected.ids)
    np.testing.assert_array_equal(found.scores, expected.scores)


def test_the_command_resumes_by_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model, products = _tiny_uhd_catalog(tmp_path)
    command = ["build-sparse-index", "--model", str(model), "--products", products]
    monkeypatch.setattr(sparse_build.InvertedIndex, "save", _raise)
    assert main([*command, "--output", str(tmp_path / "index")]) == 1  # reported, not raised
    assert list((tmp_path / "index.checkpoints").glob("chunk-*.npz"))  # beside the output by default
    monkeypatch.undo()
    monkeypatch.setattr(sparse_build, "encode_sparse", _raise)
    assert main([*command, "--output", str(tmp_path / "index")]) == 0
    assert (tmp_path / "index" / "manifest.json").is_file() and not (tmp_path / "index.checkpoints").exists()


def _raise(*args: object, **kwargs: object) -> None:
    raise RuntimeError("stopped")
