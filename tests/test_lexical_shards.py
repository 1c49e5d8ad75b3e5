"""BM25 in every shard: the catalog's statistics, the same scores at any shard count, the analyzer of each
product's language, and the shards searched and fused as one (`index_builder.bm25`, `index_builder.lexical`,
`pipelines.index.lexical_build`)."""

from __future__ import annotations

import json
from pathlib import Path

import bm25s
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import Stemmer

from index_builder import IndexArtifactError, PartitionedIndex
from index_builder.analyzer import analyze, language_of_locale
from index_builder.bm25 import Bm25Index, Bm25Settings, LexicalStatistics
from pipelines.index.config import IndexBuildConfig, LexicalSettings
from pipelines.index.partitioned import build_partitioned
from pipelines.settings.options import IndexSettings
from schemas import PRODUCT_SCHEMA
from tests.test_index_partitioned import write_embeddings

ITEMS = ["espresso machine", "wool socks", "trail running shoes", "desk lamp", "chef knife", "yoga mat"]
BRANDS = ["Fellow", "Zwilling", "Brooks", "Ikea", "Smeg", "Lodge", "Asics"]
COLOURS = ["red", "matte black", "brass", "olive", "blue"]
DUTCH = ["fietsen met versnellingen", "koffiezetapparaten", "wollen sokken", "bureaulampen"]
QUERIES = ["red espresso", "black wool socks", "brooks running shoes", "brass lamp", "model 40", "knife"]


