"""The lexical rows: BM25 over the catalog's text, and BM25 fused with zero-shot by reciprocal rank.

Beside the zero-shot row (`pipelines.evaluate.zero_shot`) a team needs the two systems it could
build in an afternoon without madr: BM25 (`index_builder.lexical`) over the text the model reads of each
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
from evaluation.comparison import ComparisonReport, by_query, compare_query_rows
from evaluation.ranked import CorpusIds, score_query
from evaluation.report import PER_QUERY_FILE
from index_builder.bm25 import Bm25Index, Bm25Settings, Ranking
from index_builder.lexical import RRF_K, reciprocal_rank_fusion
from pipelines.evaluate.corpus_parts import index_parts
from pipelines.evaluate.report import read_per_query
from pipelines.index.lexical_build import catalog_terms
from pipelines.io.parquet_reading import parquet_rows, read_parquet_table
from pipelines.layout import LEXICAL_FILE, LEXICAL_FOLDER
from pipelines.storage.local_copies import local_output
from pipelines.storage.stage_manifests import list_files
from schemas.manifest import MANIFEST_FILE

if TYPE_CHECKING:
    from pipelines.evaluate.config import EvaluateConfig

LOGGER = logging.getLogger(__name__)
BM25 = "bm25"
HYBRID = "bm25+zero-shot"
MODEL_HYBRID = "bm25+model"


def wants_lexical(config: EvaluateConfig, zero_shot: bool, served: bool = False) -> bool:
    """--lexical as given, else on whenever the zero-shot row is evaluated or the index's BM25 was searched
    (`served`: its rows cost nothing more)."""
    flag = config.evaluate.lexical
    if flag == "true" and not (config.products or served):
        raise ValueError("--lexical needs --products (BM25 indexes the catalog's text) or an index with BM25")
    if flag is None:
        return zero_shot or served
    return flag == "true"


@dataclass(frozen=True)
class LexicalComparison:
    """The model against BM25 and against BM25 + zero-shot (A is the lexical system, B the model), and
    BM25 fused with the model's own run against BM25 + zero-shot (`fusion`): what fusing BM25 into
    madr's retrieval would gain."""

    analyzer: str
    reports: Mapping[str, ComparisonReport]
    corpus_size: int
    fusion: ComparisonReport | None = None
    folder: str = LEXICAL_FOLDER
    # Whether B, the model, is its served ranking (fused with the index's BM25) rather than a dense one.
    served: bool = False

    @property
    def model_label(self) -> str:
        return "this model's served ranking (dense + BM25, RRF)" if self.served else "this model"

    def to_dict(self) -> dict[str, Any]:
        return {
            "model_ranking": "served" if self.served else "dense",
            "bm25": self.analyzer,
            "fusion": f"reciprocal rank fusion of {BM25} with the zero-shot or the model's run, k {RRF_K}",
            "corpus_size": self.corpus_size,
            "folder": self.folder,
            "systems": {name: report.to_dict() for name, report in self.reports.items()},
            **({"model_fused_with_bm25": self.fusion.to_dict()} if self.fusion else {}),
        }

    def table(self) -> str:
        explained = {
            BM25: self.analyzer,
            HYBRID: f"{BM25} fused with the zero-shot run by RRF (k {RRF_K})",
            MODEL_HYBRID: f"{BM25} fused with this model's run by RRF (k {RRF_K})",
        }
        parts = []
        for name, report in self.reports.items():
            lines = report.format().splitlines()
            title = f"Against {name}: {explained[name]}; A = {name}, B = {self.model_label}"
            parts.append("\n".join([title, *lines[2:]]))
        if self.fusion is not None:
            lines = self.fusion.format().splitlines()
            title = f"{MODEL_HYBRID} against {HYBRID}: what fusing BM25 into this model's retrieval gains"
            parts.append("\n".join([f"{title}; A = {HYBRID}, B = {MODEL_HYBRID}", *lines[2:]]))
        return "\n\n".join(parts)


