"""Tests of the embedded synthetic benchmark (product_data.synthetic).

One small benchmark (3,000 products, 120 queries) is generated once per module and read
back from its files, so every assertion is about what a later stage would actually read.
"""

from __future__ import annotations

import json
import random
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from product_data.synthetic import BenchmarkSummary, SyntheticConfig, generate_benchmark
from product_data.synthetic.catalog import CatalogModel, ProductSpec
from product_data.synthetic.config import PRODUCT_COVERAGE_TARGET, QUERY_COVERAGE_TARGET
from product_data.synthetic.listing import render_product
from product_data.synthetic.relevance import QueryTarget, grade
from product_data.synthetic.taxonomy import build_taxonomy
from product_data.synthetic.vocabulary import ALL_COLORS, COLOR_FAMILIES
from schemas import (
    JUDGMENT_SCHEMA,
    PRODUCT_SCHEMA,
    QUERY_SCHEMA,
    QUERY_SPLITS,
    validate_judgment,
    validate_product,
    validate_query,
)

SMALL = SyntheticConfig(num_products=3_000, num_queries=120, seed=7, products_per_shard=1_000)


class Benchmark:
    """A generated benchmark, read back from disk."""

    def __init__(self, root: Path, summary: BenchmarkSummary, messages: list[str]) -> None:
        self.root, self.summary, self.messages = root, summary, messages
        self.products = {r["product_id"]: r for r in pq.read_table(root / "products").to_pylist()}
        self.queries = pq.read_table(root / "queries.parquet").to_pylist()
        self.judgments = pq.read_table(root / "judgments.parquet").to_pylist()
        self.by_query: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for judgment in self.judgments:
            self.by_query[judgment["query_id"]].append(judgment)

    @staticmethod
    def aspects(record: dict[str, Any]) -> dict[str, list[str]]:
        return dict(record["aspects"] or [])  # Arrow reads a map back as (key, value) pairs


@pytest.fixture(scope="module")
def bench(tmp_path_factory: pytest.TempPathFactory) -> Benchmark:
    root = tmp_path_factory.mktemp("synthetic") / "bench"
    messages: list[str] = []
    summary = generate_benchmark(SMALL, str(root), progress=messages.append)
    return Benchmark(root, summary, messages)


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


