"""The evaluation stage: embed queries, join their judgments, search and score, combine.

    queries --ReadQueries--> valid --EncodeQueries--> (query_id, embedding) --+
    judgments --ReadJudgments--> valid -----------------------------------JoinJudgments--> JudgedQuery
    JudgedQuery --SearchPartsAndScore (one per searcher)--> per system: per-query metrics, relevant ranks;
        the primary system's run tables

Judgments meet the small query embeddings before search. Each searcher is searched part by part, one
index shard or embeddings file a task (pipelines/evaluate/sharded.py), so a worker holds one shard, not
the catalog; with an index that carries BM25 the primary searcher's fused ranking, the one a server gets,
is what metrics.json reports, its dense and BM25 rankings beside it (pipelines/evaluate/systems.py). With
--compare_exact (the default when --searcher ann also has --embeddings) the joined queries are searched a
second time, exactly, and scored the same way, so one job reports how much recall the index loses.
Per-query rows are combined on the driver (pipelines/evaluate/report.py) into metrics.json,
per_query.parquet, recall_at_k.png and a printed table.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import apache_beam as beam
import pyarrow as pa
from apache_beam.io.filesystems import FileSystems
from apache_beam.ml.inference.base import RunInference
from apache_beam.options.pipeline_options import PipelineOptions

from evaluation import RelevanceRule, parse_metrics
from evaluation.cutoffs import CutoffPlan, plan_cutoffs
from model import Side
from pipelines.evaluate.annotation_quality import write_annotation_quality
from pipelines.evaluate.baselines import compare_with_baselines
from pipelines.evaluate.calibration import (
    CALIBRATION_QUERIES,
    Calibration,
    calibrate,
    first_queries,
)
from pipelines.evaluate.config import EvaluateConfig
from pipelines.evaluate.inputs import check_evaluation_inputs, require_scored
from pipelines.evaluate.report import (
    RELEVANT_RANKS_SCHEMA,
    SearcherRows,
    add_to_metrics,
    collect_rows,
    resolve_rule,
    write_report,
)
from pipelines.evaluate.searchers import SearcherSpec, corpus_size, searcher_specs
from pipelines.evaluate.sharded import SearchPartsAndScore
from pipelines.evaluate.systems import (
    SearcherSystems,
    bm25_index,
    corpus_parts,
    index_parts,
    ranking_record,
    searcher_systems,
    write_beside,
)
from pipelines.evaluate.transforms import JoinJudgments, WriteRun
from pipelines.index.manifest import format_serving, serving_schedule
from pipelines.inference import EncoderModelHandler, ModelIdentity, TextToEncode, load_text_encoder
from pipelines.io.catalog_io import DEAD_LETTERS, ValidateRecords, WriteDeadLetters
from pipelines.runner import make_pipeline
from pipelines.settings.options import EvaluateSettings, ModelSettings
from pipelines.settings.stage_config import (
    settings_record,
)
from pipelines.storage.stage_manifests import counter_value, write_stage_manifest
from pipelines.storage.staged_output import fresh_output
from pipelines.storage.verify import check_same_model, verified_stage_manifest, verify_model
from schemas import per_query_metrics_schema, validate_judgment, validate_query

LOGGER = logging.getLogger(__name__)


def _choose_searcher(
    opts: EvaluateSettings, model: ModelSettings, specs: dict[str, SearcherSpec], depth: int
) -> tuple[str, dict[str, SearcherSpec], Calibration | None]:
    """The primary searcher, the searchers to run (primary first) and --searcher auto's measurements."""
    if opts.searcher != "auto":
        return opts.searcher, specs, None
    sample = first_queries(opts.queries, opts.split, CALIBRATION_QUERIES)
    # Encoded as the pipeline encodes them (precision and runtime included): the same settings.
    vectors = load_text_encoder(model).encode(
        [query.text for query in sample], Side.QUERY, batch_size=model.batch_size
    )
    calibration = calibrate(specs["ann"], specs["exact"], vectors, depth)
    primary = calibration.choice
    other = "exact" if primary == "ann" else "ann"
    chosen = {primary: specs[primary]}
    if opts.compare_exact != "false":  # both are reported unless asked not to
        chosen[other] = specs[other]
    return primary, chosen, calibration