def catalog_bm25(products: str, searched: set[str] | None, settings: Bm25Settings) -> Bm25Index:
    """BM25 over the catalog's products with a title (the `searched` ones when given), each analyzed in its
    locale's language, scored with their own statistics."""
    counted, _ = catalog_terms(products, settings)
    keep = [i for i, pid in enumerate(counted.ids) if searched is None or pid in searched]
    if searched is not None and len(keep) < len(searched):
        LOGGER.info("BM25: %d searched products have no title in %s", len(searched) - len(keep), products)
    if not keep:
        raise ValueError(f"BM25: --products {products} holds none of the searched products with a title")
    chosen = counted.subset(keep)
    return Bm25Index.of_terms(chosen.ids, chosen.terms, chosen.statistics(), settings)


def split_queries(queries: str, split: str) -> dict[str, str]:
    return {
        str(row["query_id"]): str(row["text"])
        for row in parquet_rows(queries, ["query_id", "text", "split"])
        if row.get("split") == split and row.get("query_id") and row.get("text")
    }


def judgments_in(judgments: str, corpus: CorpusIds) -> dict[str, dict[str, int]]:
    found: dict[str, dict[str, int]] = {}
    for row in parquet_rows(judgments, ["query_id", "product_id", "grade"]):
        if row["product_id"] in corpus and isinstance(row.get("grade"), int):
            found.setdefault(str(row["query_id"]), {})[str(row["product_id"])] = row["grade"]
    return found


def run_rankings(run_folder: str, corpus: CorpusIds) -> dict[str, np.ndarray]:
    """A dense run as corpus rows per query, best first (ids mapped by `CorpusIds`, grouped in numpy)."""
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


@dataclass(frozen=True)
class JudgedCatalog:
    """What the lexical systems rank and are scored on: a catalog, its queries of one split, judgments."""

    products: str
    queries: str
    judgments: str
    split: str = "test"


@dataclass(frozen=True)
class LexicalRuns:
    """Each lexical system's per-query metric rows (with query_id), and how many products it ranked."""

    rows: Mapping[str, list[dict[str, Any]]]
    corpus_size: int
    analyzer: str


def score_lexical(
    catalog: JudgedCatalog,
    scoring: tuple[Sequence[MetricSpec], int, RelevanceRule],
    zero_shot_eval: str | None,
    settings: Bm25Settings | None = None,
    model_eval: str | None = None,
) -> LexicalRuns:
    """Rank the catalog's judged queries with BM25 and, given a zero-shot evaluation folder (its run and
    its sibling embeddings/), with BM25 fused with that run; score both with ``scoring`` (metrics, depth,
    relevance rule). With a zero-shot run, BM25 ranks exactly the products it searched. Given the model's
    evaluation folder, BM25 is fused with its run too."""
    metrics, depth, rule = scoring
    settings = settings or Bm25Settings()
    searched: set[str] | None = None
    if zero_shot_eval is not None:
        embeddings = FileSystems.join(FileSystems.split(zero_shot_eval)[0], "embeddings")
        searched = set(read_parquet_table(embeddings, "embeddings", ["product_id"]).column(0).to_pylist())
    bm25 = catalog_bm25(catalog.products, searched, settings)
    corpus = CorpusIds(bm25.product_ids)
    judgments = judgments_in(catalog.judgments, corpus)
    queries = {
        query_id: text
        for query_id, text in split_queries(catalog.queries, catalog.split).items()
        if query_id in judgments
    }
    LOGGER.info("BM25: %d products, ranking %d queries to depth %d", len(bm25), len(queries), depth)
    found: list[Ranking] = bm25.search(list(queries.values()), depth)
    rankings = {BM25: dict(zip(queries, (ranking.rows for ranking in found), strict=True))}
    for name, run_folder in ((HYBRID, zero_shot_eval), (MODEL_HYBRID, model_eval)):
        if run_folder is not None and list_files(run_folder, "run*.parquet"):
            dense = run_rankings(run_folder, corpus)
            rankings[name] = {
                query_id: reciprocal_rank_fusion(
                    [rankings[BM25][query_id], dense.get(query_id, [])], depth
                ).rows
                for query_id in queries
            }
    rows = {name: _score(ranked, judgments, corpus, metrics, rule) for name, ranked in rankings.items()}
    return LexicalRuns(rows, len(bm25), settings.describe())