# --- configuration ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"num_products": 100, "num_queries": 120}, "too small"),
        ({"num_queries": 0}, "num_queries"),
        ({"num_products": True}, "integer"),
        ({"seed": -1}, "seed"),
        ({"valid_fraction": 0.5, "test_fraction": 0.5}, "leave room for train"),
        ({"test_fraction": 1.5}, "test_fraction"),
        ({"products_per_shard": 0}, "products_per_shard"),
        ({"locale": "US English"}, "locale"),
    ],
)
def test_config_rejects_bad_values(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        SyntheticConfig(**kwargs)


def test_small_catalogs_judge_fewer_products_per_query(tmp_path: Path) -> None:
    assert SyntheticConfig().max_judged_per_query == 20
    small = SyntheticConfig(num_products=1_200, num_queries=120)  # the smallest allowed
    assert small.max_judged_per_query == 8
    summary = generate_benchmark(small, str(tmp_path / "small"))
    judgments = pq.read_table(tmp_path / "small" / "judgments.parquet").to_pylist()
    best = defaultdict(int)
    for judgment in judgments:
        best[judgment["query_id"]] = max(best[judgment["query_id"]], judgment["grade"])
    assert summary.judgments_per_query == (8.0, 8.0, 8.0)
    assert len(best) == 120 and min(best.values()) >= 2


# --- determinism and layout --------------------------------------------------------------------


def test_same_config_writes_identical_bytes(bench: Benchmark, tmp_path: Path) -> None:
    generate_benchmark(SMALL, str(tmp_path / "again"))
    assert _files(tmp_path / "again") == _files(bench.root)
    generate_benchmark(SyntheticConfig(**{**SMALL.__dict__, "seed": 8}), str(tmp_path / "other"))
    other = _files(tmp_path / "other")
    assert other["queries.parquet"] != _files(bench.root)["queries.parquet"]


def test_layout_shards_and_progress(bench: Benchmark) -> None:
    shards = sorted(p.name for p in (bench.root / "products").iterdir())
    assert shards == [f"products-{k:05d}-of-00003.parquet" for k in range(3)]
    assert [pq.ParquetFile(bench.root / "products" / s).metadata.num_rows for s in shards] == [1000] * 3
    assert sum("products-" in m for m in bench.messages) == 3  # one progress message per shard
    manifest = json.loads((bench.root / "manifest.json").read_text())
    assert manifest["generator"] == "product_data.synthetic"
    assert manifest["config"]["seed"] == SMALL.seed
    assert [f["path"] for f in manifest["layout"]["products"]] == [f"products/{s}" for s in shards]
    assert set(manifest["files"]) == {f"products/{s}" for s in shards} | {
        "queries.parquet",
        "judgments.parquet",
        "summary.json",
    }
    assert manifest["counts"]["judgments"] == len(bench.judgments)
    assert json.loads((bench.root / "summary.json").read_text()) == bench.summary.to_json()


def test_files_have_the_shared_schemas(bench: Benchmark) -> None:
    for shard in (bench.root / "products").iterdir():
        assert pq.read_schema(shard).equals(PRODUCT_SCHEMA)
    assert pq.read_schema(bench.root / "queries.parquet").equals(QUERY_SCHEMA)
    assert pq.read_schema(bench.root / "judgments.parquet").equals(JUDGMENT_SCHEMA)


def test_every_record_validates(bench: Benchmark) -> None:
    assert len(bench.products) == SMALL.num_products
    for record in bench.products.values():
        assert validate_product(record)["locale"] == "us"
    for record in bench.queries:
        validate_query(record)
    for record in bench.judgments:
        validate_judgment(record)


# --- taxonomy and vocabularies --------------------------------------------------------------


def test_taxonomy_is_hierarchical_and_large() -> None:
    taxonomy = build_taxonomy()
    assert 300 <= len(taxonomy.leaves) <= 600
    assert {len(leaf.path) for leaf in taxonomy.leaves} == {3, 4}
    assert len({leaf.name for leaf in taxonomy.leaves}) == len(taxonomy.leaves)
    assert taxonomy.leaf("Juicers").path == ("Home & Kitchen", "Kitchen Appliances", "Juicers")
    assert taxonomy.leaf("Juicing Cookbooks").department == "Books"
    assert taxonomy.leaf("Men's Athletic Socks").path[:3] == ("Clothing, Shoes & Jewelry", "Men", "Socks")
    assert taxonomy.leaf("Juicing Cookbooks").index in taxonomy.companions[taxonomy.index_of["Juicers"]]
    assert all(leaf.index not in taxonomy.companions[leaf.index] for leaf in taxonomy.leaves)


def test_brands_tied_to_departments_and_colors_have_shades() -> None:
    model = CatalogModel.build(SMALL.seed)
    taxonomy = model.taxonomy
    departments = {
        brand: {taxonomy.leaves[i].department for i in leaves}
        for brand, leaves in model.leaves_by_brand.items()
    }
    assert departments["Breville"] == {"Home & Kitchen"}
    assert "Electronics" in departments["HP"]
    assert "Nike" in model.brands(taxonomy.index_of["Men's Running Shoes"])
    assert sum(len(d) > 1 for d in departments.values()) >= 5  # a few brands span departments
    assert 40 <= len(ALL_COLORS) <= 80
    assert {"Light Pink", "Hot Pink", "Rose"} <= set(COLOR_FAMILIES["Pink"])  # madral-kdd22 Table 9
    assert {"Navy Blue", "Sky Blue"} <= set(COLOR_FAMILIES["Blue"])


# --- coverage (Table 3, madral-kdd22) ---------------------------------------------------------


def _coverage(records: list[dict[str, Any]]) -> dict[str, float]:
    counts = Counter(name for r in records for name, values in Benchmark.aspects(r).items() if values)
    return {name: counts[name] / len(records) for name in ("category", "brand", "color")}


def test_aspect_coverage_matches_table_3(bench: Benchmark) -> None:
    products = _coverage(list(bench.products.values()))
    queries = _coverage(bench.queries)
    assert products == pytest.approx(bench.summary.product_aspect_coverage)
    assert queries == pytest.approx(bench.summary.query_aspect_coverage)
    for name, target in PRODUCT_COVERAGE_TARGET.items():
        assert abs(products[name] - target) < 0.03, (name, products[name])
    for name, target in QUERY_COVERAGE_TARGET.items():
        assert abs(queries[name] - target) < 0.03, (name, queries[name])
    # Fields are set more often than annotations: the tagger does not find everything.
    with_brand = sum(r["brand"] is not None for r in bench.products.values()) / len(bench.products)
    assert with_brand > products["brand"] + 0.1
    assert any(len(Benchmark.aspects(r).get("category", [])) == 2 for r in bench.products.values())


def test_listings_mention_aspects_like_real_ones(bench: Benchmark) -> None:
    branded = [r for r in bench.products.values() if "brand" in Benchmark.aspects(r)]
    in_title = sum(r["brand"] in r["title"] for r in branded) / len(branded)
    assert 0.6 < in_title < 0.98
    colored = [r for r in bench.products.values() if r["color"]]
    places = Counter(
        "title"
        if r["color"] in r["title"]
        else "body"
        if r["color"] in (r["description"] or "") + " ".join(r["bullet_points"] or [])
        else "nowhere"
        for r in colored
    )
    assert min(places.values()) > 0.1 * len(colored), places
    words = [len(r["description"].split()) if r["description"] else 0 for r in bench.products.values()]
    assert 0.08 < words.count(0) / len(words) < 0.25  # title-only listings
    assert sum(n >= 60 for n in words) > 0.1 * len(words) and max(words) <= 170


# --- queries and judgments ------------------------------------------------------------------


def test_splits_and_distinct_queries(bench: Benchmark) -> None:
    splits = Counter(q["split"] for q in bench.queries)
    assert splits == SMALL.split_sizes() and set(splits) == set(QUERY_SPLITS)
    assert bench.summary.num_queries == dict(splits)
    assert len({q["text"] for q in bench.queries}) == len(bench.queries)


def test_judgments_are_graded_and_complete(bench: Benchmark) -> None:
    assert {q["query_id"] for q in bench.queries} == set(bench.by_query)
    for query in bench.queries:
        judged = bench.by_query[query["query_id"]]
        assert 8 <= len(judged) <= 20
        assert all(0 <= j["grade"] <= 4 for j in judged)
        assert max(j["grade"] for j in judged) >= 2, query["text"]  # recall is defined
        assert len({j["product_id"] for j in judged}) == len(judged)
        assert all(j["product_id"] in bench.products for j in judged)
    grades = Counter(j["grade"] for j in bench.judgments)
    assert grades == bench.summary.grade_histogram and set(grades) == {0, 1, 2, 3, 4}


def _leaf(product: dict[str, Any]) -> str:
    return product["category_path"][-1]


def _negatives(bench: Benchmark, query: dict[str, Any]) -> list[dict[str, Any]]:
    """Judged products with grade <= 1: negatives for binary metrics (madral-kdd22 §8.1)."""
    return [bench.products[j["product_id"]] for j in bench.by_query[query["query_id"]] if j["grade"] <= 1]


def test_hard_negatives(bench: Benchmark) -> None:
    checked = 0
    for query in bench.queries:
        aspects = Benchmark.aspects(query)
        if not ({"brand", "category"} <= set(aspects)):
            continue
        brand, leaf = aspects["brand"][0], aspects["category"][0]
        negatives = _negatives(bench, query)
        assert any(p["brand"] == brand and _leaf(p) != leaf for p in negatives), query["text"]
        assert any(p["brand"] != brand and _leaf(p) == leaf for p in negatives), query["text"]
        checked += 1
    assert checked >= 5
    # Every query has a negative from another category whose title names the query's product.
    taxonomy = build_taxonomy()
    for query in bench.queries:
        leaf = Benchmark.aspects(query).get("category", [None])[0]
        if leaf is None:
            continue
        noun = taxonomy.leaf(leaf).noun.lower()
        negatives = _negatives(bench, query)
        assert any(_leaf(p) != leaf and noun in p["title"].lower() for p in negatives), query["text"]


def test_grades_follow_the_rule_on_product_fields(bench: Benchmark) -> None:
    for query in bench.queries:
        aspects = Benchmark.aspects(query)
        for judgment in bench.by_query[query["query_id"]]:
            product = bench.products[judgment["product_id"]]
            wrong_leaf = "category" in aspects and _leaf(product) != aspects["category"][0]
            wrong_brand = "brand" in aspects and product["brand"] != aspects["brand"][0]
            if wrong_leaf or wrong_brand:
                assert judgment["grade"] <= 1
            elif "category" in aspects:
                assert judgment["grade"] >= 2


def _field(product: dict[str, Any], aspect: str) -> str | None:
    return _leaf(product) if aspect == "category" else product[aspect]


def test_catalog_holds_more_relevant_products_than_judged(bench: Benchmark) -> None:
    for query in bench.queries:
        aspects = Benchmark.aspects(query)
        if "category" not in aspects and "brand" not in aspects:
            continue
        want = {name: values[0] for name, values in aspects.items()}

        def matches(product: dict[str, Any], want: dict[str, str] = want) -> bool:
            return all(_field(product, name) == value for name, value in want.items())

        # Products matching every aspect the query names grade >= 2 by the rule; some are unjudged.
        relevant = sum(matches(p) for p in bench.products.values())
        judged = sum(matches(bench.products[j["product_id"]]) for j in bench.by_query[query["query_id"]])
        assert judged >= 1 and relevant > judged, query["text"]


# --- the relevance rule and madral-kdd22 Table 8 ---------------------------------------------


def test_relevance_rule_and_the_juicer_book() -> None:
    model = CatalogModel.build(SMALL.seed)
    index = model.taxonomy.index_of
    juicers, blenders, book = index["Juicers"], index["Blenders"], index["Juicing Cookbooks"]
    target = QueryTarget(juicers, "Breville", "Pink", None)
    assert grade(target, ProductSpec(juicers, "Breville", "Pink", "700-Watt"), model.taxonomy) == 4
    assert grade(target, ProductSpec(juicers, "Breville", "Hot Pink", "700-Watt"), model.taxonomy) == 3
    assert grade(target, ProductSpec(juicers, "Breville", "Black", "700-Watt"), model.taxonomy) == 2
    assert grade(target, ProductSpec(juicers, "Breville", None, "700-Watt"), model.taxonomy) == 2
    assert grade(target, ProductSpec(juicers, "Cuisinart", "Pink", "700-Watt"), model.taxonomy) == 1
    assert grade(target, ProductSpec(blenders, "Breville", "Pink", "700-Watt"), model.taxonomy) == 1
    assert grade(target, ProductSpec(blenders, "Cuisinart", "Pink", "700-Watt"), model.taxonomy) == 0
    assert (
        grade(
            QueryTarget(None, "Breville", None, None),
            ProductSpec(blenders, "Ninja", None, "x"),
            model.taxonomy,
        )
        == 0
    )
    cookbook = ProductSpec(book, "Simple Steps Press", None, "Paperback", mentions=(juicers, "Breville"))
    assert grade(QueryTarget(juicers, "Breville", None, None), cookbook, model.taxonomy) == 0
    record = render_product("p1", cookbook, model, random.Random(0), "us")
    assert "Breville Juicer" in record["title"] and record["category_path"][0] == "Books"
