"""The nightly ships BM25 (issue 62): a 2-shard `madr nightly`, as typed, publishes BM25 in every shard of
its index, and `madr search` on what LATEST names fuses it with the dense ranking into the same top 10 as
a one-shard `madr build-index --products` of the same catalog. The model is the bundled MiniLM used
zero-shot: the tiny random model's scores all lie within 1e-5 of each other, where float rounding that
depends on the shard layout reorders the dense ranking."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from index_builder import PartitionedIndex
from index_builder.lexical import ShardedBm25
from jobs.cli import main
from pipelines.zero_shot import zero_shot_model
from schemas import PRODUCT_SCHEMA
from tests.test_search import _catalog_rows

QUERIES = ("asics running shoe red", "model 17", "blue road shoe")


def _ranked(out: str) -> list[list[str]]:
    """Each printed result block's product ids, in rank order (the header line holds a time)."""
    blocks = []
    for block in out.strip().split("\n\n"):
        lines = block.splitlines()
        assert "(index + BM25, RRF)" in lines[0], lines[0]
        blocks.append([line.split()[2] for line in lines[1:] if line[:4].strip().isdigit()])
    return blocks


@pytest.fixture(scope="module")
def night(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("nightly-bm25")
    products = root / "products.parquet"
    pq.write_table(pa.Table.from_pylist(_catalog_rows(120), schema=PRODUCT_SCHEMA), products)
    model = zero_shot_model()
    argv = ["nightly", "--model", model, "--products", str(products)]
    argv += ["--output", str(root / "nightly"), "--run_id", "n1", "--num_index_shards", "2"]
    assert main(argv) == 0
    latest = json.loads((root / "nightly" / "LATEST").read_text())
    return {"root": root, "products": products, "run": root / "nightly" / latest["run_id"], "model": model}


def test_a_two_shard_nightly_publishes_bm25_in_every_shard(night) -> None:
    index = PartitionedIndex.load(night["run"] / "index")
    assert len(index.shards) == 2 and isinstance(index.lexical, ShardedBm25)
    for shard in ("shard-00000-of-00002", "shard-00001-of-00002"):
        manifest = json.loads((night["run"] / "index" / shard / "manifest.json").read_text())
        assert any(name.startswith("lexical/") for name in manifest["files"])
        assert manifest["extra"]["lexical_statistics"]["documents"] == 120
    settings = json.loads((night["run"] / "index" / "manifest.json").read_text())["extra"]["settings"]
    assert settings["lexical_language"] == "auto"


def test_madr_search_on_latest_fuses_as_a_one_shard_build_of_the_catalog_does(night, capsys) -> None:
    one = night["root"] / "one-shard"
    build = ["build-index", "--embeddings", str(night["run"] / "embeddings"), "--output", str(one)]
    assert main([*build, "--products", str(night["products"])]) == 0
    capsys.readouterr()
    found = {}
    for name, index in (("nightly", night["run"] / "index"), ("one", one)):
        argv = ["search", "--index", str(index), "--model", str(night["model"]), "--k", "10"]
        for query in QUERIES:
            argv += ["--query", query]
        assert main(argv) == 0
        found[name] = _ranked(capsys.readouterr().out)
    assert found["nightly"] == found["one"] and all(len(ids) == 10 for ids in found["one"])


def test_lexical_false_in_the_index_flags_ships_no_bm25(night) -> None:
    argv = ["nightly", "--model", str(night["model"]), "--products", str(night["products"])]
    argv += ["--output", str(night["root"] / "plain"), "--run_id", "n1", "--index_flags", "--lexical false"]
    assert main(argv) == 0
    assert PartitionedIndex.load(night["root"] / "plain" / "n1" / "index").lexical is None


def test_the_nightlys_evaluation_reports_the_served_ranking_against_the_hybrid(tiny_model_dir, tmp_path):
    """metrics.json is the fused ranking's, with its comparisons (p-values) against zero-shot, BM25 and the
    BM25 + zero-shot hybrid; the dense one is beside it; the page says which ranking servers get."""
    import pyarrow as pa

    from schemas import JUDGMENT_SCHEMA, QUERY_SCHEMA

    products = tmp_path / "products.parquet"
    pq.write_table(pa.Table.from_pylist(_catalog_rows(60), schema=PRODUCT_SCHEMA), products)
    said = ["asics running shoe", "nike shoe red", "puma model", "adidas blue shoe", "road running shoe"]
    queries = [{"query_id": f"q{i}", "text": t, "aspects": None, "split": "test"} for i, t in enumerate(said)]
    judged = [
        {"query_id": f"q{i}", "product_id": f"p{(i * 7 + j) % 60:03d}", "grade": 3 - j, "label": None}
        for i in range(len(said))
        for j in range(3)
    ]
    pq.write_table(pa.Table.from_pylist(queries, schema=QUERY_SCHEMA), tmp_path / "queries.parquet")
    pq.write_table(pa.Table.from_pylist(judged, schema=JUDGMENT_SCHEMA), tmp_path / "judgments.parquet")
    argv = ["nightly", "--model", str(tiny_model_dir), "--products", str(products), "--run_id", "n1"]
    argv += ["--output", str(tmp_path / "nightly"), "--queries", str(tmp_path / "queries.parquet")]
    argv += ["--judgments", str(tmp_path / "judgments.parquet"), "--num_index_shards", "2", "--depth", "60"]
    assert main(argv) == 0
    evaluation = tmp_path / "nightly" / "n1" / "eval"
    metrics = json.loads((evaluation / "metrics.json").read_text())
    assert metrics["ranking"]["reported"] == "fused" and "BM25" in metrics["ranking"]["served"]
    assert set(metrics["against"]) == {"zero-shot", "bm25", "bm25+zero-shot"}
    assert set(metrics["against"]["bm25+zero-shot"]["ndcg@10"]) >= {"mean_a", "mean_b", "delta", "pvalue"}
    # The hybrid row is the zero-shot search fused with the index's own BM25 (no BM25 indexed again).
    assert (evaluation / "zero_shot" / "eval" / "fused" / "per_query.parquet").is_file()
    assert (evaluation / "dense" / "per_query.parquet").is_file()
    page = (tmp_path / "nightly" / "n1" / "report.html").read_text()
    assert "Servers get the dense ranking fused with the index&#x27;s BM25" in page
    lead = page.split("Against the BM25 + zero-shot hybrid: ")[1].split("</p>")[0]
    assert lead.startswith("recall@100 ") and "; ndcg@10 " in lead and "(" in lead  # means, difference (p)
