"""The UHD inverted index: Eq. 7 from postings equals brute force, the artifact rules, the UHD driver.

Random binarized corpus: 2,000 documents × 2 buckets × n = 4,096 with k = 32 winners per bucket
(0.8 % dense, as WTA keeps it). Half the queries are perturbed documents (20 of a document's 32
winners per bucket plus 12 random dims), so rankings have a clear head; half are random, so most
scores tie at 0 or 1 and the tie rule (lower corpus row first) is exercised hard at k = 100.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from index_builder import (
    ExactSparseSearcher,
    IndexArtifactError,
    InvertedIndex,
    Searcher,
    SearchResult,
    open_index,
)
from index_builder.artifact import file_entry
from model import Side, load_encoder
from model.sparse import SparseVector
from pipelines.index.sparse import build_inverted_index, encode_sparse, sparse_queries
from pipelines.progress import ProgressLog
from schemas import PRODUCT_SCHEMA
from schemas.manifest import files_digest
from tests.conftest import save_tiny_uhd_model

N, BUCKETS, N_DIMS, WINNERS = 2_000, 2, 4_096, 32
MODEL = ("uhd-test", "3")


def _brute_force(documents: list, queries: list) -> np.ndarray:
    """Eq. 7 written out, independent of both searchers: Σ_j (q_j · d_j) as [q, docs].

    Documents of plain dims are binary; `SparseVector` documents keep their values.
    """
    scores = np.zeros((len(queries), len(documents)))
    for j in range(BUCKETS):
        doc_matrix = np.zeros((len(documents), N_DIMS))
        for d, doc in enumerate(documents):
            bucket = doc[j]
            if isinstance(bucket, SparseVector):
                doc_matrix[d, bucket.indices] = bucket.values
            else:
                doc_matrix[d, bucket] = 1.0
        query_matrix = np.zeros((len(queries), N_DIMS))
        for q, query in enumerate(queries):
            bucket = query[j]
            if isinstance(bucket, SparseVector):
                query_matrix[q, bucket.indices] = bucket.values
            else:
                query_matrix[q, bucket] = 1.0
        scores += query_matrix @ doc_matrix.T
    return scores


@pytest.fixture(scope="module")
def corpus() -> dict:
    rng = np.random.default_rng(7)
    active = np.argpartition(rng.random((N * BUCKETS, N_DIMS)), WINNERS, axis=1)[:, :WINNERS]
    active = np.sort(active.reshape(N, BUCKETS, WINNERS), axis=2)
    documents = [[active[d, j] for j in range(BUCKETS)] for d in range(N)]
    queries = []
    for q in range(60):
        if q % 2:
            queries.append([np.sort(rng.choice(N_DIMS, WINNERS, replace=False)) for _ in range(BUCKETS)])
            continue
        source = active[rng.integers(N)]
        queries.append(
            [
                np.union1d(rng.choice(source[j], 20, replace=False), rng.choice(N_DIMS, 12, replace=False))
                for j in range(BUCKETS)
            ]
        )
    ids = [f"p{i:05d}" for i in range(N)]
    started = time.perf_counter()
    index = InvertedIndex.build(documents, ids, buckets=BUCKETS, dimensions=N_DIMS)
    build_seconds = time.perf_counter() - started
    exact = ExactSparseSearcher(documents, ids, buckets=BUCKETS, dimensions=N_DIMS)
    return {"documents": documents, "queries": queries, "ids": ids, "index": index, "exact": exact,
            "build_seconds": build_seconds}  # fmt: skip


def _assert_same(found: SearchResult, expected: SearchResult) -> None:
    np.testing.assert_array_equal(found.scores, expected.scores)
    np.testing.assert_array_equal(found.indices, expected.indices)
    assert found.ids == expected.ids


@pytest.mark.parametrize("k", [10, 100])
def test_search_equals_brute_force_eq7(corpus: dict, k: int) -> None:
    index: InvertedIndex = corpus["index"]
    assert index.nnz == N * BUCKETS * WINNERS and index.dimension == BUCKETS * N_DIMS
    started = time.perf_counter()
    found = index.search(corpus["queries"], k)
    elapsed = time.perf_counter() - started
    print(f"build {corpus['build_seconds']:.3f}s, search 60 queries top-{k} {elapsed:.3f}s")
    assert found.scores.dtype == np.float32 and found.scores.shape == (60, k)
    truth = _brute_force(corpus["documents"], corpus["queries"])
    np.testing.assert_array_equal(found.scores, -np.sort(-truth, axis=1)[:, :k])
    np.testing.assert_array_equal(np.take_along_axis(truth, found.indices, axis=1), found.scores)
    # Same tie rule as every other searcher: the ids agree exactly, not only the scores.
    _assert_same(found, corpus["exact"].search(corpus["queries"], k))
    assert (found.scores[::2, 0] >= 20 * BUCKETS).all()  # perturbed queries find their source


def test_weighted_and_dense_queries(corpus: dict) -> None:
    """Float query weights (`SparseVector` values) and dense [q, B·n] rows score Eq. 7 alike."""
    rng = np.random.default_rng(3)
    weighted = [
        [SparseVector(dims, rng.random(dims.size).astype(np.float32)) for dims in query]
        for query in corpus["queries"]
    ]
    found = corpus["index"].search(weighted, 20)
    truth = _brute_force(corpus["documents"], weighted)
    np.testing.assert_allclose(found.scores, -np.sort(-truth, axis=1)[:, :20], rtol=1e-6)
    np.testing.assert_allclose(np.take_along_axis(truth, found.indices, axis=1), found.scores, rtol=1e-6)
    dense = np.zeros((len(weighted), BUCKETS * N_DIMS), dtype=np.float32)
    for q, query in enumerate(weighted):
        for j, bucket in enumerate(query):
            dense[q, j * N_DIMS + bucket.indices] = bucket.values
    _assert_same(corpus["index"].search(dense, 20), found)
    binary = [[SparseVector(d, np.ones(d.size, np.float32)) for d in query] for query in corpus["queries"]]
    _assert_same(corpus["index"].search(binary, 20), corpus["index"].search(corpus["queries"], 20))


def test_weighted_index_scores_eq_7_on_document_and_query_values(corpus: dict, tmp_path: Path) -> None:
    """binary=False keeps each posting's value: Eq. 7 on real values, as §3.7 indexes "with their weights"."""
    rng = np.random.default_rng(11)
    documents = [
        [SparseVector(dims, rng.random(dims.size).astype(np.float32) + 0.1) for dims in doc]
        for doc in corpus["documents"][:500]
    ]
    ids = corpus["ids"][:500]
    weighted = InvertedIndex.build(documents, ids, buckets=BUCKETS, dimensions=N_DIMS, binary=False)
    assert not weighted.binary and weighted.nnz == 500 * BUCKETS * WINNERS
    queries = [[SparseVector(d, rng.random(d.size).astype(np.float32)) for d in q] for q in corpus["queries"]]
    found = weighted.search(queries, 25)
    truth = _brute_force(documents, queries)
    np.testing.assert_allclose(found.scores, -np.sort(-truth, axis=1)[:, :25], rtol=1e-5)
    np.testing.assert_allclose(np.take_along_axis(truth, found.indices, axis=1), found.scores, rtol=1e-5)
    exact = ExactSparseSearcher(documents, ids, buckets=BUCKETS, dimensions=N_DIMS, binary=False)
    np.testing.assert_array_equal(exact.search(queries, 25).indices, found.indices)
    # Plain-dim queries sum the documents' values over shared dims; the binarized index would count them.
    binary = InvertedIndex.build(documents, ids, buckets=BUCKETS, dimensions=N_DIMS)
    plain = weighted.search(corpus["queries"], 5).scores
    counted = binary.search(corpus["queries"], 5).scores
    assert binary.binary and (plain != counted).any()
    np.testing.assert_array_equal(counted, np.round(counted))
    # Saved as format v2 with values.npy; a binarized index stays v1, readable by older readers.
    manifest = weighted.save(tmp_path / "weighted", *MODEL)
    data = json.loads((tmp_path / "weighted" / "manifest.json").read_text())
    assert (data["format_version"], data["binary"], manifest.binary) == (2, False, False)
    assert sorted(data["files"]) == ["docs.npy", "ids.parquet", "indptr.npy", "values.npy"]
    binary.save(tmp_path / "binary", *MODEL)
    assert json.loads((tmp_path / "binary" / "manifest.json").read_text())["format_version"] == 1
    loaded = open_index(tmp_path / "weighted")
    assert isinstance(loaded, InvertedIndex) and not loaded.binary
    _assert_same(loaded.search(queries, 25), found)
    # The values are verified like every other file.
    values = np.load(tmp_path / "weighted" / "values.npy")
    np.save(tmp_path / "weighted" / "values.npy", values * 2)
    with pytest.raises(IndexArtifactError, match=r"values\.npy.*altered"):
        InvertedIndex.load(tmp_path / "weighted")


