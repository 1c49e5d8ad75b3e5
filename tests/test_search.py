"""`madr search` (issue 46, item 5): a query in words against an index artifact, as a user types it, with
filters on catalog and predicted values, the over-fetch and exact paths of a selective filter on a real
ScaNN tree, and the refusals (unknown aspect or value, another model's index)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from index_builder import ExactSearcher, ScannIndexBuilder
from jobs.cli import main
from model import new_encoder
from pipelines.embed.gap_fill import fill_aspects
from schemas import PRODUCT_SCHEMA, RUN_SCHEMA, write_manifest
from serving.catalog import Catalog
from serving.search import search_one
from tests.conftest import tiny_backbone

BRANDS = ("Nike", "Adidas", "Puma", "Asics")
COLOURS = ("Red", "Blue", "Black", None)


def _catalog_rows(count: int) -> list[dict]:
    rows = []
    for i in range(count):
        brand, colour = BRANDS[i % 4], COLOURS[i % 3]
        aspects = {"brand": [brand], **({"color": [colour]} if colour else {})}
        rows.append(
            {
                "product_id": f"p{i:03d}",
                "title": f"{brand} running shoe model {i} {colour or ''}".strip(),
                "description": "a light shoe for road running",
                "bullet_points": [],
                "brand": brand,
                "color": colour,
                "category_path": ["Shoes", "Running Shoes"],
                "aspects": aspects,
                "locale": "us",
            }
        )
    return rows


@pytest.fixture(scope="module")
def built(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """40 products embedded and indexed by `madr embed` and `madr build-index`, as typed."""
    root = tmp_path_factory.mktemp("search")
    products = root / "products.parquet"
    pq.write_table(pa.Table.from_pylist(_catalog_rows(40), schema=PRODUCT_SCHEMA), products)
    embed = ["embed", "--model", str(tiny_model_dir), "--products", str(products)]
    assert main([*embed, "--output", str(root / "embeddings")]) == 0
    index = ["build-index", "--embeddings", str(root / "embeddings"), "--output", str(root / "index")]
    assert main(index) == 0
    return {"index": str(root / "index"), "model": str(tiny_model_dir), "root": str(root)}


def _search(built: dict[str, str], *flags: str) -> list[str]:
    return ["search", "--index", built["index"], "--model", built["model"], *flags]


def test_madr_search_prints_ranked_products_with_their_annotations(built, capsys) -> None:
    assert main(_search(built, "--query", "nike running shoe", "--k", "5")) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith('query "nike running shoe": 5 results in ') and "(index)" in out[0]
    ranked = [line.split() for line in out[1:] if line[:4].strip().isdigit()]
    assert [int(row[0]) for row in ranked] == [1, 2, 3, 4, 5]
    scores = [float(row[1]) for row in ranked]
    assert scores == sorted(scores, reverse=True)
    assert all(row[2].startswith("p0") and "running shoe" in " ".join(row[3:]) for row in ranked)
    assert any("brand=" in line and "(catalog)" in line for line in out)


def test_filters_keep_only_matching_products_and_still_return_k(built, capsys) -> None:
    flags = ("--query", "shoe", "--k", "3", "--filter", "brand=nike", "--filter", "color=RED")
    assert main(_search(built, *flags)) == 0
    out = capsys.readouterr().out.splitlines()
    # Nike is every 4th product and red every 3rd: p000, p012, p024, p036 are both.
    assert "4 products match the filters" in out[0] and out[0].startswith('query "shoe": 3 results')
    ids = [line.split()[2] for line in out[1:] if line[:4].strip().isdigit()]
    assert len(ids) == 3 and set(ids) <= {"p000", "p012", "p024", "p036"}


def test_a_batch_of_queries_is_written_as_a_run_file(built, tmp_path, capsys) -> None:
    queries = tmp_path / "queries.txt"
    queries.write_text("red shoe\n\nblue puma\n")
    output = tmp_path / "run.parquet"
    assert main(_search(built, "--queries", str(queries), "--k", "4", "--output", str(output))) == 0
    table = pq.read_table(output)
    assert table.schema.equals(RUN_SCHEMA) and table.num_rows == 8
    assert sorted(set(table.column("query_id").to_pylist())) == ["q1", "q2"]
    assert "wrote 8 results of 2 queries" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("bad", "expected"),
    [
        ("brand=nikee", "no product has brand = 'nikee' (4 known brand values); nearest known values: Nike"),
        ("colour=red", "unknown aspect 'colour' in --filter: the catalog's products have ['brand', 'color']"),
        ("brand", "--filter takes ASPECT=VALUE"),
    ],
)
def test_a_bad_filter_is_one_error_line_naming_what_is_known(built, capsys, bad, expected) -> None:
    assert main(_search(built, "--query", "shoe", "--filter", bad)) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("madr search: error: ") and expected in err[-1]


def test_an_index_built_by_another_model_is_refused(built, tmp_path, capsys) -> None:
    other = tmp_path / "other-model"
    with torch.random.fork_rng():
        torch.manual_seed(99)
        encoder, tokenizer = new_encoder(
            "bibert", pretrained=False, backbone=tiny_backbone(), projection_dim=16, model_version="test"
        )
    encoder.save_pretrained(other, tokenizer)
    write_manifest(other, "madr-model", {"variant": "bibert", "model_version": "test"})
    argv = ["search", "--index", built["index"], "--model", str(other), "--query", "shoe"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "was made by the model with fingerprint" in err and str(other) in err
    # The way out it names is one `madr search` has (it has no --allow_model_mismatch).
    assert "Give --model the model that made them" in err and "--allow_model_mismatch" not in err


def _tree_catalog(n: int = 8_000, dim: int = 32) -> tuple[object, Catalog, np.ndarray]:
    rng = np.random.default_rng(5)
    vectors = rng.normal(size=(n, dim)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    ids = [f"p{i}" for i in range(n)]
    index = ScannIndexBuilder.for_corpus(n, dim, depth=100).build(vectors, ids)
    assert index.config.uses_tree
    # 0.5 % of products are brand "Rare" (catalog), 30 % "Common" by a prediction at 0.9, and 10 % "Unsure"
    # by one at 0.5, under the threshold.
    aspects = []
    for i in range(n):
        catalog = {"brand": ["Rare"]} if i % 200 == 0 else {}
        predicted = "Common" if i % 10 < 3 else "Unsure" if i % 10 == 3 else None
        confidence = {"brand": 0.9 if predicted == "Common" else 0.5}
        aspects.append(
            fill_aspects(catalog, {"brand": predicted} if predicted else {}, confidence, ["brand"], 0.7)
        )
    catalog = Catalog(ids, [f"title {i}" for i in range(n)], aspects, lambda: vectors)
    return index, catalog, vectors


def test_selective_filters_over_fetch_or_score_exactly_on_a_real_tree() -> None:
    index, catalog, vectors = _tree_catalog()
    query = vectors[7:8] + 0.01
    query /= np.linalg.norm(query)
    common = catalog.matching([("brand", "common")])
    # Predictions at 0.9 count, those at 0.5 do not, and a catalog value is never overridden (40 Rare).
    assert len(common) == 2_400 - 40
    rows, scores, how = search_one(index, catalog, query, 10, common)
    assert how.startswith("index, over-fetched") and len(rows) == 10 and set(rows) <= set(common.tolist())
    rare = catalog.matching([("brand", "RARE")])
    assert len(rare) == 40
    rows, scores, how = search_one(index, catalog, query, 10, rare)
    assert how == "scored exactly over the 40 matching"
    truth = ExactSearcher(vectors[rare], [str(r) for r in rare]).search(query, 10)
    assert rows == rare[truth.indices[0]].tolist() and np.allclose(scores, truth.scores[0])
    with pytest.raises(ValueError, match="no product has brand = 'unsure'"):  # only below the threshold
        catalog.matching([("brand", "unsure")])


def test_an_index_built_with_products_fuses_bm25_and_search_says_so(built, tmp_path, capsys) -> None:
    """`madr build-index --products` ships BM25 in the artifact; search fuses it unless --lexical false.

    The tiny random model ranks by noise; "17" is in one title only (p017's), so BM25 ranks that product
    alone, and fused it is first whatever the dense rank: 1/61 + 1/(60 + r) beats any other's 1/61."""
    root = Path(built["root"])
    index = tmp_path / "hybrid-index"
    argv = ["build-index", "--embeddings", str(root / "embeddings"), "--output", str(index)]
    assert main([*argv, "--products", str(root / "products.parquet")]) == 0
    capsys.readouterr()
    hybrid = {**built, "index": str(index)}
    assert main(_search(hybrid, "--query", "17", "--k", "3")) == 0
    out = capsys.readouterr().out.splitlines()
    assert "(index + BM25, RRF)" in out[0]
    assert out[1].split()[2] == "p017"
    assert main(_search(hybrid, "--query", "17", "--k", "3", "--lexical", "false")) == 0
    out = capsys.readouterr().out.splitlines()
    assert "(index)" in out[0]
    assert main(_search(built, "--query", "17", "--k", "3")) == 0  # no BM25 in the artifact
    assert "(index)" in capsys.readouterr().out.splitlines()[0]


def test_build_index_tunes_on_queries_the_model_encodes_leaving_the_test_split_out(
    built, tmp_path, monkeypatch, capsys
) -> None:
    """`--tuning_queries Q --model M` reach the depth tuner as M's query vectors, test split left out."""
    from pipelines.index import shard_build

    seen: dict = {}
    real = shard_build.update_or_train

    def spy(*args, **kwargs):
        seen["queries"] = kwargs.get("evaluation_queries")
        return real(*args, **kwargs)

    monkeypatch.setattr(shard_build, "update_or_train", spy)
    queries = tmp_path / "queries.parquet"
    rows = [
        {"query_id": f"q{i}", "text": f"nike shoe {i}", "split": "test" if i % 3 == 0 else "train"}
        for i in range(9)
    ]
    pq.write_table(pa.Table.from_pylist(rows), queries)
    root = Path(built["root"])
    argv = ["build-index", "--embeddings", str(root / "embeddings"), "--output", str(tmp_path / "index")]
    assert main([*argv, "--tuning_queries", str(queries), "--model", built["model"]]) == 0
    assert seen["queries"].shape == (6, 16) and seen["queries"].dtype == np.float32
    capsys.readouterr()
    assert main([*argv[:-1], str(tmp_path / "other"), "--tuning_queries", str(queries)]) == 2
    assert "--tuning_queries and --model go together" in capsys.readouterr().err


def test_build_index_with_another_catalog_as_products_is_one_error_line(built, tmp_path, capsys) -> None:
    other = tmp_path / "other.parquet"
    rows = [{**row, "product_id": f"x{i}"} for i, row in enumerate(_catalog_rows(3))]
    pq.write_table(pa.Table.from_pylist(rows, schema=PRODUCT_SCHEMA), other)
    root = Path(built["root"])
    argv = ["build-index", "--embeddings", str(root / "embeddings"), "--output", str(tmp_path / "index")]
    assert main([*argv, "--products", str(other)]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "holds none of the 40 indexed products" in err and str(other) in err


def test_a_one_shard_index_built_in_beam_carries_bm25_and_the_tuning_queries(
    built, tmp_path, monkeypatch
) -> None:
    """Issue 48: one build path. On any runner but the local one `madr build-index` runs the Beam job; its
    one shard gets the catalog's BM25 and the driver's encoded tuning queries, as the in-process build
    does, and searches fused the same."""
    from index_builder import open_index
    from pipelines.index import shard_build
    from pipelines.index.config import IndexBuildConfig
    from pipelines.index.partitioned import build_partitioned, build_partitioned_index_pipeline

    seen: list = []
    real = shard_build.update_or_train
    monkeypatch.setattr(
        shard_build,
        "update_or_train",
        lambda *args, **kwargs: seen.append(kwargs["evaluation_queries"]) or real(*args, **kwargs),
    )
    queries = tmp_path / "queries.txt"
    queries.write_text("nike shoe\nred sock\nblue lamp\n")
    root = Path(built["root"])
    config = IndexBuildConfig(
        embeddings=str(root / "embeddings"),
        output=str(tmp_path / "in-process"),
        products=str(root / "products.parquet"),
        tuning_queries=str(queries),
        model=built["model"],
    )
    build_partitioned(config)
    pipeline, _ = build_partitioned_index_pipeline(config, folder=str(tmp_path / "beam"))
    pipeline.run().wait_until_finish()
    assert len(seen) == 2 and all(q.shape == (3, 16) for q in seen) and np.array_equal(seen[0], seen[1])
    direct, in_beam = (
        open_index(tmp_path / "in-process"),
        open_index(tmp_path / "beam" / "shard-00000-of-00001"),
    )
    assert direct.lexical is not None and in_beam.lexical is not None
    vectors = np.eye(16, dtype=np.float32)[:2]
    a = direct.search_hybrid(vectors, ["shoe 17", "sock"], 5)
    b = in_beam.search_hybrid(vectors, ["shoe 17", "sock"], 5)
    assert a.ids == b.ids and np.allclose(a.scores, b.scores)