def served_lexical(folder: str, zero_shot_eval: str | None, bm25_index: str) -> LexicalRuns:
    """The lexical rows of an evaluation that searched the index's own BM25 (`pipelines.evaluate.systems`):
    BM25's from FOLDER/bm25/, the hybrid's from the zero-shot evaluation's fused/ (its exact search fused
    with the same BM25); nothing is indexed again."""
    rows: dict[str, list[dict[str, Any]]] = {}
    found = {BM25: FileSystems.join(folder, "bm25")}
    if zero_shot_eval is not None:
        found[HYBRID] = FileSystems.join(zero_shot_eval, "fused")
    for name, system in found.items():
        if FileSystems.exists(FileSystems.join(system, PER_QUERY_FILE)):
            by_id, _ = read_per_query(system)
            rows[name] = [{"query_id": query_id, **row} for query_id, row in by_id.items()]
    parts = index_parts(bm25_index)
    with FileSystems.open(FileSystems.join(parts[0].path, MANIFEST_FILE)) as handle:
        analyzer = str(json.loads(handle.read())["extra"].get("lexical", "BM25"))
    return LexicalRuns(rows, sum(part.count for part in parts), analyzer)


def compare_with_lexical(
    config: EvaluateConfig,
    folder: str,
    model_rows: Sequence[Mapping[str, Any]],
    scoring: tuple[Sequence[MetricSpec], int, RelevanceRule],
    zero_shot_eval: str | None,
    bm25_index: str | None = None,
) -> LexicalComparison:
    """BM25's and the hybrid's rows, from the index's BM25 the evaluation searched (`bm25_index`, then
    the model's rows are its served, fused ranking), else `score_lexical` over --products; each system's
    rows written to FOLDER/lexical/<system>/ and compared with the model's."""
    opts = config.evaluate
    if bm25_index:
        runs = served_lexical(folder, zero_shot_eval, bm25_index)
    else:
        assert config.products, "wants_lexical requires --products"
        catalog = JudgedCatalog(config.products, opts.queries, opts.judgments, opts.split)
        runs = score_lexical(catalog, scoring, zero_shot_eval, model_eval=folder)
    model = by_query(model_rows)
    names = [spec.key for spec in scoring[0]]
    reports: dict[str, ComparisonReport] = {}
    scored: dict[str, dict[str, dict[str, Any]]] = {}
    for name, rows in runs.rows.items():
        _write_system(FileSystems.join(folder, LEXICAL_FOLDER, name), rows, scoring[2])
        LOGGER.debug("%s:\n%s", name, format_table(aggregate(rows)))
        scored[name] = by_query(rows)
        reports[name] = compare_query_rows(name, scored[name], names, "model", model, names)
    fusion = None
    if HYBRID in scored and MODEL_HYBRID in scored:
        fusion = compare_query_rows(HYBRID, scored[HYBRID], names, MODEL_HYBRID, scored[MODEL_HYBRID], names)
    comparison = LexicalComparison(runs.analyzer, reports, runs.corpus_size, fusion, served=bool(bm25_index))
    with FileSystems.create(FileSystems.join(folder, LEXICAL_FILE)) as handle:
        handle.write(json.dumps(comparison.to_dict(), indent=2).encode("utf-8"))
    return comparison


__all__ = [
    "BM25",
    "HYBRID",
    "MODEL_HYBRID",
    "JudgedCatalog",
    "LexicalComparison",
    "LexicalRuns",
    "compare_with_lexical",
    "score_lexical",
    "wants_lexical",
]