def test_dense_documents_build_the_same_index(corpus: dict) -> None:
    matrix = np.zeros((200, BUCKETS * N_DIMS), dtype=np.float32)
    for d, doc in enumerate(corpus["documents"][:200]):
        for j, dims in enumerate(doc):
            matrix[d, j * N_DIMS + dims] = 0.3  # any non-zero is active: documents are binarized
    ids = corpus["ids"][:200]
    from_dense = InvertedIndex.build(matrix, ids, buckets=BUCKETS, dimensions=N_DIMS)
    from_lists = InvertedIndex.build(corpus["documents"][:200], ids, buckets=BUCKETS, dimensions=N_DIMS)
    _assert_same(from_dense.search(corpus["queries"], 15), from_lists.search(corpus["queries"], 15))


def test_k_is_capped_at_corpus_size() -> None:
    documents = [
        [np.array([1, 2]), np.array([0])],
        [np.array([2]), np.array([])],
        [np.array([3]), np.array([0])],
    ]
    index = InvertedIndex.build(documents, ["a", "b", "c"], buckets=2, dimensions=4)
    found = index.search([[np.array([2]), np.array([0])], [np.array([], np.int64), np.array([1])]], 50)
    assert found.k == 3
    np.testing.assert_array_equal(found.scores, [[2, 1, 1], [0, 0, 0]])
    assert found.ids == [["a", "b", "c"], ["a", "b", "c"]]  # ties (including zero scores) by lower row
    with pytest.raises(ValueError, match="k must be a positive int"):
        index.search([[np.array([2]), np.array([0])]], 0)


