"""The report's sections as rows of cells: what each table shows, computed from `NightSummary`s.

Kept apart from the HTML (`pipelines.report.page`) so that a test can compare a section's numbers
with the JSON files they come from without parsing markup.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from apache_beam.io.filesystems import FileSystems

from pipelines.report.figures import TONIGHT, ZERO_SHOT
from pipelines.report.night import NightSummary

ShownMetrics = ("recall@10", "recall@100", "recall@1000", "recall@10000", "ndcg@10", "mrr@10")
WORST_QUERIES = 10
STAGE_ORDER = ("embed", "index", "evaluate", "enrich", "export-vertex")
TOP_PRODUCTS = 5


def verdict(night: NightSummary, latest: str | None) -> tuple[str, list[str]]:
    """("published" / "not published" / ..., the reasons and warnings in one line each); `latest`: the
    run LATEST points to, which servers read while this one is not published."""
    lines: list[str] = []
    if night.standalone:
        stopped = night.unfinished_stages()
        lines += [f"{stage}: its folder has no manifest (unfinished)" for stage in stopped]
        return ("a run folder, not a nightly root: nothing is published from it", lines)
    if night.status is not None and not night.finished:
        lines.append(night.status.line())
    elif not night.finished:
        stopped = night.unfinished_stages()
        lines.append(
            f"stopped in {stopped[0]} (its folder has no manifest)" if stopped else "not run to the end"
        )
    if night.quality and night.quality.get("verdict"):
        lines.append(str(night.quality["verdict"]))
    check = night.catalog_check or {}
    if check.get("shrink") and check.get("shrink", 0) > 0:
        lines.append(
            f"catalog shrank by {100 * check['shrink']:.1f} % against the previous run "
            f"({check.get('previous_products'):,} to {check.get('products'):,})"
        )
    short = [e for e in (night.index_recall or {}).get("schedule") or [] if _below_target(e, night)]
    lines += [
        f"index: k = {e['depth']} reaches recall {e['tree_recall']:.3f}, below the target" for e in short
    ]
    if not night.published:
        lines.append(f"servers keep reading run {latest} (LATEST)" if latest else "nothing is published yet")
    if night.published:
        headline = "published"
    elif night.finished:
        headline = "finished, not published (LATEST points elsewhere)"
    else:
        headline = "not published"
    return headline, lines


def _below_target(entry: dict[str, Any], night: NightSummary) -> bool:
    target = (night.index_recall or {}).get("target")
    recall = entry.get("tree_recall")
    return entry.get("searcher") == "tree" and target is not None and recall is not None and recall < target


def catalog_rows(night: NightSummary, previous: NightSummary | None) -> list[tuple[str, str]]:
    counts = night.embed_counts or {}
    rows = [
        ("products read", _count(counts.get("products_read"))),
        ("embedded tonight (new or changed)", _count(counts.get("products_embedded"))),
        ("reused from last night", _count(counts.get("products_reused"))),
        ("dropped since last night", _count(counts.get("products_dropped_since_previous"))),
        ("dead-lettered", _count(counts.get("products_dead_lettered"))),
    ]
    if previous is not None and previous.products and night.products is not None:
        changed = (counts.get("products_new_or_changed") or 0) + (
            counts.get("products_dropped_since_previous") or 0
        )
        rows.append(("churn against last night", f"{100 * changed / previous.products:.1f} %"))
    return rows


@dataclass(frozen=True)
class MetricRow:
    metric: str
    tonight: float | None
    last_night: float | None
    last_delta: float | None
    last_pvalue: float | None
    zero_shot: float | None
    zero_delta: float | None
    zero_pvalue: float | None


def retrieval_rows(night: NightSummary) -> list[MetricRow]:
    """Tonight's means beside last night's and the zero-shot backbone's, with the paired differences
    and p-values the quality guard and the evaluation computed over the queries both judged."""
    comparisons = (night.quality or {}).get("comparisons") or {}
    last = next((c for name, c in comparisons.items() if name.startswith("last night")), {})
    zero = (night.zero_shot_comparison or {}).get("metrics") or {}
    rows = []
    for metric in [m for m in ShownMetrics if m in (night.metrics or {})]:
        against_last = (last.get("metrics") or {}).get(metric) or {}
        against_zero = zero.get(metric) or {}
        rows.append(
            MetricRow(
                metric,
                (night.metrics or {}).get(metric),
                against_last.get("mean_a"),
                against_last.get("delta"),
                against_last.get("pvalue"),
                (night.zero_shot_metrics or {}).get(metric),
                against_zero.get("delta"),
                against_zero.get("pvalue"),
            )
        )
    return rows


def recall_points(metrics: dict[str, float] | None) -> dict[int, float]:
    return {
        int(name.split("@")[1]): value
        for name, value in (metrics or {}).items()
        if name.startswith("recall@")
    }


TREND_METRICS = ("recall@100", "ndcg@10")
Series = dict[str, list[float | None]]


def trend_series(nights: Sequence[NightSummary]) -> list[tuple[str, Series, str]]:
    """(title, one value per night and series, unit) of each trend plot, oldest night first."""
    trends: list[tuple[str, Series, str]] = [
        (
            metric,
            {
                TONIGHT: [(n.metrics or {}).get(metric) for n in nights],
                ZERO_SHOT: [(n.zero_shot_metrics or {}).get(metric) for n in nights],
            },
            metric,
        )
        for metric in TREND_METRICS
    ]
    aspects = sorted({aspect for n in nights for aspect in n.annotation_precision})
    precision = {a: [n.annotation_precision.get(a) for n in nights] for a in aspects}
    trends.append(("annotation precision at the threshold", precision, "precision"))
    stages = sorted({stage for n in nights for stage in n.seconds}, key=_stage_position)
    trends.append(("wall time per stage", {s: [n.seconds.get(s) for n in nights] for s in stages}, "seconds"))
    rates = {s: [_rate(n.products, n.seconds.get(s)) for n in nights] for s in stages}
    trends.append(("products per second per stage", rates, "products/s"))
    return trends


def _rate(products: int | None, seconds: float | None) -> float | None:
    return products / seconds if products and seconds else None


def annotation_rows(night: NightSummary) -> list[tuple[str, ...]]:
    """Per aspect: precision and coverage of the values written at the threshold, Acc@1, the share
    out of the vocabulary, and the accuracy of the values the embed run wrote."""
    products = (night.annotation_quality or {}).get("products") or {}
    written = (night.annotation_quality or {}).get("written") or {}
    counts = products.get("counts") or {}
    rows = []
    for aspect in counts:
        outside = (products.get("out_of_vocabulary") or {}).get(aspect)
        rows.append(
            (
                aspect,
                _count(counts.get(aspect)),
                _share((products.get("confident_accuracy") or {}).get(aspect)),
                _share((products.get("confident_coverage") or {}).get(aspect)),
                _share((products.get("accuracy") or {}).get(aspect)),
                _share(outside / counts[aspect] if outside is not None and counts[aspect] else None),
                _share(written.get(aspect)),
            )
        )
    return rows


def fill_rows(night: NightSummary) -> list[tuple[str, ...]]:
    """Per aspect, what the enrich stage wrote: values kept from the catalog, predicted into a gap,
    withheld (below the threshold) and left empty."""
    counts = night.enrich_counts or {}
    aspects = sorted({name.rsplit("_", 1)[0] for name in counts if name.endswith("_predicted")})
    kinds = ("from_catalog", "predicted", "withheld", "empty")
    return [(aspect, *(_count(counts.get(f"{aspect}_{kind}")) for kind in kinds)) for aspect in aspects]


def schedule_rows(night: NightSummary) -> list[tuple[str, ...]]:
    return [
        (
            f"{entry['depth']:,}",
            str(entry.get("searcher")),
            _count(entry.get("leaves_to_search")),
            _count(entry.get("pre_reorder_num_neighbors")),
            _number(entry.get("tree_recall"), 3),
            _count(entry.get("tree_qps")),
            _count(entry.get("exact_qps")),
            str(entry.get("reason") or ""),
        )
        for entry in (night.index_recall or {}).get("schedule") or []
    ]


def cost_rows(night: NightSummary) -> list[tuple[str, ...]]:
    """Per stage: wall seconds, CPU seconds, peak memory, and core-hours per million products."""
    rows = []
    for stage, seconds in sorted(night.seconds.items(), key=lambda item: _stage_position(item[0])):
        used = night.usage.get(stage) or {}
        cpu = used.get("cpu_seconds")
        per_million = cpu / 3600 / (night.products / 1e6) if cpu is not None and night.products else None
        rows.append(
            (
                stage,
                _number(seconds, 1),
                _number(cpu, 1),
                _count(used.get("peak_rss_mb")),
                _number(per_million, 2),
            )
        )
    return rows


def _stage_position(stage: str) -> tuple[int, str]:
    return (STAGE_ORDER.index(stage) if stage in STAGE_ORDER else len(STAGE_ORDER), stage)


@dataclass(frozen=True)
class WorstQuery:
    query_id: str
    tonight: float
    baseline: float
    top: list[tuple[str, int | None]]  # (product id, its grade; None when unjudged)
    text: str | None = None  # the query, when the run records its queries file


def worst_queries(
    night: NightSummary,
    baseline_per_query: str,
    judgments: str | None,
    queries: str | None = None,
    metric: str = "ndcg@10",
) -> list[WorstQuery]:
    """The queries whose `metric` fell most against a baseline's per-query file, each with its text
    (`queries`) and tonight's top products and their grades (`judgments`), where the run records them."""
    if not (FileSystems.exists(night.per_query_file) and FileSystems.exists(baseline_per_query)):
        return []
    mine = _per_query(night.per_query_file, metric)
    theirs = _per_query(baseline_per_query, metric)
    drops = sorted(
        ((mine[q] - theirs[q], q) for q in mine if q in theirs and mine[q] < theirs[q]),
        key=lambda pair: pair[0],
    )[:WORST_QUERIES]
    if not drops:
        return []
    wanted = [q for _, q in drops]
    grades: dict[tuple[str, str], int] = {}
    if judgments and FileSystems.match([judgments])[0].metadata_list:
        table = pq.read_table(judgments, columns=["query_id", "product_id", "grade"])
        table = table.filter(pc.is_in(table["query_id"], value_set=_strings(wanted)))
        grades = {(r["query_id"], r["product_id"]): r["grade"] for r in table.to_pylist()}
    runs = FileSystems.match([FileSystems.join(night.evaluation, "run-*.parquet")])[0].metadata_list
    top: dict[str, list[tuple[int, str]]] = {q: [] for q in wanted}
    for match in runs:
        table = pq.read_table(match.path, columns=["query_id", "product_id", "rank"])
        keep = pc.and_(
            pc.is_in(table["query_id"], value_set=_strings(wanted)),
            pc.less_equal(table["rank"], TOP_PRODUCTS),
        )
        for row in table.filter(keep).to_pylist():
            top[row["query_id"]].append((row["rank"], row["product_id"]))
    texts: dict[str, str] = {}
    if queries and FileSystems.match([queries])[0].metadata_list:
        table = pq.read_table(queries, columns=["query_id", "text"])
        table = table.filter(pc.is_in(table["query_id"], value_set=_strings(wanted)))
        texts = dict(zip(table["query_id"].to_pylist(), table["text"].to_pylist(), strict=True))
    return [
        WorstQuery(q, mine[q], theirs[q], [(p, grades.get((q, p))) for _, p in sorted(top[q])], texts.get(q))
        for _, q in drops
    ]


def _per_query(path: str, metric: str) -> dict[str, float]:
    table = pq.read_table(path)
    if metric not in table.column_names:
        return {}
    return {
        q: float(v)
        for q, v in zip(table["query_id"].to_pylist(), table[metric].to_pylist(), strict=True)
        if v is not None and not math.isnan(v)
    }


def _strings(values: Sequence[str]) -> pa.Array:
    return pa.array(list(values), type=pa.string())


def _count(value: Any) -> str:
    return "–" if value is None else f"{value:,.0f}"


def _number(value: Any, digits: int) -> str:
    return "–" if value is None else f"{value:,.{digits}f}"


def _share(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f} %"


__all__ = [
    "MetricRow",
    "WorstQuery",
    "annotation_rows",
    "catalog_rows",
    "cost_rows",
    "fill_rows",
    "recall_points",
    "retrieval_rows",
    "schedule_rows",
    "trend_series",
    "verdict",
    "worst_queries",
]