def _write_rows(rows: beam.PCollection, output: str, prefix: str, schema: pa.Schema) -> None:
    """Small per-query rows for the driver, in one temporary Parquet file (read back and deleted)."""
    _ = rows | f"Write-{prefix}" >> beam.io.WriteToParquet(
        FileSystems.join(output, prefix), schema=schema, file_name_suffix=".parquet", num_shards=1
    )


@dataclass(frozen=True)
class EvaluationPlan:
    """What `build_evaluate_pipeline` settled on the driver, which `evaluate_retrieval` reports after."""

    folder: str
    identity: ModelIdentity
    specs: dict[str, SearcherSpec]
    primary: str
    depth: int
    rule: RelevanceRule
    rule_source: str
    calibration: Calibration | None
    cutoffs: CutoffPlan
    split: str
    # Inputs of another model, evaluated anyway under --allow_model_mismatch (empty: none).
    model_mismatches: tuple[str, ...] = ()
    # What each searcher scored (the primary one first), and the index whose BM25 was fused (None: none).
    systems: tuple[SearcherSystems, ...] = ()
    bm25_index: str | None = None

    @property
    def primary_branch(self) -> str:
        """The branch metrics.json reports: the primary searcher's primary system."""
        return self.systems[0].branch(self.systems[0].primary)

    def branches(self) -> list[str]:
        return [chosen.branch(system) for chosen in self.systems for system in chosen.systems]