def test_invalid_inputs_are_refused() -> None:
    good = [[np.array([1]), np.array([0])]]
    with pytest.raises(ValueError, match="outside"):
        InvertedIndex.build([[np.array([4]), np.array([0])]], ["a"], buckets=2, dimensions=4)
    with pytest.raises(ValueError, match="buckets, expected 2"):
        InvertedIndex.build([[np.array([1])]], ["a"], buckets=2, dimensions=4)
    with pytest.raises(ValueError, match="repeats a dimension"):
        InvertedIndex.build([[np.array([1, 1]), np.array([0])]], ["a"], buckets=2, dimensions=4)
    with pytest.raises(ValueError, match="unique"):
        InvertedIndex.build(good * 2, ["a", "a"], buckets=2, dimensions=4)
    index = InvertedIndex.build(good, ["a"], buckets=2, dimensions=4)
    with pytest.raises(ValueError, match="shape"):
        index.search(np.zeros((1, 5), np.float32), 1)
    with pytest.raises(ValueError, match="NaN"):
        index.search([[SparseVector(np.array([1]), np.array([np.nan], np.float32)), np.array([0])]], 1)


def test_save_load_move_and_open_index(corpus: dict, tmp_path: Path) -> None:
    index: InvertedIndex = corpus["index"]
    manifest = index.save(tmp_path / "built", *MODEL, extra={"note": "test"})
    assert index.manifest == manifest
    data = json.loads((tmp_path / "built" / "manifest.json").read_text())
    assert data["format"] == data["kind"] == "madr-inverted-index" and data["format_version"] == 1
    assert (data["buckets"], data["dimensions"], data["dimension"]) == (BUCKETS, N_DIMS, BUCKETS * N_DIMS)
    assert (data["count"], data["nnz"], data["model_id"], data["model_version"]) == (N, index.nnz, *MODEL)
    assert sorted(data["files"]) == ["docs.npy", "ids.parquet", "indptr.npy"]
    shutil.move(tmp_path / "built", tmp_path / "moved")
    loaded = InvertedIndex.load(tmp_path / "moved")
    assert loaded.manifest == manifest and loaded.ids == index.ids
    _assert_same(loaded.search(corpus["queries"], 100), index.search(corpus["queries"], 100))
    opened = open_index(tmp_path / "moved")
    assert isinstance(opened, InvertedIndex) and isinstance(opened, Searcher)
    _assert_same(opened.search(corpus["queries"], 10), index.search(corpus["queries"], 10))
    with pytest.raises(FileExistsError):
        index.save(tmp_path / "moved", *MODEL)


@pytest.fixture
def saved(tmp_path: Path) -> Path:
    documents = [[np.array([1, 2]), np.array([0])], [np.array([2]), np.array([3])]]
    InvertedIndex.build(documents, ["a", "b"], buckets=2, dimensions=4).save(tmp_path / "index", *MODEL)
    return tmp_path / "index"


