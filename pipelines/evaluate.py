"""The evaluation stage: embed queries, search, join judgments, score, combine.

    queries --ReadQueries--> valid --EncodeQueries--> embeddings --SearchCorpus--> ranked lists
    judgments --ReadJudgments--> (query_id, {product_id: grade})
    ranked lists + judgments --CoGroupByKey--> ScoreQueries --> per-query metrics, run rows, relevant ranks

With --compare_exact (the default when --searcher ann also has --embeddings) the query embeddings are
searched a second time, exactly, and scored the same way, so one job reports how much recall the index
loses. Per-query rows are combined on the driver (pipelines/evaluation_report.py) into metrics.json,
per_query.parquet, recall_at_k.png and a printed table.
"""

from __future__ import annotations

import json
import logging
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import apache_beam as beam
import numpy as np
import pyarrow as pa
from apache_beam import pvalue
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics import Metrics
from apache_beam.ml.inference.base import PredictionResult, RunInference
from apache_beam.options.pipeline_options import PipelineOptions

from index_builder import ExactSearcher, Searcher, open_index
from model import Side
from pipelines.artifacts import (
    counter_value,
    localize,
    read_embeddings,
    read_stage_manifest,
    write_stage_manifest,
)
from pipelines.catalog_io import DEAD_LETTERS, METRICS_NAMESPACE, ValidateRecords, WriteDeadLetters
from pipelines.evaluation import MetricSpec, RelevanceRule, evaluate_query, parse_metrics
from pipelines.evaluation_report import (
    RELEVANT_RANKS_SCHEMA,
    SearcherRows,
    collect_rows,
    resolve_rule,
    write_report,
)
from pipelines.inference import EncoderModelHandler, ModelIdentity, TextToEncode
from pipelines.options import EvaluateOptions, ModelOptions, OutputOptions
from pipelines.runner import make_pipeline, require_options
from schemas import RUN_SCHEMA, per_query_metrics_schema, validate_judgment, validate_query

LOGGER = logging.getLogger(__name__)


@dataclass(frozen=True)
class SearcherSpec:
    """How a worker opens its searcher: picklable, and the searcher itself is built in `setup`."""

    kind: str
    path: str

    def corpus_size(self) -> int:
        """How many products the searcher holds, from its manifest (without loading it).

        Single and partitioned index manifests (`index_builder.open_index`) both call the total "count".
        """
        if self.kind == "ann":
            with FileSystems.open(FileSystems.join(self.path, "manifest.json")) as handle:
                return int(json.loads(handle.read())["count"])
        # An incremental embed output also holds the rows it reused from the previous run.
        counts = read_stage_manifest(self.path, "madr-embeddings")["counts"]
        return int(counts["products_embedded"]) + int(counts.get("products_reused", 0))

    def open(self) -> Searcher:
        if self.kind == "ann":
            # ScaNN loads only local folders: a gs:// index is copied to a temporary folder first.
            # The loaded searcher holds everything in memory, so the copy can go right after.
            with tempfile.TemporaryDirectory(prefix="madr-index-") as local_dir:
                return open_index(localize(self.path, local_dir))
        ids, matrix, _ = read_embeddings(self.path)
        return ExactSearcher(matrix, ids)


class _SearchFn(beam.DoFn):
    """Batches of query embeddings -> (query_id, [(product_id, score), ...]), searcher loaded once."""

    def __init__(self, spec: SearcherSpec, depth: int, counter_suffix: str = "") -> None:
        self.spec = spec
        self.depth = depth
        self.searcher: Searcher | None = None
        self.searched = Metrics.counter(METRICS_NAMESPACE, "queries_searched" + counter_suffix)

    def setup(self) -> None:
        self.searcher = self.spec.open()

    def process(self, batch: Sequence[PredictionResult]) -> Iterator[tuple[str, list[tuple[str, float]]]]:
        queries = np.stack([result.inference for result in batch]).astype(np.float32)
        found = self.searcher.search(queries, min(self.depth, self.searcher.size))
        for row, result in enumerate(batch):
            self.searched.inc()
            yield result.example.key, list(zip(found.ids[row], found.scores[row].tolist(), strict=True))


class SearchCorpus(beam.PTransform):
    """Query embeddings (PredictionResult) -> (query_id, ranked [(product_id, score)])."""

    def __init__(self, spec: SearcherSpec, depth: int, batch_size: int, counter_suffix: str = "") -> None:
        super().__init__()
        self.spec = spec
        self.depth = depth
        self.batch_size = batch_size
        self.counter_suffix = counter_suffix  # a second searcher in the same job counts separately

    def expand(self, embedded: beam.PCollection) -> beam.PCollection:
        return (
            embedded
            | beam.BatchElements(min_batch_size=1, max_batch_size=self.batch_size)
            | beam.ParDo(_SearchFn(self.spec, self.depth, self.counter_suffix))
        )


