"""Retrieval through UHD-BERT's inverted index (uhd-bert §3.7, §4.3): recall, index size and query time.

`madr experiment` evaluates the dense variants with the Beam evaluate stage over a ScaNN index. A model
with sparse buckets (UHD) is retrieved the way its paper does, through inverted indexes, here:

- ``binary``: binarized documents and queries (§3.4, §3.7); the score counts shared winners. The
  paper's latency figures (Table 3) are for this index.
- ``weighted``: postings and queries keep their bucket values, so the score is Eq. 7 itself, the
  "original" that §4.3 compares binarization with (MRR@10 30.04 vs 30.03).

Both are built from one encoding of the catalog (`build_inverted_indexes`). Recall and the other
metrics come from the code every variant's evaluation uses (`score_query` -> `evaluate_ranks`), so
they mean the same thing. Beside them: the index's size on disk (every file of its directory) and
the mean time per query, split into encoding (queries encoded in batches, as the Beam stage does)
and search (one query per call: the latency of a single incoming query, Table 3's unit, ms/query).

The ranking task (each test query re-ranks its judged products, madral-kdd22 §8.3) is scored from the
weighted index's full ranking (`sparse_ranking_rows`): Eq. 7 on real values ranks exactly as the
dense `embedding` does for every other variant (it is Rel / B), without B·n-wide product vectors.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from transformers import PreTrainedTokenizerBase

from evaluation import MetricSpec, RelevanceRule, aggregate, evaluate_query, parse_metrics
from evaluation.ranked import CorpusIds, score_query
from index_builder import InvertedIndex
from model import DenseEncoder, load_config, load_encoder, variant_class
from pipelines.evaluate.judged_ranking import RANKING_METRICS
from pipelines.evaluate.report import resolve_rule
from pipelines.index.sparse import build_inverted_indexes, sparse_queries
from pipelines.layout import DatasetLayout
from pipelines.storage.stage_manifests import write_stage_manifest
from pipelines.storage.verify import check_same_model
from schemas import RETRIEVAL_DEPTH
from schemas.manifest import MANIFEST_FILE

SPARSE_INDEXES: dict[str, bool] = {"binary": True, "weighted": False}  # name -> binarized documents
PRIMARY = "binary"  # its per-query rows are the variant's retrieval rows (what the paper deploys, §4.3)
RESULTS_FILE = "sparse_indexes.json"
MS = 1000.0


def is_sparse_model(model_dir: str | Path) -> bool:
    """Whether a saved model has sparse buckets to index (decided by capability, as `require_sparse` does)."""
    return callable(getattr(variant_class(load_config(model_dir).variant), "sparse_buckets", None))


def directory_bytes(directory: str | Path) -> int:
    """Bytes on disk of every file under ``directory``: the index's size, manifest and ids included."""
    return sum(path.stat().st_size for path in Path(directory).rglob("*") if path.is_file())


@dataclass(frozen=True)
class SparseIndexResult:
    """One index's evaluation: per-query metric rows and what the index costs."""

    name: str
    binary: bool
    per_query: list[dict[str, Any]]
    size_bytes: int
    postings: int
    products: int
    encode_ms: float  # mean query encoding time per query (batched)
    query_ms: float  # mean search time per query, one query per call

    def summary(self) -> dict[str, Any]:
        """Means over the queries where each metric is defined, with the index's size and times."""
        means = {key: mean.mean for key, mean in aggregate(self.per_query).items()}
        fields = {key: value for key, value in asdict(self).items() if key != "per_query"}
        return {**fields, "queries": len(self.per_query), "means": means}


def search_and_score(
    index: InvertedIndex,
    query_ids: Sequence[str],
    vectors: Sequence[Any],
    judgments: Mapping[str, Mapping[str, int]],
    metrics: Sequence[MetricSpec],
    rule: RelevanceRule,
    depth: int,
) -> tuple[list[dict[str, Any]], float]:
    """Search each query alone to ``depth``; its metric row if it is judged, and the mean search seconds.

    ``vectors[i]`` is query i's buckets, as `InvertedIndex.search` reads them. Unjudged queries are
    searched (and timed) but not scored, as in the Beam evaluation.
    """
    corpus = CorpusIds(index.ids)
    rows, seconds = [], 0.0
    for query_id, vector in zip(query_ids, vectors, strict=True):
        started = time.perf_counter()
        found = index.search([vector], min(depth, index.size))
        seconds += time.perf_counter() - started
        if judgments.get(query_id):
            per_query, _ = score_query(query_id, found.indices[0], judgments[query_id], corpus, metrics, rule)
            rows.append(per_query)
    return rows, seconds / max(1, len(query_ids))


def evaluate_sparse_index(
    name: str,
    index_dir: str | Path,
    encoder: DenseEncoder,
    tokenizer: PreTrainedTokenizerBase,
    queries: Sequence[tuple[str, str]],
    judgments: Mapping[str, Mapping[str, int]],
    metrics: Sequence[MetricSpec],
    rule: RelevanceRule,
    depth: int = RETRIEVAL_DEPTH,  # as deep as the Beam evaluation searches
) -> SparseIndexResult:
    """Encode (query_id, text) pairs as the index expects (binary or weighted) and score its rankings."""
    index = InvertedIndex.load(index_dir)
    started = time.perf_counter()
    vectors = sparse_queries(encoder, tokenizer, [text for _, text in queries], binary=index.binary)
    encode_seconds = (time.perf_counter() - started) / max(1, len(queries))
    query_ids = [query_id for query_id, _ in queries]
    rows, search_seconds = search_and_score(index, query_ids, vectors, judgments, metrics, rule, depth)
    return SparseIndexResult(
        name=name,
        binary=index.binary,
        per_query=rows,
        size_bytes=directory_bytes(index_dir),
        postings=index.nnz,
        products=index.size,
        encode_ms=round(encode_seconds * MS, 3),
        query_ms=round(search_seconds * MS, 3),
    )


