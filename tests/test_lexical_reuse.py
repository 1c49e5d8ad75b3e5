"""A night re-analyzes only the text that changed: each shard's BM25 keeps its term counts, and the next
build of the shard takes an unchanged product's counts from it (`index_builder.term_counts`), scoring
every product with tonight's statistics. The scores must equal a build from scratch, in one shard (in
this process) and in three (in Beam), and a previous shard that fails verification is not trusted."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from index_builder import PartitionedIndex
from index_builder.term_counts import TermCounts, counted
from pipelines.index.config import IndexBuildConfig
from pipelines.index.lexical_build import PRODUCT_COLUMNS, _text_of, _texts, count_terms
from pipelines.index.partitioned import build_partitioned
from pipelines.settings.options import IndexSettings
from schemas import PRODUCT_SCHEMA
from tests.test_index_partitioned import write_embeddings
from tests.test_lexical_shards import QUERIES, _bm25_scores, _catalog


def _write(root: Path, products: list[dict]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(products, schema=PRODUCT_SCHEMA), root / "products.parquet")
    rng = np.random.default_rng(len(products))
    vectors = rng.normal(size=(len(products), 16)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    write_embeddings(root / "embeddings", [p["product_id"] for p in products], vectors)
    return root


def _tonight(products: list[dict]) -> tuple[list[dict], dict[str, int]]:
    """The catalog a night later: a tenth of the titles edited, a tenth removed, 60 products new."""
    tonight, edited = [], 0
    for i, product in enumerate(products):
        if i % 10 == 3:
            continue  # removed
        if i % 10 == 7:
            product = {**product, "title": product["title"] + " renewed edition"}
            edited += 1
        tonight.append(product)
    new = [
        {**p, "product_id": f"n{i:03d}", "title": f"{p['title']} new"} for i, p in enumerate(products[:60])
    ]
    return tonight + new, {"edited": edited, "new": len(new), "unchanged": len(tonight) - edited}


@pytest.fixture(scope="module")
def nights(tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = tmp_path_factory.mktemp("lexical-reuse")
    first = _catalog(600)
    second, changes = _tonight(first)
    built = {"changes": changes, "root": root}
    for night, products in (("one", first), ("two", second)):
        _write(root / night, products)
    builds = (("first", "one", None), ("reused", "two", "first"), ("fresh", "two", None))
    for shards in (1, 3):
        for name, night, previous in builds:
            output = root / f"{name}-{shards}"
            config = IndexBuildConfig(
                embeddings=str(root / night / "embeddings"),
                output=str(output),
                index=IndexSettings(num_index_shards=shards, depth=50),
                products=str(root / night / "products.parquet"),
                previous_index=str(root / f"{previous}-{shards}") if previous else None,
            )
            build_partitioned(config)
            built[(name, shards)] = output
    return built


@pytest.mark.parametrize("shards", [1, 3])
def test_a_night_that_reuses_last_nights_counts_scores_as_a_build_from_scratch(nights, shards) -> None:
    reused = PartitionedIndex.load(nights[("reused", shards)])
    fresh = PartitionedIndex.load(nights[("fresh", shards)])
    for query in [*QUERIES, "renewed", "new edition"]:
        scores = _bm25_scores(fresh, query)
        assert scores, query
        assert _bm25_scores(reused, query) == scores  # exactly: the same counts, tonight's statistics
    fused_reused = reused.search_hybrid(np.eye(16, dtype=np.float32)[:4], QUERIES[:4], k=10)
    assert fused_reused.ids == fresh.search_hybrid(np.eye(16, dtype=np.float32)[:4], QUERIES[:4], k=10).ids


def _shard_texts(products_path: Path, shard: int, num_shards: int):
    from index_builder.product_keys import shard_of

    rows = pq.read_table(products_path, columns=PRODUCT_COLUMNS).to_pylist()
    found = [_text_of(row, "auto") for row in rows]
    return _texts([f for f in found if f is not None and shard_of(f[0], num_shards) == shard])


def test_only_new_and_edited_products_are_analyzed_and_a_tampered_previous_shard_is_not_trusted(
    nights, tmp_path
) -> None:
    changes, root = nights["changes"], nights["root"]
    analyzed = reused = 0
    for shard in range(3):
        texts = _shard_texts(root / "two" / "products.parquet", shard, 3)
        folder = nights[("first", 3)] / f"shard-{shard:05d}-of-00003"
        terms = count_terms(texts, str(folder))
        analyzed, reused = analyzed + terms.analyzed, reused + terms.reused
    assert (analyzed, reused) == (changes["edited"] + changes["new"], changes["unchanged"])
    # One byte of one shard's fingerprints flipped: the shard's manifest no longer vouches for it.
    copy = tmp_path / "first"
    shutil.copytree(nights[("first", 3)] / "shard-00001-of-00003", copy)
    fingerprints = copy / "lexical" / "fingerprints.npy"
    data = bytearray(fingerprints.read_bytes())
    data[-1] ^= 0xFF
    fingerprints.write_bytes(bytes(data))
    texts = _shard_texts(root / "two" / "products.parquet", 1, 3)
    distrusted = count_terms(texts, str(copy))
    assert (distrusted.analyzed, distrusted.reused) == (len(texts.ids), 0)
    trusted = count_terms(texts, str(nights[("first", 3)] / "shard-00001-of-00003"))
    assert trusted.reused > 0 and trusted.statistics() == distrusted.statistics()


def test_term_counts_taken_and_stacked_keep_each_products_counts() -> None:
    words = [["red", "sock", "red"], [], ["lamp"], ["sock", "wool"]]
    terms = TermCounts.of_words(words, [11, 12, 13, 14])
    assert terms.vocabulary == ["lamp", "red", "sock", "wool"] and terms.lengths.tolist() == [3, 0, 1, 2]
    assert terms.document_frequency == {"lamp": 1, "red": 1, "sock": 2, "wool": 1}
    taken = terms.take(np.array([3, -1, 0]))
    assert taken.vocabulary == ["red", "sock", "wool"]  # "lamp" is in no row taken
    assert taken.lengths.tolist() == [2, 0, 3] and taken.fingerprints.tolist() == [14, 0, 11]
    _assert_equal(taken, TermCounts.of_words([["sock", "wool"], [], ["red", "sock", "red"]], [14, 0, 11]))
    stacked = TermCounts.stack([terms.take(np.array([0])), TermCounts.of_words([["lamp", "zebra"]], [9])])
    assert stacked.vocabulary == ["lamp", "red", "sock", "zebra"] and stacked.rows.tolist() == [1, 0, 0, 1]
    with pytest.raises(ValueError, match="taken twice"):
        terms.take(np.array([1, 1]))


def test_counted_analyzes_what_changed_and_keeps_the_order_asked_for() -> None:
    before = TermCounts.of_words([["red", "sock"], ["lamp"]], [1, 2])
    seen: list[int] = []

    def analyze(positions: list[int]) -> list[list[str]]:
        seen.extend(positions)
        return [{"c": ["blue", "lamp"], "b": ["brass"]}[["b", "c", "a"][i]] for i in positions]

    # a: unchanged (fingerprint 1); b: its text changed (3, not 2); c: new.
    found = counted(["b", "c", "a"], ["", "", ""], [3, 4, 1], analyze, (["a", "b"], before))
    assert seen == [0, 1] and (found.analyzed, found.reused) == (2, 1)
    _assert_equal(found.terms, TermCounts.of_words([["brass"], ["blue", "lamp"], ["red", "sock"]], [3, 4, 1]))


def _assert_equal(found: TermCounts, expected: TermCounts) -> None:
    assert found.vocabulary == expected.vocabulary
    for name in ("starts", "rows", "counts", "lengths", "fingerprints"):
        assert getattr(found, name).tolist() == getattr(expected, name).tolist(), name
