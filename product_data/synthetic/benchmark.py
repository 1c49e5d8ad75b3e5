"""`generate_benchmark`: plan the queries, stream the catalog shard by shard, write everything.

Memory is bounded by the query plan (about 15 planted specs per query) and one Parquet
chunk, not by the catalog: products are rendered on the fly from (seed, shard, position).
"""

from __future__ import annotations

import datetime as dt
import os
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

from product_data.synthetic.catalog import CatalogModel, iter_shard, product_id
from product_data.synthetic.config import SyntheticConfig
from product_data.synthetic.listing import render_product
from product_data.synthetic.queries import BenchmarkPlan, plan_benchmark
from product_data.synthetic.relevance import GRADE_NAMES, POSITIVE_GRADE, RULE
from product_data.synthetic.summary import BenchmarkSummary, CoverageCounter
from product_data.synthetic.writer import remove_stale_shards, shard_name, write_json, write_parquet
from schemas import (
    ECOMMERCE_ASPECTS,
    JUDGMENT_SCHEMA,
    PRODUCT_SCHEMA,
    QUERY_SCHEMA,
    QUERY_SPLITS,
    validate_judgment,
    validate_product,
    validate_query,
)
from schemas.manifest import write_manifest

GENERATOR = "product_data.synthetic"
# Bump whenever the same config would produce different bytes, so manifests tell runs apart.
GENERATOR_VERSION = 1


class _CatalogStats:
    """Coverage and vocabularies of the products as written; bounded by vocabulary sizes."""

    def __init__(self) -> None:
        self.coverage = CoverageCounter()
        self.leaves: set[str] = set()
        self.brands: set[str] = set()
        self.colors: set[str] = set()

    def observe(self, record: dict[str, Any]) -> dict[str, Any]:
        self.coverage.add(record["aspects"])
        self.leaves.add(record["category_path"][-1])
        if record["brand"]:
            self.brands.add(record["brand"])
        if record["color"]:
            self.colors.add(record["color"])
        return record


def _products(config: SyntheticConfig, model: CatalogModel, plan: BenchmarkPlan, shard: int,
              stats: _CatalogStats) -> Iterator[dict[str, Any]]:
    for position, spec, rng in iter_shard(config, model, plan.planted, shard):
        record = render_product(product_id(position), spec, model, rng, config.locale)
        # Validation is the contract with every later stage; a failure here is a generator bug.
        yield stats.observe(validate_product(record))