class _ScoreQueryFn(beam.DoFn):
    RUN = "run"
    RANKS = "relevant_ranks"

    def __init__(
        self, metrics: Sequence[MetricSpec], rule: RelevanceRule, emit_run: bool, counter_suffix: str
    ) -> None:
        self.metrics = tuple(metrics)
        self.rule = rule
        self.emit_run = emit_run
        self.unjudged = Metrics.counter(METRICS_NAMESPACE, "queries_without_judgments" + counter_suffix)
        self.scored = Metrics.counter(METRICS_NAMESPACE, "queries_scored" + counter_suffix)

    def process(self, joined: tuple[str, dict[str, list[Any]]]) -> Iterator[Any]:
        query_id, groups = joined
        # A judged query outside the evaluated split has no ranking: nothing to score.
        ranked = groups["ranked"][0] if groups["ranked"] else []
        if self.emit_run:
            for rank, (product_id, score) in enumerate(ranked, start=1):
                yield pvalue.TaggedOutput(
                    self.RUN, {"query_id": query_id, "product_id": product_id, "rank": rank, "score": score}
                )
        judgments = {pid: grade for pairs in groups["judgments"] for pid, grade in pairs}
        if ranked and not judgments:
            self.unjudged.inc()
        elif ranked:
            self.scored.inc()
            ranked_ids = [pid for pid, _ in ranked]
            values = evaluate_query(ranked_ids, judgments, self.metrics, self.rule)
            yield {"query_id": query_id, **values}
            # Ranks of the relevant judged products found: enough for recall at any k (the recall@k plot).
            relevant = {pid for pid, grade in judgments.items() if self.rule.is_positive(grade)}
            ranks = [rank for rank, pid in enumerate(ranked_ids, start=1) if pid in relevant]
            yield pvalue.TaggedOutput(
                self.RANKS, {"query_id": query_id, "num_relevant": len(relevant), "ranks": ranks}
            )


class ScoreQueries(beam.PTransform):
    """Join rankings with judgments by query_id -> {"per_query", "run", "relevant_ranks"} rows.

    ``emit_run=False`` skips the run rows (depth rows per query) for a searcher whose run is not kept.
    """

    def __init__(
        self,
        metrics: Sequence[MetricSpec],
        rule: RelevanceRule,
        emit_run: bool = True,
        counter_suffix: str = "",
    ) -> None:
        super().__init__()
        self.metrics = metrics
        self.rule = rule
        self.emit_run = emit_run
        self.counter_suffix = counter_suffix

    def expand(self, inputs: dict[str, beam.PCollection]) -> dict[str, beam.PCollection]:
        judgments = inputs["judgments"] | "ByQuery" >> beam.Map(
            lambda j: (j["query_id"], [(j["product_id"], j["grade"])])
        )
        scored = (
            {"ranked": inputs["ranked"], "judgments": judgments}
            | beam.CoGroupByKey()
            | beam.ParDo(
                _ScoreQueryFn(self.metrics, self.rule, self.emit_run, self.counter_suffix)
            ).with_outputs(_ScoreQueryFn.RUN, _ScoreQueryFn.RANKS, main="per_query")
        )
        return {
            "per_query": scored.per_query,
            "run": scored[_ScoreQueryFn.RUN],
            "relevant_ranks": scored[_ScoreQueryFn.RANKS],
        }


def cap_cutoffs(metrics: Sequence[MetricSpec], corpus_size: int) -> tuple[MetricSpec, ...]:
    """Cutoffs deeper than the corpus become its size: recall@10000 over 3,000 products is recall@3000."""
    capped = (
        spec if spec.k is None or spec.k <= corpus_size else MetricSpec(spec.name, corpus_size)
        for spec in metrics
    )
    return tuple(dict.fromkeys(capped))


def _searcher_specs(opts: EvaluateOptions) -> dict[str, SearcherSpec]:
    """The searchers to run: --searcher first, then "exact" when comparing the index against exact search.

    The comparison is on by default whenever it is possible (--searcher ann with --embeddings too), so every
    report of an index says what the index costs in recall.
    """
    path = opts.index if opts.searcher == "ann" else opts.embeddings
    if not path:
        flag = "--index" if opts.searcher == "ann" else "--embeddings"
        raise ValueError(f"--searcher {opts.searcher} needs {flag}")
    specs = {opts.searcher: SearcherSpec(opts.searcher, path)}
    possible = opts.searcher == "ann" and bool(opts.embeddings)
    if (opts.compare_exact is None and not possible) or opts.compare_exact == "false":
        return specs
    if not possible:
        raise ValueError("--compare_exact needs --searcher ann with both --index and --embeddings")
    specs["exact"] = SearcherSpec("exact", opts.embeddings)
    return specs


def _corpus_size(specs: dict[str, SearcherSpec]) -> int:
    sizes = {name: spec.corpus_size() for name, spec in specs.items()}
    if len(set(sizes.values())) > 1:
        raise ValueError(
            f"--compare_exact: the index holds {sizes['ann']} products but --embeddings {sizes['exact']}; "
            "compare an index with the embeddings it was built from (or pass --compare_exact false)"
        )
    return next(iter(sizes.values()))


