"""The evaluation stage: embed queries, search, join judgments, score, combine.

    queries --ReadQueries--> valid --EncodeQueries--> embeddings --SearchCorpus--> ranked lists
    judgments --ReadJudgments--> (query_id, {product_id: grade})
    ranked lists + judgments --CoGroupByKey--> ScoreQueries --> per-query metrics, run rows

Per-query metrics are combined on the driver (one small row per query) into
metrics.json, per_query.parquet and a printed table.
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
from apache_beam import pvalue
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics import Metrics
from apache_beam.ml.inference.base import PredictionResult, RunInference
from apache_beam.options.pipeline_options import PipelineOptions

from index_builder import ExactSearcher, Searcher, open_index
from model import Side
from pipelines.artifacts import (
    counter_value,
    local_output,
    localize,
    read_embeddings,
    read_parquet_table,
    read_stage_manifest,
    write_stage_manifest,
)
from pipelines.catalog_io import DEAD_LETTERS, METRICS_NAMESPACE, ValidateRecords, WriteDeadLetters
from pipelines.evaluation import (
    MetricSpec,
    RelevanceRule,
    aggregate,
    evaluate_query,
    format_table,
    parse_metrics,
    write_metrics,
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
        return int(read_stage_manifest(self.path, "madr-embeddings")["counts"]["products_embedded"])

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

    def __init__(self, spec: SearcherSpec, depth: int) -> None:
        self.spec = spec
        self.depth = depth
        self.searcher: Searcher | None = None
        self.searched = Metrics.counter(METRICS_NAMESPACE, "queries_searched")

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

    def __init__(self, spec: SearcherSpec, depth: int, batch_size: int) -> None:
        super().__init__()
        self.spec = spec
        self.depth = depth
        self.batch_size = batch_size

    def expand(self, embedded: beam.PCollection) -> beam.PCollection:
        return (
            embedded
            | beam.BatchElements(min_batch_size=1, max_batch_size=self.batch_size)
            | beam.ParDo(_SearchFn(self.spec, self.depth))
        )


class _ScoreQueryFn(beam.DoFn):
    RUN = "run"

    def __init__(self, metrics: Sequence[MetricSpec], rule: RelevanceRule) -> None:
        self.metrics = tuple(metrics)
        self.rule = rule
        self.unjudged = Metrics.counter(METRICS_NAMESPACE, "queries_without_judgments")
        self.scored = Metrics.counter(METRICS_NAMESPACE, "queries_scored")

    def process(self, joined: tuple[str, dict[str, list[Any]]]) -> Iterator[Any]:
        query_id, groups = joined
        # A judged query outside the evaluated split has no ranking: nothing to score.
        ranked = groups["ranked"][0] if groups["ranked"] else []
        for rank, (product_id, score) in enumerate(ranked, start=1):
            yield pvalue.TaggedOutput(
                self.RUN, {"query_id": query_id, "product_id": product_id, "rank": rank, "score": score}
            )
        judgments = {pid: grade for pairs in groups["judgments"] for pid, grade in pairs}
        if ranked and not judgments:
            self.unjudged.inc()
        elif ranked:
            self.scored.inc()
            values = evaluate_query([pid for pid, _ in ranked], judgments, self.metrics, self.rule)
            yield {"query_id": query_id, **values}


class ScoreQueries(beam.PTransform):
    """Join rankings with judgments by query_id -> {"per_query": metric rows, "run": run rows}."""

    def __init__(self, metrics: Sequence[MetricSpec], rule: RelevanceRule) -> None:
        super().__init__()
        self.metrics = metrics
        self.rule = rule

    def expand(self, inputs: dict[str, beam.PCollection]) -> dict[str, beam.PCollection]:
        judgments = inputs["judgments"] | "ByQuery" >> beam.Map(
            lambda j: (j["query_id"], [(j["product_id"], j["grade"])])
        )
        scored = (
            {"ranked": inputs["ranked"], "judgments": judgments}
            | beam.CoGroupByKey()
            | beam.ParDo(_ScoreQueryFn(self.metrics, self.rule)).with_outputs(
                _ScoreQueryFn.RUN, main="per_query"
            )
        )
        return {"per_query": scored.per_query, "run": scored[_ScoreQueryFn.RUN]}


def cap_cutoffs(metrics: Sequence[MetricSpec], corpus_size: int) -> tuple[MetricSpec, ...]:
    """Cutoffs deeper than the corpus become its size: recall@10000 over 3,000 products is recall@3000."""
    capped = (
        spec if spec.k is None or spec.k <= corpus_size else MetricSpec(spec.name, corpus_size)
        for spec in metrics
    )
    return tuple(dict.fromkeys(capped))


def _searcher_spec(opts: EvaluateOptions) -> SearcherSpec:
    path = opts.index if opts.searcher == "ann" else opts.embeddings
    if not path:
        flag = "--index" if opts.searcher == "ann" else "--embeddings"
        raise ValueError(f"--searcher {opts.searcher} needs {flag}")
    return SearcherSpec(opts.searcher, path)


def run_evaluate(options: PipelineOptions, rule: RelevanceRule | None = None) -> dict[str, Any]:
    """Run the evaluation pipeline and write metrics.json, per_query.parquet, run-*.parquet."""
    opts, model, output = (options.view_as(c) for c in (EvaluateOptions, ModelOptions, OutputOptions))
    require_options(opts, "queries", "judgments")
    require_options(model, "model")
    require_options(output, "output")
    rule = rule or RelevanceRule()
    metrics = parse_metrics(part for part in opts.metrics.split(",") if part.strip())
    spec = _searcher_spec(opts)
    corpus_size = spec.corpus_size()
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
    ranked = embedded | SearchCorpus(spec, depth, model.batch_size)
    judgments = (
        pipeline
        | "ReadJudgments" >> beam.io.ReadFromParquet(opts.judgments)
        | "ValidateJudgments" >> ValidateRecords("judgment", validate_judgment)
    )
    scored = {"ranked": ranked, "judgments": judgments.valid} | ScoreQueries(metrics, rule)
    names = [spec.key for spec in metrics]
    _ = scored["per_query"] | "WritePerQuery" >> beam.io.WriteToParquet(
        FileSystems.join(output.output, "per_query_rows"),
        schema=per_query_metrics_schema(names),
        file_name_suffix=".parquet",
        num_shards=1,
    )
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

    per_query = read_parquet_table(output.output, "per_query_rows").to_pylist()
    for path in [
        m.path
        for m in FileSystems.match([FileSystems.join(output.output, "per_query_rows*")])[0].metadata_list
    ]:
        FileSystems.delete([path])
    summary = aggregate(per_query)
    with local_output(output.output) as folder:  # write_metrics writes local files only
        write_metrics(folder, summary, per_query, rule)
    counts = {
        name: counter_value(result, name)
        for name in (
            "queries_read",
            "queries_dead_lettered",
            "queries_searched",
            "queries_scored",
            "queries_without_judgments",
            "judgments_read",
            "judgments_dead_lettered",
        )
    }
    write_stage_manifest(
        output.output,
        kind="madr-evaluation",
        info={
            "model_id": identity.model_id,
            "model_version": identity.model_version,
            "searcher": opts.searcher,
            "depth": depth,
            "split": split,
            "counts": counts,
        },
    )
    return {"summary": summary, "counts": counts, "table": format_table(summary)}
