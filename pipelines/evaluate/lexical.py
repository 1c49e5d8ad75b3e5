"""The lexical rows: BM25 over the catalog's text, and BM25 fused with zero-shot by reciprocal rank.

Beside the zero-shot row (`pipelines.evaluate.zero_shot`) a team needs the two systems it could
build in an afternoon without madr: BM25 (`evaluation.lexical`) over the text the model reads of each
product (`model.text.document_text`: title, bullet points, description), and BM25 fused with the
backbone used zero-shot by reciprocal rank (k 60). Both rank the products the zero-shot run searched
(or, without it, every product of --products with a title), to the evaluation's depth, and are scored
on the same queries, judgments, metrics and relevance rule as the model; each is compared with the
model query by query (mean difference, paired t-test).

BM25 is one index over the whole catalog, so it is built on the driver, outside Beam: bm25s indexes a
million products' text in about a minute and holds its sparse matrix in a few GB. Per-query rows are
kept in FOLDER/lexical/<system>/ (metrics.json, per_query.parquet), so every figure can be re-checked.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from apache_beam.io.filesystems import FileSystems

from evaluation import MetricSpec, RelevanceRule, aggregate, format_table, write_metrics
from evaluation.comparison import ComparisonReport, compare_query_rows
from evaluation.lexical import RRF_K, Bm25Index, Bm25Settings, Ranking, reciprocal_rank_fusion
from evaluation.ranked import CorpusIds, score_query
from model.text import document_text
from pipelines.artifacts import list_files, parquet_rows, read_parquet_table
from pipelines.local_copies import local_output

if TYPE_CHECKING:
    from pipelines.evaluate.stage import EvaluateConfig

LOGGER = logging.getLogger(__name__)
LEXICAL_FOLDER = "lexical"
LEXICAL_FILE = "lexical.json"
BM25 = "bm25"
HYBRID = "bm25+zero-shot"


def wants_lexical(config: EvaluateConfig, zero_shot: bool) -> bool:
    """--lexical as given, else on whenever the zero-shot row is evaluated."""
    flag = config.evaluate.lexical
    if flag == "true" and not config.products:
        raise ValueError("--lexical needs --products: BM25 indexes the catalog's text")
    if flag is None:
        return zero_shot
    return flag == "true"


@dataclass(frozen=True)
class LexicalComparison:
    """The model against BM25 and against the hybrid: A is the lexical system, B the model."""

    analyzer: str
    reports: Mapping[str, ComparisonReport]
    corpus_size: int
    folder: str = LEXICAL_FOLDER

    def to_dict(self) -> dict[str, Any]:
        return {
            "bm25": self.analyzer,
            "fusion": f"reciprocal rank fusion of {BM25} and the zero-shot run, k {RRF_K}",
            "corpus_size": self.corpus_size,
            "folder": self.folder,
            "systems": {name: report.to_dict() for name, report in self.reports.items()},
        }

    def table(self) -> str:
        parts = []
        for name, report in self.reports.items():
            what = (
                self.analyzer if name == BM25 else f"{BM25} fused with the zero-shot run by RRF (k {RRF_K})"
            )
            lines = report.format().splitlines()
            parts.append("\n".join([f"Against {name}: {what}; A = {name}, B = this model", *lines[2:]]))
        return "\n\n".join(parts)


def _catalog_text(products: str, searched: set[str] | None) -> tuple[list[str], list[str]]:
    ids: list[str] = []
    texts: list[str] = []
    skipped = 0
    for row in parquet_rows(products, ["product_id", "title", "bullet_points", "description"]):
        product_id = row.get("product_id")
        wanted = product_id in searched if searched is not None else bool(product_id and row.get("title"))
        if not wanted:
            skipped += 1
            continue
        ids.append(str(product_id))
        texts.append(document_text(row))
    if skipped:
        LOGGER.info("BM25: %d products of %s left out (not in the searched corpus)", skipped, products)
    return ids, texts


def _test_queries(queries: str, split: str) -> dict[str, str]:
    return {
        str(row["query_id"]): str(row["text"])
        for row in parquet_rows(queries, ["query_id", "text", "split"])
        if row.get("split") == split and row.get("query_id") and row.get("text")
    }


def _judgments(judgments: str, corpus: CorpusIds) -> dict[str, dict[str, int]]:
    found: dict[str, dict[str, int]] = {}
    for row in parquet_rows(judgments, ["query_id", "product_id", "grade"]):
        if row["product_id"] in corpus and isinstance(row.get("grade"), int):
            found.setdefault(str(row["query_id"]), {})[str(row["product_id"])] = row["grade"]
    return found


def _zero_shot_rankings(run_folder: str, corpus: CorpusIds) -> dict[str, np.ndarray]:
    """The zero-shot run as corpus rows per query, best first (ids mapped in Arrow, not in Python)."""
    table = read_parquet_table(run_folder, "run", ["query_id", "product_id", "rank"])
    table = table.sort_by([("query_id", "ascending"), ("rank", "ascending")])
    rows = corpus.rows(table.column("product_id").to_pylist())
    query_ids = table.column("query_id").to_numpy(zero_copy_only=False)
    if not len(query_ids):
        return {}
    starts = np.flatnonzero(np.r_[True, query_ids[1:] != query_ids[:-1]])
    ends = np.r_[starts[1:], len(query_ids)]
    # A product the BM25 corpus lacks cannot be fused; the corpora are the same, so this is defensive.
    return {str(query_ids[s]): rows[s:e][rows[s:e] >= 0] for s, e in zip(starts, ends, strict=True)}


def _score(
    rankings: Mapping[str, np.ndarray],
    judgments: Mapping[str, Mapping[str, int]],
    corpus: CorpusIds,
    metrics: Sequence[MetricSpec],
    rule: RelevanceRule,
) -> list[dict[str, Any]]:
    rows = []
    for query_id, ranked in rankings.items():
        judged = judgments.get(query_id)
        if judged:
            rows.append(score_query(query_id, ranked, judged, corpus, metrics, rule)[0])
    return rows


def _write_system(folder: str, rows: list[dict[str, Any]], rule: RelevanceRule) -> None:
    with local_output(folder) as local:
        write_metrics(local, aggregate(rows), rows, rule)


def compare_with_lexical(
    config: EvaluateConfig,
    folder: str,
    model_rows: Sequence[Mapping[str, Any]],
    metrics: Sequence[MetricSpec],
    depth: int,
    rule: RelevanceRule,
    zero_shot_folder: str | None,
    settings: Bm25Settings | None = None,
) -> LexicalComparison:
    """Rank --products' test queries with BM25 and, given the zero-shot evaluation's folder, with BM25
    fused with its run; score both like the model, write them to FOLDER/lexical/, compare with the model."""
    assert config.products, "wants_lexical requires --products"
    settings = settings or Bm25Settings()
    searched: set[str] | None = None
    if zero_shot_folder is not None:
        embeddings = FileSystems.join(FileSystems.split(zero_shot_folder)[0], "embeddings")
        searched = set(read_parquet_table(embeddings, "embeddings", ["product_id"]).column(0).to_pylist())
    ids, texts = _catalog_text(config.products, searched)
    corpus = CorpusIds(ids)
    queries = _test_queries(config.evaluate.queries, config.evaluate.split)
    judgments = _judgments(config.evaluate.judgments, corpus)
    queries = {query_id: text for query_id, text in queries.items() if query_id in judgments}
    LOGGER.info("BM25: indexing %d products, ranking %d queries to depth %d", len(ids), len(queries), depth)
    index = Bm25Index(ids, texts, settings)
    found: list[Ranking] = index.search(list(queries.values()), depth)
    rankings = {BM25: dict(zip(queries, (ranking.rows for ranking in found), strict=True))}
    if zero_shot_folder is not None and list_files(zero_shot_folder, "run*.parquet"):
        zero = _zero_shot_rankings(zero_shot_folder, corpus)
        rankings[HYBRID] = {
            query_id: reciprocal_rank_fusion([rankings[BM25][query_id], zero.get(query_id, [])], depth).rows
            for query_id in queries
        }
    model = {str(row["query_id"]): {k: v for k, v in row.items() if k != "query_id"} for row in model_rows}
    names = [spec.key for spec in metrics]
    base = FileSystems.join(folder, LEXICAL_FOLDER)
    reports: dict[str, ComparisonReport] = {}
    for name, ranked in rankings.items():
        rows = _score(ranked, judgments, corpus, metrics, rule)
        _write_system(FileSystems.join(base, name), rows, rule)
        LOGGER.info("%s:\n%s", name, format_table(aggregate(rows)))
        scored = {row.pop("query_id"): row for row in rows}
        reports[name] = compare_query_rows(name, scored, names, "model", model, names)
    comparison = LexicalComparison(settings.describe(), reports, len(ids))
    with FileSystems.create(FileSystems.join(folder, LEXICAL_FILE)) as handle:
        handle.write(json.dumps(comparison.to_dict(), indent=2).encode("utf-8"))
    return comparison


__all__ = ["BM25", "HYBRID", "LexicalComparison", "compare_with_lexical", "wants_lexical"]