@pytest.mark.parametrize("name", ["docs.npy", "indptr.npy", "ids.parquet"])
def test_flipped_byte_names_the_file(saved: Path, name: str) -> None:
    path = saved / name
    data = bytearray(path.read_bytes())
    data[-1] ^= 0x01
    path.write_bytes(bytes(data))
    with pytest.raises(IndexArtifactError, match=rf"{name}.*altered.*rebuild"):
        InvertedIndex.load(saved)
    with pytest.raises(IndexArtifactError, match=name):
        open_index(saved)


def test_missing_files_and_manifest(saved: Path) -> None:
    (saved / "indptr.npy").unlink()
    with pytest.raises(IndexArtifactError, match=r"indptr\.npy is missing"):
        InvertedIndex.load(saved)
    (saved / "manifest.json").unlink()
    with pytest.raises(IndexArtifactError, match="manifest is written last"):
        InvertedIndex.load(saved)


def test_consistent_but_invalid_postings_are_refused(saved: Path) -> None:
    """A file that matches its manifest (say, a buggy writer) is still checked before use."""
    np.save(saved / "docs.npy", np.array([0, 1, 0, 0, 1], np.int32))  # term 2 lists [1, 0]
    manifest = json.loads((saved / "manifest.json").read_text())
    entry = file_entry(saved / "docs.npy")
    manifest["files"]["docs.npy"] = entry.to_dict()
    manifest["files_digest"] = files_digest(manifest["files"])  # a writer that binds what it wrote
    (saved / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(IndexArtifactError, match=r"docs\.npy.*ascending"):
        InvertedIndex.load(saved)


def _write_catalog(path: Path, titles: list[str]) -> None:
    rows = [{"product_id": f"sku-{i}", "title": title} for i, title in enumerate(titles)]
    rows.append({"product_id": "sku-bad", "title": ""})  # invalid: skipped, not fatal
    pq.write_table(pa.Table.from_pylist(rows, schema=PRODUCT_SCHEMA), path)


TITLES = [
    "red cotton t-shirt", "stainless steel kettle", "wireless noise cancelling headphones",
    "leather hiking boots", "ceramic coffee mug", "bamboo cutting board", "yoga mat with strap",
    "usb c charging cable", "wool winter scarf", "cast iron skillet", "kids building blocks",
    "glass water bottle",
]  # fmt: skip


def test_build_inverted_index_from_a_tiny_uhd_model(tmp_path: Path, tiny_model_dir: Path) -> None:
    save_tiny_uhd_model(tmp_path / "model", dimensions=256, winners=8)
    _write_catalog(tmp_path / "products-00000-of-00001.parquet", TITLES)
    pattern = str(tmp_path / "products-*.parquet")
    index = build_inverted_index(tmp_path / "model", pattern, tmp_path / "index", batch_size=5)
    # The default buckets of a 2-layer backbone: both layers (`model.uhd.paper_bucket_layers`).
    assert index.size == len(TITLES) and index.buckets == 2 and index.dimensions == 256
    assert index.manifest is not None and index.manifest.extra["products_skipped"] == 1
    assert (index.manifest.model_id, index.manifest.model_version) == ("uhd-tiny", "1")
    loaded = open_index(tmp_path / "index")
    model, tokenizer = load_encoder(tmp_path / "model", "cpu")
    found = loaded.search(sparse_queries(model, tokenizer, TITLES), 3)
    for row, title in enumerate(TITLES):
        top = found.scores[row, 0]
        tied = [pid for pid, score in zip(found.ids[row], found.scores[row], strict=True) if score == top]
        assert f"sku-{row}" in tied, (title, found.ids[row], found.scores[row])
    with pytest.raises(ValueError, match="'bibert' model, which has no sparse buckets"):
        build_inverted_index(tiny_model_dir, pattern, tmp_path / "refused")
    assert not (tmp_path / "refused").exists()


def test_encoding_counts_each_batch_into_its_progress_log(tmp_path: Path) -> None:
    save_tiny_uhd_model(tmp_path / "model", dimensions=256, winners=8)
    model, tokenizer = load_encoder(tmp_path / "model", "cpu")
    lines: list[str] = []
    progress = ProgressLog("texts", total=len(TITLES), interval_s=0.0, log=lines.append)
    vectors = encode_sparse(model, tokenizer, TITLES, Side.DOCUMENT, batch_size=5, progress=progress)
    again = encode_sparse(model, tokenizer, TITLES, Side.DOCUMENT, batch_size=5)
    assert [[b.indices.tolist() for b in v] for v in vectors] == [
        [b.indices.tolist() for b in v] for v in again
    ]
    assert progress.done == len(TITLES) and len(lines) == 3  # batches of 5, 5 and 2
    assert lines[-1].startswith("texts: 12 of 12 (")