def _catalog(count: int) -> list[dict]:
    """Products with repeated words (so BM25 scores tie and differ) and a Dutch tenth of the catalog."""
    products = []
    for i in range(count):
        dutch = i % 10 == 0
        title = (
            f"{BRANDS[i % 7]} {DUTCH[i % 4]} model {i}"
            if dutch
            else f"{BRANDS[i % 7]} {ITEMS[i % 6]} {COLOURS[i % 5]} {' '.join(['extra'] * (i % 3))}"
        )
        products.append(
            {
                "product_id": f"p{i:04d}",
                "title": title,
                "bullet_points": [f"batch {i % 13}"],
                "description": None if i % 4 else "<b>quality</b> item",
                "aspects": None,
                "locale": "nl_nl" if dutch else "en_gb",
            }
        )
    return products


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("lexical-shards")
    products = _catalog(900)
    products_path = root / "products.parquet"
    pq.write_table(pa.Table.from_pylist(products, schema=PRODUCT_SCHEMA), products_path)
    rng = np.random.default_rng(11)
    vectors = rng.normal(size=(len(products), 16)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    ids = [p["product_id"] for p in products]
    write_embeddings(root / "embeddings", ids, vectors)
    built = {}
    for shards in (1, 3):
        config = IndexBuildConfig(
            embeddings=str(root / "embeddings"),
            output=str(root / f"index-{shards}"),
            index=IndexSettings(num_index_shards=shards, depth=100),
            products=str(products_path),
        )
        build_partitioned(config)
        built[shards] = root / f"index-{shards}"
    return {"root": root, "products": products_path, "one": built[1], "three": built[3], "vectors": vectors}


def test_bm25_scores_equal_bm25s_lucene_on_a_catalog() -> None:
    """The peer a team would use: bm25s' Lucene BM25 with the same analyzer gives the same scores."""
    texts = [p["title"] + " . " + p["bullet_points"][0] for p in _catalog(300)]
    ids = [f"d{i}" for i in range(len(texts))]
    ours = Bm25Index.from_texts(ids, texts, Bm25Settings(language="english"))
    stemmer = Stemmer.Stemmer("english")
    peer = bm25s.BM25(k1=1.2, b=0.75, method="lucene")
    corpus = bm25s.tokenize(texts, stopwords="en", stemmer=stemmer, show_progress=False)
    peer.index(corpus, show_progress=False)
    for query in ["red espresso machines", "running shoe", "the batch 7", "socks socks wool"]:
        tokens = bm25s.tokenize([query], stopwords="en", stemmer=stemmer, return_ids=False)
        expected = peer.get_scores(tokens[0])
        [ranking] = ours.search([query], depth=len(texts))
        found = np.zeros(len(texts))
        found[ranking.rows] = ranking.scores
        np.testing.assert_allclose(found, expected, rtol=1e-5, atol=1e-6)
        assert len(ranking.rows) == int((expected > 0).sum())


def test_the_analyzer_finds_the_words_bm25s_finds_in_awkward_text() -> None:
    """madr's word pattern drops bm25s' boundary tests; on text made to tell them apart it must not."""
    texts = ["naïve café-au-lait x y ab_c 12 3 ä ß", "日本語のテキスト a1 _a __ I", "",
             "élan—über 'it's' 3x4cm", "e-mail: a.b@c.de; 1,5 kg / 2.5l",
             "ÉCRAN LCD 27\" (Noir)"]  # fmt: skip
    stemmer = Stemmer.Stemmer("english")
    expected = bm25s.tokenize(texts, stopwords="en", stemmer=stemmer, return_ids=False, show_progress=False)
    words, _ = analyze(texts, [None] * len(texts), "english")
    assert words == [list(tokens) for tokens in expected]


def test_a_locale_picks_the_analyzer_and_queries_take_the_catalogs_main_language() -> None:
    assert [language_of_locale(x) for x in ("nl_nl", "de-AT", "us", "en_gb", "ja_jp", None, "xx")] == [
        "dutch", "german", "english", "english", "none", "english", "english",
    ]  # fmt: skip
    words, languages = analyze(["Fietsen en sokken", "Running shoes"], ["nl_nl", "us"], "auto")
    assert words == [["fiets", "sok"], ["run", "shoe"]] and languages == ["dutch", "english"]
    texts = ["Stadsfietsen", "Fietsen voor kinderen", "Wollen sokken", "Running shoes"]
    dutch = Bm25Index.from_texts(["a", "b", "c", "d"], texts, Bm25Settings(), ["nl", "nl", "nl", "en"])
    assert dutch.query_language == "dutch"  # three of four products are Dutch
    assert list(dutch.search(["kinderfietsen"], 5)[0].rows) == []  # a compound is one word
    assert list(dutch.search(["fietsen"], 5)[0].rows) == [1]  # "fietsen" stemmed, "stadsfietsen" one word
    english = Bm25Index.from_texts(["a", "b", "c", "d"], texts, Bm25Settings(language="english"))
    assert list(english.search(["fiets"], 5)[0].rows) == []  # English leaves "fietsen" whole


def test_statistics_of_parts_merge_into_the_wholes() -> None:
    words = [["red", "sock"], ["red", "red", "lamp"], ["sock"], []]
    languages = ["english", "english", "dutch", "english"]
    whole = LexicalStatistics.of(words, languages)
    merged = LexicalStatistics.merge([LexicalStatistics.of(words[:1], languages[:1]),
                                      LexicalStatistics.of(words[1:], languages[1:])])  # fmt: skip
    assert merged == whole
    assert whole.document_frequency == {"red": 2, "sock": 2, "lamp": 1} and whole.average_length == 1.5
    assert whole.main_language == "english"


def _bm25_scores(index: PartitionedIndex, query: str) -> dict[str, float]:
    assert index.lexical is not None
    [ranking] = index.lexical.search([query], depth=index.size)
    return {index.ids[row]: float(score) for row, score in zip(ranking.rows, ranking.scores, strict=True)}


def test_one_and_three_shards_give_equal_bm25_scores_and_equal_fused_top_10(store) -> None:
    one, three = PartitionedIndex.load(store["one"]), PartitionedIndex.load(store["three"])
    assert (len(one.shards), len(three.shards)) == (1, 3) and three.lexical is not None
    for shard in three.shards:  # each shard holds BM25 over its own products only
        assert shard.lexical is not None and list(shard.lexical.product_ids) == list(shard.ids)
    for query in QUERIES:
        scores = _bm25_scores(one, query)
        assert scores, query
        assert _bm25_scores(three, query) == scores  # exactly: the catalog's statistics in every shard
        ranked_one = one.lexical.search([query], 20)[0]
        ranked_three = three.lexical.search([query], 20)[0]
        assert [one.ids[r] for r in ranked_one.rows] == [three.ids[r] for r in ranked_three.rows]
    vectors = store["vectors"][[5, 17, 300, 451, 600, 899]]
    fused_one = one.search_hybrid(vectors, QUERIES, k=10)
    fused_three = three.search_hybrid(vectors, QUERIES, k=10)
    assert fused_one.ids == fused_three.ids
    np.testing.assert_allclose(fused_one.scores, fused_three.scores, rtol=1e-6)
    manifest = json.loads((store["three"] / "shard-00001-of-00003" / "manifest.json").read_text())
    statistics = manifest["extra"]["lexical_statistics"]
    assert statistics["documents"] == 900 and statistics["languages"] == {"dutch": 90, "english": 810}
    assert manifest["extra"]["lexical_query_language"] == "english"


def test_a_tampered_shards_lexical_file_is_refused(store, tmp_path) -> None:
    import shutil

    copy = tmp_path / "index"
    shutil.copytree(store["three"], copy)
    scores = copy / "shard-00002-of-00003" / "lexical" / "scores.npy"
    data = bytearray(scores.read_bytes())
    data[-1] ^= 0xFF
    scores.write_bytes(bytes(data))
    with pytest.raises(IndexArtifactError, match=r"shard-00002-of-00003.*scores\.npy|scores\.npy"):
        PartitionedIndex.load(copy)


def test_lexical_false_builds_no_bm25_and_true_needs_the_catalog(store, tmp_path) -> None:
    config = IndexBuildConfig(
        embeddings=str(store["root"] / "embeddings"),
        output=str(tmp_path / "index"),
        index=IndexSettings(num_index_shards=2, depth=100),
    )
    build_partitioned(config)
    assert PartitionedIndex.load(tmp_path / "index").lexical is None
    with pytest.raises(ValueError, match="--lexical true needs --products"):
        IndexBuildConfig(embeddings="e", output="o", lexical=LexicalSettings(lexical="true"))