def build_evaluate_pipeline(
    config: EvaluateConfig,
    beam_options: PipelineOptions | None = None,
    rule: RelevanceRule | None = None,
    folder: str | None = None,
    check_inputs: bool = True,
) -> tuple[beam.Pipeline, EvaluationPlan]:
    """The evaluation pipeline, built but not run, and what was settled on the driver to build it.

    The driver's work happens here: inputs verified, the relevance rule and cut-offs resolved, and with
    --searcher auto the calibration (`_choose_searcher`). The pipeline writes into ``folder``, by
    default the config's output. A test translates it for another runner (tests/test_dataflow_translation.py).
    """
    opts, model = config.evaluate, config.model
    # Inputs are checked once, here, before any work; workers (and the annotation quality) trust it.
    # The index is checked by its own loader whenever it is opened.
    verify_model(model.model, config.verify)
    if opts.embeddings:
        verified_stage_manifest(opts.embeddings, "madr-embeddings", config.verify)
    # Vectors of another model rank nonsense without an error: refused unless explicitly allowed.
    allowed = opts.allow_model_mismatch == "true"
    mismatches = check_same_model(
        model.model,
        {"--index": opts.index, "--embeddings": opts.embeddings},
        allowed,
        opts.embeddings,
        override="--allow_model_mismatch",
    )
    if check_inputs:  # after the artifacts (cheap), before any search: an evaluation that would score nothing
        check_evaluation_inputs(opts)
    if rule is not None:
        rule_source = "the caller of evaluate_retrieval"
    else:
        rule, rule_source = resolve_rule(opts.judgments, opts.positive_min_grade)
    metrics = parse_metrics(part for part in opts.metrics.split(",") if part.strip())
    specs = searcher_specs(opts)
    size = corpus_size(specs)
    # A cut-off deeper than the search is dropped, never scored on a shorter ranking (see cutoffs.py).
    cutoffs = plan_cutoffs(metrics, opts.depth, size)
    if cutoffs.warning():
        LOGGER.warning("%s", cutoffs.warning())
    metrics, depth = cutoffs.metrics, cutoffs.depth
    primary, specs, calibration = _choose_searcher(opts, model, specs, depth)
    identity = ModelIdentity.of(model.model)
    handler = EncoderModelHandler(model, Side.QUERY)
    split = opts.split
    folder = folder or config.output

    pipeline = make_pipeline(beam_options or PipelineOptions([]))
    queries = (
        pipeline
        | "ReadQueries" >> beam.io.ReadFromParquet(opts.queries)
        | "ValidateQueries" >> ValidateRecords("query", validate_query)
    )
    in_split = queries.valid | "InSplit" >> beam.Filter(lambda q: q["split"] == split)
    embedded = (
        in_split
        | "ToText" >> beam.Map(lambda q: TextToEncode(q["query_id"], q["text"]))
        | "EncodeQueries" >> RunInference(handler)
    )
    judgments = (
        pipeline
        | "ReadJudgments" >> beam.io.ReadFromParquet(opts.judgments)
        | "ValidateJudgments" >> ValidateRecords("judgment", validate_judgment)
    )
    joined = {
        "embedded": embedded | "ByQueryId" >> beam.Map(lambda result: (result.example.key, result.inference)),
        "judgments": judgments.valid,
        "texts": in_split | "QueryTexts" >> beam.Map(lambda q: (q["query_id"], q["text"])),
    } | "JoinJudgments" >> JoinJudgments()
    names = [spec.key for spec in metrics]
    lexical_index = bm25_index(config)
    lexical = index_parts(lexical_index) if lexical_index else []
    chosen_systems = []
    for name, spec in specs.items():
        is_primary = name == primary
        chosen = searcher_systems(config, name, is_primary, bool(lexical))
        chosen_systems.append(chosen)
        suffix, label = ("", "") if is_primary else (f"_{name}", name.title())
        scored = joined | f"SearchAndScore{label}" >> SearchPartsAndScore(
            corpus_parts(spec),
            lexical if is_primary else (),
            chosen.systems,
            chosen.primary,
            depth,
            metrics,
            rule,
            model.batch_size,
            emit_run=is_primary,
            counter_suffix=suffix,
        )
        for system in chosen.systems:
            branch = chosen.branch(system)
            schema = per_query_metrics_schema(names)
            _write_rows(scored[f"per_query_{system}"], folder, f"tmp-{branch}-per_query", schema)
            _write_rows(scored[f"ranks_{system}"], folder, f"tmp-{branch}-ranks", RELEVANT_RANKS_SCHEMA)
        if is_primary:
            _ = scored["run"] | "WriteRun" >> WriteRun(FileSystems.join(folder, "run"))
    _ = (
        (queries[DEAD_LETTERS], judgments[DEAD_LETTERS])
        | beam.Flatten()
        | WriteDeadLetters(FileSystems.join(folder, "dead_letters"))
    )
    plan = EvaluationPlan(
        folder,
        identity,
        specs,
        primary,
        depth,
        rule,
        rule_source,
        calibration,
        cutoffs,
        split,
        tuple(mismatches),
        tuple(chosen_systems),
        lexical_index,
    )
    return pipeline, plan


def evaluate_retrieval(
    config: EvaluateConfig,
    beam_options: PipelineOptions | None = None,
    rule: RelevanceRule | None = None,
    check_inputs: bool = True,
) -> dict[str, Any]:
    """Run the evaluation pipeline; write metrics.json, per_query.parquet, recall_at_k.png, run-*.parquet.

    ``rule`` lets code fix the relevance rule (e.g. float gains); otherwise positive_min_grade comes from
    --positive_min_grade, else the dataset manifest next to --judgments, else 2. A non-empty output is
    refused unless `overwrite`; the files appear there only when the run succeeds
    (`staged_output.fresh_output`).
    The queries and judgments are checked after the model and artifacts (`check_evaluation_inputs`) unless
    the caller did (`check_inputs=False`: the nightly before embedding, a baseline on its main's files).
    """
    with fresh_output(config.output, config.overwrite) as folder:
        return _run_evaluate(config, beam_options, rule, folder, check_inputs)


