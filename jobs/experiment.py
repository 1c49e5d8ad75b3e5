"""`madr experiment`: train and evaluate a list of variants under one budget, then compare them.

Every variant gets the same data, steps, batch size and truncation; each runs
through the production path (train -> Beam embed -> index -> Beam evaluate), and
the ranking task and aspect Accuracy@1 are computed on the driver. A variant with
sparse buckets (UHD-BERT) is retrieved through its inverted indexes instead,
binarized and weighted (uhd-bert §3.7), which also report their size on disk and
time per query (`pipelines.evaluate.sparse`). A finished
stage (its manifest exists) is not run again, so an interrupted experiment resumes.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from evaluation import RelevanceRule, parse_metrics
from evaluation.experiment_report import COLUMNS, write_report
from evaluation.experiment_stats import pool_seeds, power_analysis, summarise

# The config lives in its own module; these names stay importable from here.
from jobs.experiment_config import (  # noqa: F401
    DEFAULT_VARIANTS,
    PROFILES,
    ExperimentConfig,
)
from model.registry import ZERO_SHOT, experiment_role
from pipelines.embed.stage import EmbedConfig, embed_catalog
from pipelines.evaluate.config import EvaluateConfig
from pipelines.evaluate.lexical import JudgedCatalog, score_lexical
from pipelines.evaluate.sparse import (
    is_sparse_model,
    read_sparse_results,
    run_sparse_evaluation,
)
from pipelines.evaluate.stage import evaluate_retrieval
from pipelines.evaluate.variant_metrics import unseen_products, variant_metrics
from pipelines.experiment.pretraining import PretrainingPlan, pretrained_model
from pipelines.experiment.runs import RunArchive
from pipelines.experiment.variant import embeddings_source, variant_training
from pipelines.index.config import IndexBuildConfig
from pipelines.index.partitioned import build_partitioned
from pipelines.layout import DatasetLayout
from pipelines.progress import ProgressLog
from pipelines.settings.options import EmbedSettings, EvaluateSettings, ModelSettings
from pipelines.stage_runs import StageRunner
from pipelines.train.finetune import TrainJob, run_training
from pipelines.train.pretrain import pretrain_in_bf16
from pipelines.zero_shot import zero_shot_model
from product_data.synthetic import generate_benchmark

RETRIEVAL_METRICS = ("recall@100", "recall@500", "recall@10000")


def _dataset(config: ExperimentConfig, root: Path) -> DatasetLayout:
    data = DatasetLayout(str(root / "data"))
    if not (root / "data" / "manifest.json").is_file():
        generate_benchmark(config.benchmark(), data.root)
    return data


def _run_variant(
    config: ExperimentConfig, variant: str, data: DatasetLayout, folder: Path, stages: StageRunner
) -> None:
    """Train, embed, index, evaluate one variant through `stages`, which skips the finished ones."""

    role = experiment_role(variant)
    if not role.trained:
        # Nothing to train: the cached zero-shot model directory, copied in with its manifest.
        stages.run(
            "zero-shot model",
            lambda: shutil.copytree(zero_shot_model(32, config.max_document_length), folder / "model"),
            folder / "model",
        )
        _embed_index_evaluate(folder, data, stages)
        return
    training = variant_training(config, variant)
    options = training.model["variant_options"]
    source = embeddings_source(training, folder.parent)
    if source is not None:
        options = (("word_embeddings_from", str(source)),)
    plan = PretrainingPlan(
        steps=config.pretrain_steps,
        aspect_weight=config.pretrain_aspect_weight,
        held_out=config.held_out_rule(),
        bf16=pretrain_in_bf16(config.pretrain_precision),
        aspect_sides=config.aspect_sides,
        annotated_share=config.annotated_share,
    )
    # Only for a model still to train: skipped, like the train stage, once its manifest exists.
    init_from = dataclasses.replace(stages, report=None).run(
        "pretrain",
        lambda: pretrained_model(training, plan, data, folder.parent, config.seed),
        folder / "model",
    )
    job = TrainJob(
        dataset=data.root,
        output=str(folder / "model"),
        variant=variant,
        **{**training.model, "variant_options": options},
        init_from=str(init_from) if init_from else None,
    )
    loop = training.loop
    stages.run("train", lambda: run_training(job, loop), folder / "model")
    if is_sparse_model(job.output):
        # UHD-BERT retrieves through inverted indexes (uhd-bert §3.7); a B·n-wide dense embed and a
        # ScaNN index of it would be neither the paper's retrieval nor affordable.
        stages.run(
            "sparse index + evaluate",
            lambda: run_sparse_evaluation(data, job.output, folder / "eval", RETRIEVAL_METRICS),
            folder / "eval",
        )
        return
    _embed_index_evaluate(folder, data, stages)


def _embed_index_evaluate(folder: Path, data: DatasetLayout, stages: StageRunner) -> None:
    model = ModelSettings(str(folder / "model"))
    embed = EmbedConfig(model=model, embed=EmbedSettings(data.products), output=str(folder / "embeddings"))
    stages.run("embed", lambda: embed_catalog(embed), folder / "embeddings")
    stages.run(
        "index",
        lambda: build_partitioned(
            IndexBuildConfig(embeddings=str(folder / "embeddings"), output=str(folder / "index"))
        ),
        folder / "index",
    )
    settings = EvaluateSettings(
        queries=data.queries,
        judgments=data.judgments,
        index=str(folder / "index"),
        metrics=",".join(RETRIEVAL_METRICS),
    )
    evaluate = EvaluateConfig(model=model, evaluate=settings, output=str(folder / "eval"))
    stages.run("evaluate", lambda: evaluate_retrieval(evaluate), folder / "eval")


def _run_result(
    data: DatasetLayout, folder: Path, rule: RelevanceRule, held_out: list[dict[str, Any]], timings: dict
) -> dict[str, Any]:
    """One trained run's per-query metrics (the pipeline's and the driver's), accuracies and timings."""
    per_query = {
        row["query_id"]: row for row in pq.read_table(folder / "eval" / "per_query.parquet").to_pylist()
    }
    driver = variant_metrics(data, folder, rule, held_out)
    # The ranking task's rows join the per-query metrics; kept once there (a run's archived size).
    for row in driver.pop("ranking_rows"):
        per_query.setdefault(row["query_id"], {"query_id": row["query_id"]}).update(row)
    result = {"per_query": per_query, "timings": timings, **driver}
    sparse = read_sparse_results(folder / "eval")
    if sparse is not None:
        result["sparse_indexes"] = sparse["indexes"]
    return result