def generate_benchmark(config: SyntheticConfig, out_dir: str,
                       progress: Callable[[str], None] | None = None) -> BenchmarkSummary:
    """Write the benchmark of ``config`` under ``out_dir`` and return what was written.

    Layout: ``products/products-0000k-of-0000N.parquet`` (PRODUCT_SCHEMA), ``queries.parquet``
    (QUERY_SCHEMA), ``judgments.parquet`` (JUDGMENT_SCHEMA), ``summary.json``, ``manifest.json``.
    """
    report = progress or (lambda _message: None)
    out = Path(out_dir)
    model = CatalogModel.build(config.seed)
    plan = plan_benchmark(config, model)
    model = model.calibrated(plan.planted, config.num_products)
    report(f"planned {len(plan.queries)} queries, {len(plan.judgments)} judgments, "
           f"{len(plan.planted)} planted products")

    stats = _CatalogStats()
    names = [shard_name(shard, config.num_shards) for shard in range(config.num_shards)]
    remove_stale_shards(out / "products", keep=set(names))
    shards = []
    for shard, name in enumerate(names):
        records = _products(config, model, plan, shard, stats)
        rows = write_parquet(out / "products" / name, records, PRODUCT_SCHEMA)
        shards.append({"path": f"products/{name}", "rows": rows})
        report(f"wrote products/{name} ({rows:,} products, shard {shard + 1}/{config.num_shards})")

    query_coverage = CoverageCounter()
    query_records = []
    for query in plan.queries:
        record = validate_query({"query_id": query.query_id, "text": query.text,
                                 "aspects": query.aspects, "split": query.split})
        query_coverage.add(record["aspects"])
        query_records.append(record)
    write_parquet(out / "queries.parquet", query_records, QUERY_SCHEMA)
    judgment_records = (
        validate_judgment({"query_id": j.query_id, "product_id": product_id(j.position), "grade": j.grade,
                           "label": j.label})
        for j in plan.judgments
    )
    num_judgments = write_parquet(out / "judgments.parquet", judgment_records, JUDGMENT_SCHEMA)
    report(f"wrote queries.parquet ({len(query_records)} queries) and judgments.parquet "
           f"({num_judgments:,} judgments)")

    per_query = Counter(j.query_id for j in plan.judgments)
    counts = [per_query[q.query_id] for q in plan.queries]
    summary = BenchmarkSummary(
        num_products=config.num_products,
        num_queries={split: sum(q.split == split for q in plan.queries) for split in QUERY_SPLITS},
        num_judgments=num_judgments,
        judgments_per_query=(float(min(counts)), sum(counts) / len(counts), float(max(counts))),
        grade_histogram=dict(sorted(Counter(j.grade for j in plan.judgments).items())),
        product_aspect_coverage=stats.coverage.coverage(),
        query_aspect_coverage=query_coverage.coverage(),
        num_leaf_categories=len(stats.leaves),
        num_brands=len(stats.brands),
        num_colors=len(stats.colors),
    )
    write_json(out / "summary.json", summary.to_json())
    # Last, hashing every file; dated by SOURCE_DATE_EPOCH (default 0), the reproducible-builds
    # convention, so that one config still gives byte-identical files, manifest included.
    created_at = dt.datetime.fromtimestamp(int(os.environ.get("SOURCE_DATE_EPOCH", "0")), dt.timezone.utc)
    write_manifest(out, "benchmark", _manifest(config, plan, summary, shards), created_at.isoformat())
    report("wrote summary.json and manifest.json")
    return summary


def _manifest(config: SyntheticConfig, plan: BenchmarkPlan, summary: BenchmarkSummary,
              shards: list[dict[str, Any]]) -> dict[str, Any]:
    """What the directory is and how it was made; enough to regenerate it byte for byte."""
    unjudged = sum(not p.judged for q in plan.queries for p in q.products)
    return {
        "generator": GENERATOR,
        "generator_version": GENERATOR_VERSION,
        "description": "Seeded synthetic e-commerce retrieval benchmark: products, queries with "
                       "category/brand/color intents, graded judgments with hard negatives.",
        "config": asdict(config),
        "aspects": list(ECOMMERCE_ASPECTS),
        # Which file holds what; "files" (schemas.manifest) lists each file's sha256 and bytes.
        "layout": {
            "products": shards,
            "queries": "queries.parquet",
            "judgments": "judgments.parquet",
            "summary": "summary.json",
        },
        "schemas": {"products": "PRODUCT_SCHEMA", "queries": "QUERY_SCHEMA", "judgments": "JUDGMENT_SCHEMA"},
        "counts": {
            "products": summary.num_products,
            "queries": summary.num_queries,
            "judgments": summary.num_judgments,
            "planted_products": len(plan.planted),
            "unjudged_relevant_planted": unjudged,
        },
        "relevance": {
            "grades": {str(g): name for g, name in GRADE_NAMES.items()},
            "positive_min_grade": POSITIVE_GRADE,
            "rule": RULE,
            "labels": "the planting role of a judged product (exact, shade, other_color, other_variant, "
                      "other_brand, brand_other_category, mentions_query, sibling_category, same_department)",
            "judged_is_sample": "judgments cover planted products only; at least one more exact match "
                                "per query and background products of generic queries' leaves are "
                                "relevant but unjudged",
        },
    }