def _run_evaluate(
    config: EvaluateConfig,
    beam_options: PipelineOptions | None,
    rule: RelevanceRule | None,
    folder: str,
    check_inputs: bool,
) -> dict[str, Any]:
    pipeline, plan = build_evaluate_pipeline(config, beam_options, rule, folder, check_inputs)
    folder, specs, primary, calibration = plan.folder, plan.specs, plan.primary, plan.calibration
    result = pipeline.run()
    result.wait_until_finish()
    require_scored(counter_value(result, "queries_scored"), counter_value(result, "judgments_not_in_catalog"))

    branches = {
        name: SearcherRows(
            collect_rows(folder, f"tmp-{name}-per_query"),
            collect_rows(folder, f"tmp-{name}-ranks"),
        )
        for name in plan.branches()
    }
    served = plan.primary_branch
    report = write_report(
        folder, branches, served, plan.depth, plan.rule, plan.rule_source, calibration, plan.cutoffs
    )
    beside = write_beside(folder, plan.systems[0], {n: b.per_query for n, b in branches.items()}, plan.rule)
    annotations = write_annotation_quality(config, folder)
    # The served ranking is compared with the baselines; a dense one, with exact search where it ran.
    side = served if served != primary else ("exact" if "exact" in branches else primary)
    baselines = compare_with_baselines(
        config,
        folder,
        branches[side].per_query,
        side,
        (plan.cutoffs.metrics, plan.depth, plan.rule),
        beam_options,
        lambda baseline: evaluate_retrieval(baseline, beam_options, plan.rule, check_inputs=False),
    )
    counted = [
        "queries_read",
        "queries_dead_lettered",
        "queries_searched",
        "queries_scored",
        "queries_without_judgments",
        "judgments_read",
        "judgments_dead_lettered",
        "judgments_not_in_catalog",
    ]
    first = plan.systems[0]
    others = [name for name in specs if name != primary] + [s for s in first.systems if s != first.primary]
    for name in others:
        counted += [f"queries_searched_{name}", f"queries_scored_{name}", f"queries_without_judgments_{name}"]
    counts = {name: counter_value(result, name) for name in counted}
    ranking = ranking_record(plan.systems[0], plan.bm25_index, beside)
    # metrics.json says which ranking it is, and that ranking against each baseline (paired t-tests).
    add_to_metrics(folder, {"ranking": ranking, "against": baselines.against()})
    # What a server searching this index sees at its serving depths, beside what this evaluation saw.
    serving = serving_schedule(specs["ann"].path) if "ann" in specs else []
    write_stage_manifest(
        folder,
        kind="madr-evaluation",
        info={
            "model_id": plan.identity.model_id,
            "model_version": plan.identity.model_version,
            **({"allowed_model_mismatches": list(plan.model_mismatches)} if plan.model_mismatches else {}),
            "searcher": primary,
            "ranking": ranking,
            "compare_exact": len(specs) > 1,
            **({"searcher_choice": calibration.to_dict()} if calibration else {}),
            "depth": plan.depth,
            "cutoffs": plan.cutoffs.to_dict(),
            "split": plan.split,
            "relevance_rule": plan.rule.to_dict(),
            "counts": counts,
            **({"annotation_quality": annotations.to_dict()} if annotations else {}),
            **{name: value for name, value in baselines.to_dict().items() if value},
            **({"index_serving": serving} if serving else {}),
            "settings": settings_record(config.model, config.evaluate, config.threshold),
        },
    )
    missing = counts["judgments_not_in_catalog"]
    if missing:
        LOGGER.warning(
            "%d judgments name products the searched catalog lacks: left out of the scores", missing
        )
    return {
        "summary": report.summary,
        "counts": counts,
        "table": report.table
        + (
            f"\n\n{missing} judgments name products the catalog lacks; left out of the scores"
            if missing
            else ""
        )
        + (f"\n\n{format_serving(serving)}" if serving else "")
        + baselines.tables()
        + (f"\n\n{annotations.table()}" if annotations else ""),
        **baselines.to_dict(),
        "annotation_quality": annotations.to_dict() if annotations else None,
        "ann_vs_exact": report.ann_vs_exact,
        "recall_at_k": report.recall_at_k,
        "searcher": primary,
        "searcher_choice": calibration.to_dict() if calibration else None,
        "cutoffs": plan.cutoffs.to_dict(),
        "index_serving": serving,
    }
