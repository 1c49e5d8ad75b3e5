"""Files an evaluation leaves behind: the run (Parquet, RUN_SCHEMA), metrics.json, per_query.parquet.

Files are written to a temporary name and renamed, so a reader never sees half a file. The stage that
calls these writes the directory's manifest last (schemas/manifest.py).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from numbers import Integral, Real
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from evaluation.metrics import MetricMean, parse_metric
from evaluation.relevance import RelevanceRule
from evaluation.text_table import format_text_table
from schemas.records import RUN_SCHEMA, per_query_metrics_schema

METRICS_FILE = "metrics.json"
PER_QUERY_FILE = "per_query.parquet"


def _write_table_atomically(table: pa.Table, path: Path) -> None:
    temporary = path.with_name(path.name + ".tmp")
    pq.write_table(table, temporary)
    os.replace(temporary, path)


def write_run(
    path: str | Path, rows: Iterable[Mapping[str, object]], metadata: Mapping[str, str] | None = None
) -> Path:
    """Write ``{query_id, product_id, rank, score}`` rows as RUN_SCHEMA Parquet, sorted by query and rank.

    Each query's ranks must be exactly 1..n and its products distinct. ``metadata`` (e.g. model id,
    index version) is stored in the Parquet schema metadata.
    """
    records = sorted(rows, key=lambda row: (str(row.get("query_id")), _rank(row)))
    checked: list[dict[str, object]] = []
    seen_products: set[tuple[str, str]] = set()
    next_rank: dict[str, int] = {}
    for row in records:
        query_id, product_id, rank, score = (
            row.get("query_id"),
            row.get("product_id"),
            _rank(row),
            row.get("score"),
        )
        if not isinstance(query_id, str) or not query_id or not isinstance(product_id, str) or not product_id:
            raise ValueError(f"run row needs non-empty string query_id and product_id: {row}")
        if isinstance(score, bool) or not isinstance(score, Real) or not math.isfinite(score):
            raise ValueError(f"run row needs a finite score: {row}")
        expected = next_rank.get(query_id, 1)
        if rank != expected:
            raise ValueError(
                f"query {query_id!r}: ranks must be 1..n without gaps or repeats, got rank {rank}"
            )
        next_rank[query_id] = expected + 1
        if (query_id, product_id) in seen_products:
            raise ValueError(f"query {query_id!r} ranks product {product_id!r} twice")
        seen_products.add((query_id, product_id))
        checked.append({"query_id": query_id, "product_id": product_id, "rank": rank, "score": float(score)})
    schema = RUN_SCHEMA.with_metadata(dict(metadata)) if metadata else RUN_SCHEMA
    table = pa.Table.from_pylist(checked, schema=schema)
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    _write_table_atomically(table, target)
    return target


def _rank(row: Mapping[str, object]) -> int:
    rank = row.get("rank")
    if isinstance(rank, bool) or not isinstance(rank, Integral) or rank < 1:
        raise ValueError(f"run row needs an integer rank >= 1 (1-based): {row}")
    return int(rank)


def read_run(path: str | Path) -> dict[str, list[str]]:
    """Query id -> product ids in rank order, from a file written by `write_run`."""
    table = pq.read_table(path)
    if not table.schema.equals(RUN_SCHEMA):
        raise ValueError(f"{path} is not a run file: schema {table.schema} differs from RUN_SCHEMA")
    ranked: dict[str, list[tuple[int, str]]] = {}
    for query_id, product_id, rank in zip(
        table.column("query_id").to_pylist(),
        table.column("product_id").to_pylist(),
        table.column("rank").to_pylist(),
        strict=True,
    ):
        ranked.setdefault(query_id, []).append((rank, product_id))
    return {query_id: [product_id for _, product_id in sorted(pairs)] for query_id, pairs in ranked.items()}


def write_metrics(
    out_dir: str | Path,
    summary: Mapping[str, MetricMean],
    per_query: Sequence[Mapping[str, object]],
    rule: RelevanceRule,
) -> tuple[Path, Path]:
    """Write ``metrics.json`` (means, counts, definitions, relevance rule) and ``per_query.parquet``.

    ``per_query`` rows are ``{"query_id": ..., <metric key>: value}`` with exactly the summary's metrics;
    undefined values stay ``nan`` in the Parquet file and a mean over no query is ``null`` in the JSON.
    """
    names = list(summary)
    for name in names:
        parse_metric(name)  # only known metric keys get a column and a definition
    rows = []
    for row in per_query:
        if set(row) != {"query_id", *names}:
            raise ValueError(f"per-query row keys {sorted(row)} differ from query_id + {names}")
        rows.append({"query_id": row["query_id"], **{name: _as_float(row[name], name) for name in names}})
    query_ids = [row["query_id"] for row in rows]
    if len(set(query_ids)) != len(query_ids):
        raise ValueError("per_query repeats a query_id")
    for name, mean in summary.items():
        if mean.count + mean.undefined != len(rows):
            raise ValueError(
                f"{name}: summary covers {mean.count + mean.undefined} queries but per_query has {len(rows)}"
            )
    rows.sort(key=lambda row: str(row["query_id"]))
    directory = Path(out_dir)
    directory.mkdir(parents=True, exist_ok=True)
    per_query_path = directory / PER_QUERY_FILE
    _write_table_atomically(
        pa.Table.from_pylist(rows, schema=per_query_metrics_schema(names)), per_query_path
    )
    document = {
        "num_queries": len(rows),
        "relevance_rule": rule.to_dict(),
        "undefined": "a metric is undefined for a query when its denominator is 0 (e.g. recall without "
        "relevant judged products); nan in per_query.parquet, left out of the mean",
        "metrics": {
            name: {
                "mean": None if math.isnan(mean.mean) else mean.mean,
                "count": mean.count,
                "undefined": mean.undefined,
                "definition": parse_metric(name).definition,
            }
            for name, mean in summary.items()
        },
    }
    metrics_path = directory / METRICS_FILE
    temporary = metrics_path.with_name(METRICS_FILE + ".tmp")
    temporary.write_text(json.dumps(document, indent=2, allow_nan=False) + "\n")
    os.replace(temporary, metrics_path)
    return metrics_path, per_query_path


def _as_float(value: object, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, Real):
        raise ValueError(f"{name} must be a number (nan when undefined), got {value!r}")
    return float(value)


def format_table(summary: Mapping[str, MetricMean]) -> str:
    """A plain aligned text table: metric, mean, queries it is over, queries where it is undefined."""
    header = ("metric", "mean", "queries", "undefined")
    body = [
        (name, "n/a" if math.isnan(mean.mean) else f"{mean.mean:.4f}", str(mean.count), str(mean.undefined))
        for name, mean in summary.items()
    ]
    return format_text_table(header, body)