def _lexical_results(data: DatasetLayout, zero_shot_eval: Path, rule: RelevanceRule) -> dict[str, Any]:
    """BM25 and BM25 fused with the zero-shot run (`pipelines.evaluate.lexical`) as rows of the table:
    retrieval recall only (the ranking task's NDCG and AUC re-rank judged products with a model)."""
    metrics = parse_metrics(RETRIEVAL_METRICS)
    depth = max(spec.k or 0 for spec in metrics)
    catalog = JudgedCatalog(data.products, data.queries, data.judgments)
    # A zero-shot run read from the run archive left no run file here: BM25 alone then.
    found = zero_shot_eval if zero_shot_eval.is_dir() else None
    runs = score_lexical(catalog, (metrics, depth, rule), str(found) if found else None)
    print(f"   {runs.analyzer} over {runs.corpus_size:,} products: {', '.join(runs.rows)}", flush=True)
    return {
        name: {
            "per_query": {row["query_id"]: row for row in rows},
            "timings": {},
            "query_accuracy": None,
            "product_accuracy": None,
            "seeds": 1,
        }
        for name, rows in runs.rows.items()
    }


def run_experiment(config: ExperimentConfig, out: str) -> dict[str, Any]:
    root = Path(out)
    root.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    data = _dataset(config, root)
    rule = RelevanceRule()
    held_out = unseen_products(data, config.held_out_rule())  # the same for every variant
    archive = RunArchive.open(config.run_archive, config, data) if config.run_archive else None
    results: dict[str, Any] = {}
    # The zero-shot backbone is not trained: one run, whatever the seeds.
    seeds = {
        variant: range(config.seed, config.seed + (config.seeds if experiment_role(variant).trained else 1))
        for variant in config.variants
    }
    # The pace and ETA count the runs made here: runs read from the archive take no time.
    to_run = [
        (v, s) for v in config.variants for s in seeds[v] if not (archive and archive.path(v, s).is_file())
    ]
    progress = ProgressLog("runs done", len(to_run), interval_s=0, log=print)
    kept_runs = sum(len(seeds[v]) for v in config.variants) - len(to_run)
    if archive and kept_runs:
        print(f"{kept_runs} runs are in {archive.folder}, {len(to_run)} to run", flush=True)
    for variant in config.variants:
        print(f"\n== {variant} ({config.variants.index(variant) + 1} of {len(config.variants)})", flush=True)
        runs = []
        for seed in seeds[variant]:
            # The first seed's runs at the root, as with one seed; each further seed's, pre-trained models
            # included, in seeds/<seed>/ over the same data.
            folder = (root if seed == config.seed else root / "seeds" / str(seed)) / variant
            kept = archive.load(variant, seed) if archive else None
            if kept is not None:
                print(f"   {variant}, seed {seed}: read from {archive.path(variant, seed)}", flush=True)
                runs.append(kept)
                continue
            folder.mkdir(parents=True, exist_ok=True)
            # The seconds file keeps a resumed run's cost whole: stages finished earlier report theirs.
            stages = StageRunner(
                {},
                digits=1,
                report=f"   {variant}: {{name}} {{seconds}}s",
                seconds_file=folder / "stage_seconds.json",
            )
            _run_variant(dataclasses.replace(config, seed=seed), variant, data, folder, stages)
            runs.append(_run_result(data, folder, rule, held_out, stages.timings))
            if archive:
                archive.keep(variant, seed, runs[-1])
            if set(stages.timings) - set(stages.skipped):
                progress.add(1)
            else:  # every stage finished by an earlier call: as instant as an archived run, so not paced
                print(f"   {variant}, seed {seed}: finished by an earlier attempt in {folder}", flush=True)
                progress.skip(1)
        results[variant] = pool_seeds(runs)
        if variant == ZERO_SHOT:
            results.update(_lexical_results(data, root / ZERO_SHOT / "eval", rule))
        if config.baseline in results:
            # After every variant, so an experiment stopped half-way still leaves its table.
            report = _write_results(config, results, root, time.perf_counter() - started)
    print("\n" + (root / "results.md").read_text())
    return report


def _write_results(
    config: ExperimentConfig, results: dict[str, Any], root: Path, wall: float
) -> dict[str, Any]:
    summary = summarise(results, config.baseline, ZERO_SHOT, marked=[key for key, _ in COLUMNS])
    queries = len(results[config.baseline]["per_query"])
    report = {
        "power": power_analysis(summary, queries),
        "config": asdict(config),
        "wall_seconds": round(wall, 1),
        "finished_variants": list(results),
        "summary": summary,
    }
    (root / "results.json").write_text(json.dumps(report, indent=2, default=float) + "\n")
    write_report(report, root / "results.md")
    return report