def rerank_by_index(
    index: InvertedIndex,
    query_ids: Sequence[str],
    vectors: Sequence[Any],
    judgments: Mapping[str, Mapping[str, int]],
    rule: RelevanceRule,
) -> list[dict[str, float]]:
    """The ranking task: each judged query's judged products in the order of its full-corpus ranking.

    Ties keep the index's order (lower corpus row first); judged products the index lacks are left
    out, as `rerank_judged` leaves out products without an embedding.
    """
    specs = parse_metrics(RANKING_METRICS)
    indexed = set(index.ids)
    rows = []
    for query_id, vector in sorted(zip(query_ids, vectors, strict=True), key=lambda pair: pair[0]):
        judged = {pid: grade for pid, grade in judgments.get(query_id, {}).items() if pid in indexed}
        if not judged:
            continue
        ranking = [pid for pid in index.search([vector], index.size).ids[0] if pid in judged]
        rows.append({"query_id": query_id, **evaluate_query(ranking, judged, specs, rule)})
    return rows


def sparse_ranking_rows(
    folder: str | Path,
    encoder: DenseEncoder,
    tokenizer: PreTrainedTokenizerBase,
    queries: Sequence[tuple[str, str]],
    judgments: Mapping[str, Mapping[str, int]],
    rule: RelevanceRule,
) -> list[dict[str, float]]:
    """The ranking task of (query_id, text) pairs, through the weighted index under ``folder``."""
    index = InvertedIndex.load(Path(folder) / "index-weighted")
    vectors = sparse_queries(encoder, tokenizer, [text for _, text in queries], binary=False)
    return rerank_by_index(index, [query_id for query_id, _ in queries], vectors, judgments, rule)


def _split_queries(data: DatasetLayout, split: str) -> list[tuple[str, str]]:
    rows = pq.read_table(data.queries, columns=["query_id", "text", "split"]).to_pylist()
    return [(q["query_id"], q["text"]) for q in rows if q["split"] == split]


def _judgments(data: DatasetLayout) -> dict[str, dict[str, int]]:
    judgments: dict[str, dict[str, int]] = {}
    for row in pq.read_table(data.judgments).to_pylist():
        judgments.setdefault(row["query_id"], {})[row["product_id"]] = row["grade"]
    return judgments


def _build_missing(model_dir: str | Path, data: DatasetLayout, folder: Path, batch_size: int) -> float:
    """Build the indexes not finished yet (a folder without manifest is a crash's leftover); seconds."""
    missing = []
    for name, binary in SPARSE_INDEXES.items():
        target = folder / f"index-{name}"
        if not (target / MANIFEST_FILE).is_file():
            shutil.rmtree(target, ignore_errors=True)
            missing.append((target, binary))
    started = time.perf_counter()
    if missing:
        # Checkpoints: a long build stopped part-way resumes from its finished chunks when run again.
        checkpoints = folder / "encoding-checkpoints"
        build_inverted_indexes(model_dir, data.products, missing, batch_size, checkpoints=checkpoints)
    return time.perf_counter() - started


def run_sparse_evaluation(
    data: DatasetLayout,
    model_dir: str | Path,
    folder: str | Path,
    metric_names: Sequence[str],
    split: str = "test",
    batch_size: int = 64,
) -> dict[str, Any]:
    """Build the binarized and weighted indexes under ``folder``, evaluate both, write the results.

    Writes ``index-binary/`` and ``index-weighted/``, ``per_query.parquet`` (the binarized index's rows:
    the variant's retrieval rows), ``per_query_weighted.parquet``, `RESULTS_FILE` (each index's means,
    size and times) and, last, the manifest. Returns what `RESULTS_FILE` holds.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    build_seconds = _build_missing(model_dir, data, folder, batch_size)
    # An index left in the folder by another model would be scored as this one's.
    check_same_model(
        str(model_dir), {f"index-{name}": str(folder / f"index-{name}") for name in SPARSE_INDEXES}
    )
    rule, rule_source = resolve_rule(data.judgments, None)  # the Beam evaluation's rule, for comparability
    encoder, tokenizer = load_encoder(model_dir)
    queries, judgments = _split_queries(data, split), _judgments(data)
    metrics = parse_metrics(metric_names)  # a cut-off past the corpus ranks all of it (evaluation/cutoffs.py)
    results = {}
    for name in SPARSE_INDEXES:
        result = evaluate_sparse_index(
            name, folder / f"index-{name}", encoder, tokenizer, queries, judgments, metrics, rule
        )
        suffix = "" if name == PRIMARY else f"_{name}"
        pq.write_table(pa.Table.from_pylist(result.per_query), folder / f"per_query{suffix}.parquet")
        results[name] = result.summary()
    report = {"indexes": results, "build_seconds": round(build_seconds, 1), "primary": PRIMARY}
    (folder / RESULTS_FILE).write_text(json.dumps(report, indent=2, default=float) + "\n")
    write_stage_manifest(
        str(folder),
        kind="madr-evaluation",
        info={"searcher": "inverted", "split": split, "relevance_rule": rule.to_dict(), "rule": rule_source},
    )
    return report


def read_sparse_results(folder: str | Path) -> dict[str, Any] | None:
    """The `RESULTS_FILE` that `run_sparse_evaluation` wrote in ``folder``; None where it did not run."""
    path = Path(folder) / RESULTS_FILE
    return json.loads(path.read_text()) if path.is_file() else None