def _write_rows(rows: beam.PCollection, output: str, prefix: str, schema: pa.Schema) -> None:
    """Small per-query rows for the driver, in one temporary Parquet file (read back and deleted)."""
    _ = rows | f"Write-{prefix}" >> beam.io.WriteToParquet(
        FileSystems.join(output, prefix), schema=schema, file_name_suffix=".parquet", num_shards=1
    )


def run_evaluate(options: PipelineOptions, rule: RelevanceRule | None = None) -> dict[str, Any]:
    """Run the evaluation pipeline; write metrics.json, per_query.parquet, recall_at_k.png, run-*.parquet.

    ``rule`` lets code fix the relevance rule (e.g. float gains); otherwise positive_min_grade comes from
    --positive_min_grade, else the dataset manifest next to --judgments, else 2.
    """
    opts, model, output = (options.view_as(c) for c in (EvaluateOptions, ModelOptions, OutputOptions))
    require_options(opts, "queries", "judgments")
    require_options(model, "model")
    require_options(output, "output")
    if rule is not None:
        rule_source = "the caller of run_evaluate"
    else:
        rule, rule_source = resolve_rule(opts.judgments, opts.positive_min_grade)
    metrics = parse_metrics(part for part in opts.metrics.split(",") if part.strip())
    specs = _searcher_specs(opts)
    corpus_size = _corpus_size(specs)
    metrics = cap_cutoffs(metrics, corpus_size)
    depth = min(opts.depth, corpus_size)
    identity = ModelIdentity.of(model.model)
    handler = EncoderModelHandler(model.model, Side.QUERY, model.batch_size, model.chunk_size, model.device)
    split = opts.split

    pipeline = make_pipeline(options)
    queries = (
        pipeline
        | "ReadQueries" >> beam.io.ReadFromParquet(opts.queries)
        | "ValidateQueries" >> ValidateRecords("query", validate_query)
    )
    embedded = (
        queries.valid
        | "InSplit" >> beam.Filter(lambda q: q["split"] == split)
        | "ToText" >> beam.Map(lambda q: TextToEncode(q["query_id"], q["text"]))
        | "EncodeQueries" >> RunInference(handler)
    )
    judgments = (
        pipeline
        | "ReadJudgments" >> beam.io.ReadFromParquet(opts.judgments)
        | "ValidateJudgments" >> ValidateRecords("judgment", validate_judgment)
    )
    names = [spec.key for spec in metrics]
    for name, spec in specs.items():
        primary = name == opts.searcher
        suffix, label = ("", "") if primary else (f"_{name}", name.title())
        ranked = embedded | f"SearchCorpus{label}" >> SearchCorpus(spec, depth, model.batch_size, suffix)
        scored = {"ranked": ranked, "judgments": judgments.valid} | f"ScoreQueries{label}" >> ScoreQueries(
            metrics, rule, emit_run=primary, counter_suffix=suffix
        )
        _write_rows(
            scored["per_query"], output.output, f"tmp-{name}-per_query", per_query_metrics_schema(names)
        )
        _write_rows(scored["relevant_ranks"], output.output, f"tmp-{name}-ranks", RELEVANT_RANKS_SCHEMA)
        if primary:
            _ = scored["run"] | "WriteRun" >> beam.io.WriteToParquet(
                FileSystems.join(output.output, "run"),
                schema=RUN_SCHEMA,
                shard_name_template="-SSSSS-of-NNNNN",
                file_name_suffix=".parquet",
                codec="snappy",
            )
    _ = (
        (queries[DEAD_LETTERS], judgments[DEAD_LETTERS])
        | beam.Flatten()
        | WriteDeadLetters(FileSystems.join(output.output, "dead_letters"))
    )
    result = pipeline.run()
    result.wait_until_finish()

    branches = {
        name: SearcherRows(
            collect_rows(output.output, f"tmp-{name}-per_query"),
            collect_rows(output.output, f"tmp-{name}-ranks"),
        )
        for name in specs
    }
    report = write_report(output.output, branches, opts.searcher, depth, rule, rule_source)
    counted = [
        "queries_read",
        "queries_dead_lettered",
        "queries_searched",
        "queries_scored",
        "queries_without_judgments",
        "judgments_read",
        "judgments_dead_lettered",
    ]
    if "exact" in specs and opts.searcher != "exact":
        counted += ["queries_searched_exact", "queries_scored_exact", "queries_without_judgments_exact"]
    counts = {name: counter_value(result, name) for name in counted}
    write_stage_manifest(
        output.output,
        kind="madr-evaluation",
        info={
            "model_id": identity.model_id,
            "model_version": identity.model_version,
            "searcher": opts.searcher,
            "compare_exact": len(specs) > 1,
            "depth": depth,
            "split": split,
            "relevance_rule": rule.to_dict(),
            "counts": counts,
        },
    )
    return {
        "summary": report.summary,
        "counts": counts,
        "table": report.table,
        "ann_vs_exact": report.ann_vs_exact,
        "recall_at_k": report.recall_at_k,
    }
