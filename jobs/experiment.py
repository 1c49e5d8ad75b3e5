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

import argparse
import dataclasses
import json
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq

from evaluation import RelevanceRule
from evaluation.collapse import mean_pairwise_cosine
from jobs.experiment_pretraining import PretrainingPlan, pretrained_model
from jobs.experiment_report import write_report
from jobs.experiment_summary import pool_seeds, power_analysis, summarise
from jobs.experiment_variant import embeddings_source, variant_training
from jobs.stage_runs import StageRunner
from model import Side, load_encoder, text_for_model
from model.registry import EXPERIMENT_ROLES, experiment_role
from pipelines.artifacts import read_embeddings
from pipelines.embed.stage import EmbedConfig, embed_catalog
from pipelines.evaluate.judged_ranking import aspect_accuracy, encode, rerank_judged
from pipelines.evaluate.sparse import (
    is_sparse_model,
    read_sparse_results,
    run_sparse_evaluation,
    sparse_ranking_rows,
)
from pipelines.evaluate.stage import EvaluateConfig, evaluate_retrieval
from pipelines.index.config import IndexBuildConfig
from pipelines.index.single import build_index
from pipelines.layout import DatasetLayout
from pipelines.options import EmbedSettings, EvaluateSettings, ModelSettings
from pipelines.progress import ProgressLog
from pipelines.stage_config import add_config_arguments, add_output_argument, config_from_values, setting
from pipelines.train.finetune import TrainJob, run_training
from pipelines.train.pretrain import PRETRAIN_PRECISION_HELP, PRETRAIN_PRECISIONS, pretrain_in_bf16
from pipelines.zero_shot import zero_shot_model
from product_data.synthetic import SyntheticConfig, generate_benchmark
from schemas import ECOMMERCE_ASPECTS
from schemas.splits import HeldOutProducts, title_key

DEFAULT_VARIANTS = tuple(EXPERIMENT_ROLES)
RETRIEVAL_METRICS = ("recall@100", "recall@500", "recall@10000")

# What `--profile` sets, under any flag given explicitly. default: the 2-core hour (docs/RESULTS.md);
# full: two epochs of pre-training over the catalog and fine-tuning until validation stops improving.
# paper: each variant with its paper's settings (`jobs.experiment_variant`), the new layers at their own
# rate (the papers do not give one; 1e-3 is pre-training's), and the full profile's budget.
PROFILES: dict[str, dict[str, Any]] = {
    "default": {},
    "full": {"pretrain_steps": 1125, "epochs": 10, "patience": 2},
    "paper": {"paper_settings": True, "head_learning_rate": 1e-3, "pretrain_steps": 1125, "epochs": 10},
}


@dataclass(frozen=True)
class ExperimentConfig:
    """One experiment: the benchmark, the variants, and the budget every variant gets.

    Fine-tuning runs up to `epochs` and stops after `patience` epochs without a better
    validation MRR@10, keeping the best checkpoint. `pretrain_steps` optimiser steps
    pre-train each shared model (`jobs.experiment_pretraining`); 0 turns it off. Each
    field is a flag of `madr experiment` (`pipelines.stage_config`).
    """

    variants: tuple[str, ...] = setting(DEFAULT_VARIANTS, "Comma-separated variants")
    baseline: str = setting("bibert", "Variant the t-tests compare against")
    num_products: int = setting(20_000, "Catalog size")
    num_queries: int = setting(600, "Queries over all splits")
    test_queries: int = setting(
        0,
        "Test queries on top of --num_queries' train and valid ones (0: a quarter of --num_queries are "
        "test). Detecting 2 points of Recall@100 needs about 1,100-3,300 (the table's power line); give "
        "--num_products about 30 per query so every query keeps its 8-20 judged products",
    )
    epochs: int = setting(4, "Fine-tuning epochs per variant (a ceiling)")
    patience: int = setting(1, "Epochs without a better validation MRR@10")
    batch_size: int = setting(16, "Training queries per step")
    max_document_length: int = setting(64, "Product truncation")
    aspect_loss_weight: float = setting(
        0.1, "λf, the aspect losses' weight in fine-tuning (Eq. 8), for the variants that learn aspects"
    )
    head_learning_rate: float | None = setting(
        None,
        "Fine-tuning AdamW rate of the layers above the backbone (fusion, projection, heads); "
        "default: the backbone's",
    )
    pretrain_steps: int = setting(
        PretrainingPlan.steps,
        "Steps of each shared pre-trained model (MLM, plus AP + APP for aspect variants); 0: none",
    )
    pretrain_aspect_weight: float = setting(1.0, "λp on the aspect losses in pre-training (Eq. 7)")
    pretrain_precision: str = setting("auto", PRETRAIN_PRECISION_HELP, choices=PRETRAIN_PRECISIONS)
    held_out_products: int = setting(
        2000,
        "About this many products never trained on, chosen by a hash of their title's words (so near-"
        "duplicate titles fall on one side); product Accuracy@1 is measured on them",
    )
    seed: int = setting(13, "Seed of data and training")
    seeds: int = setting(
        1,
        "Training runs per variant, with seeds --seed, --seed + 1, ... over the same data: the table gives "
        "mean ± sd over them and tests the per-query means pooled over them",
    )
    aspects: tuple[str, ...] = setting(
        ECOMMERCE_ASPECTS,
        "Comma-separated aspects the aspect-aware variants learn and fuse; leave one out for madral-kdd22's "
        "ablation removing one aspect (the benchmark annotates %(default)s)",
    )
    aspect_sides: tuple[str, ...] = setting(
        ("query", "document"),
        "Sides whose aspect losses count in pre-training and fine-tuning; one side alone is madral-kdd22's "
        "ablation of aspect learning on one side",
    )
    annotated_share: float = setting(
        1.0,
        "Share of the products whose annotations pre-training learns from (repro-ecir24 §8.5: 1/3, 2/3, "
        "all); masked-language modelling reads every product",
    )
    paper_layer_drop: bool = setting(
        False,
        "Under the budget profiles, drop the backbone's last layer for MADR, MADRAL, en-v1 and no-fusion as "
        "madral-kdd22 §7.2 does (the paper profile always does). Off by default: on MiniLM-L6, CLS after 5 "
        "of 6 layers is the same vector for every text, and the variants that read it collapse "
        "(docs/RESULTS.md); the paper's setting is the ablation",
    )
    paper_settings: bool = setting(
        False,
        "Train each variant with its paper's settings (towers, truncation, losses, rates, options, which "
        "variants are pre-trained: pipelines/train/presets.py) instead of the shared budget ones",
    )

    def __post_init__(self) -> None:
        if self.baseline not in self.variants:
            raise ValueError(f"the baseline {self.baseline!r} must be one of the variants {self.variants}")
        if len(set(self.variants)) != len(self.variants):
            raise ValueError(f"variants repeat: {self.variants}")
        if self.pretrain_precision not in PRETRAIN_PRECISIONS:
            raise ValueError(f"pretrain_precision must be one of {PRETRAIN_PRECISIONS}")
        unknown = set(self.aspects) - set(ECOMMERCE_ASPECTS)
        if not self.aspects or unknown or len(set(self.aspects)) != len(self.aspects):
            raise ValueError(f"aspects must be distinct names among {ECOMMERCE_ASPECTS}, got {self.aspects}")
        if self.seeds < 1:
            raise ValueError(f"seeds must be >= 1, got {self.seeds}")
        if not 0.0 <= self.annotated_share <= 1.0:
            raise ValueError(f"annotated_share must be in [0, 1], got {self.annotated_share}")
        if self.test_queries < 0:
            raise ValueError(f"test_queries must be >= 0, got {self.test_queries}")
        if not 0 <= self.held_out_products < self.num_products:
            raise ValueError(f"held_out_products must be in [0, num_products), got {self.held_out_products}")

    def benchmark(self) -> SyntheticConfig:
        """The generated benchmark: --num_queries split 60/15/25, or its train and valid share with
        --test_queries test queries instead of its quarter."""
        config = SyntheticConfig(num_products=self.num_products, num_queries=self.num_queries, seed=self.seed)
        if not self.test_queries:
            return config
        sizes = config.split_sizes()
        total = sizes["train"] + sizes["valid"] + self.test_queries
        return dataclasses.replace(
            config,
            num_queries=total,
            valid_fraction=sizes["valid"] / total,
            test_fraction=self.test_queries / total,
        )

    def held_out_rule(self) -> HeldOutProducts:
        """The products no model trains on: a hash of the title's words at `held_out_products` / catalog."""
        return HeldOutProducts(self.held_out_products / self.num_products, by="title")


def add_experiment_arguments(parser: argparse.ArgumentParser) -> None:
    add_output_argument(parser, default="runs/experiment", help="Experiment folder (resumable)")
    parser.add_argument(
        "--profile",
        choices=sorted(PROFILES),
        default="default",
        help="default: the budget that runs all 13 variants in about an hour on 2 cores; full: "
        + ", ".join(f"{name}={value}" for name, value in PROFILES["full"].items())
        + "; paper: each variant with its paper's preset (--paper_settings), "
        + ", ".join(f"{k}={v}" for k, v in PROFILES["paper"].items() if k != "paper_settings")
        + " (a flag given explicitly wins)",
    )
    add_config_arguments(parser, ExperimentConfig)


def config_from_args(args: argparse.Namespace, explicit: set[str] = frozenset()) -> ExperimentConfig:
    """The config of the parsed flags, with `--profile`'s values where a flag was not in `explicit`."""
    values = vars(args) | {k: v for k, v in PROFILES[args.profile].items() if k not in explicit}
    return config_from_values(ExperimentConfig, values)


def _dataset(config: ExperimentConfig, root: Path) -> DatasetLayout:
    data = DatasetLayout(str(root / "data"))
    if not (root / "data" / "manifest.json").is_file():
        generate_benchmark(config.benchmark(), data.root)
    return data


def _run_variant(
    config: ExperimentConfig, variant: str, data: DatasetLayout, folder: Path
) -> dict[str, float]:
    """Train, embed, index, evaluate one variant; return stage timings. Finished stages are skipped."""
    timings: dict[str, float] = {}
    stages = StageRunner(timings, digits=1, report=f"   {variant}: {{name}} {{seconds}}s")

    role = experiment_role(variant)
    if not role.trained:
        # Nothing to train: the cached zero-shot model directory, copied in with its manifest.
        stages.run(
            "zero-shot model",
            lambda: shutil.copytree(zero_shot_model(32, config.max_document_length), folder / "model"),
            folder / "model",
        )
        return _embed_index_evaluate(folder, data, stages, timings)
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
    init_from = StageRunner(timings, digits=1).run(
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
        return timings
    return _embed_index_evaluate(folder, data, stages, timings)


def _embed_index_evaluate(
    folder: Path, data: DatasetLayout, stages: StageRunner, timings: dict[str, float]
) -> dict[str, float]:
    model = ModelSettings(str(folder / "model"))
    embed = EmbedConfig(model=model, embed=EmbedSettings(data.products), output=str(folder / "embeddings"))
    stages.run("embed", lambda: embed_catalog(embed), folder / "embeddings")
    stages.run(
        "index",
        lambda: build_index(
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
    return timings


def held_out_products(data: DatasetLayout, rule: HeldOutProducts) -> list[dict[str, Any]]:
    """The annotated products that `rule` holds out and that no model trained on, nor on a near-duplicate.

    Pre-training skips what `rule` holds (`PretrainingPlan.held_out`). Fine-tuning reads the judged
    products of the train and valid queries: those are left out, and so is every held-out product whose
    title words (`schemas.splits.title_key`) are those of one of them.
    """
    tuned = {q["query_id"] for q in pq.read_table(data.queries).to_pylist() if q["split"] != "test"}
    seen = {
        row["product_id"]
        for row in pq.read_table(data.judgments, columns=["query_id", "product_id"]).to_pylist()
        if row["query_id"] in tuned
    }
    products = pq.read_table(str(Path(data.root) / "products")).to_pylist()
    seen_titles = {title_key(p["title"]) for p in products if p["product_id"] in seen}
    # Parquet gives the aspects map as (key, values) pairs; the text builders read a dict.
    return [
        {**p, "aspects": dict(p["aspects"])}
        for p in products
        if p["aspects"]
        and rule.holds(p)
        and p["product_id"] not in seen
        and title_key(p["title"]) not in seen_titles
    ]


def _driver_metrics(
    data: DatasetLayout, folder: Path, rule: RelevanceRule, held_out: list[dict[str, Any]]
) -> dict[str, Any]:
    """Ranking-task rows per query, aspect Accuracy@1/@3 for test queries and the `held_out` products, and
    the mean pairwise cosine of a dense variant's document embeddings (its collapse, if near 1)."""
    encoder, tokenizer = load_encoder(folder / "model")
    queries = [q for q in pq.read_table(data.queries).to_pylist() if q["split"] == "test"]
    judgments: dict[str, dict[str, int]] = {}
    for row in pq.read_table(data.judgments).to_pylist():
        judgments.setdefault(row["query_id"], {})[row["product_id"]] = row["grade"]
    document_cosine = None
    if is_sparse_model(folder / "model"):
        pairs = [(q["query_id"], q["text"]) for q in queries]
        ranking_rows = sparse_ranking_rows(folder / "eval", encoder, tokenizer, pairs, judgments, rule)
    else:
        outputs = encode(encoder, tokenizer, [q["text"] for q in queries], Side.QUERY)
        vectors = np.concatenate([o.embedding.numpy() for o in outputs]) if outputs else np.zeros((0, 1))
        query_vectors = {q["query_id"]: vectors[i] for i, q in enumerate(queries)}
        ids, matrix, _ = read_embeddings(str(folder / "embeddings"))
        product_vectors = dict(zip(ids, matrix, strict=True))
        ranking_rows = rerank_judged(query_vectors, product_vectors, judgments, rule)
        document_cosine = mean_pairwise_cosine(matrix)  # a collapsed row is marked (evaluation.collapse)

    def aspects_of(records: list[dict]) -> list[Any]:
        return [dict(r["aspects"]) if r["aspects"] else None for r in records]

    query_accuracy = aspect_accuracy(
        encoder, tokenizer, [q["text"] for q in queries], aspects_of(queries), Side.QUERY
    )
    product_accuracy = aspect_accuracy(
        encoder,
        tokenizer,
        [text_for_model(p, encoder.config) for p in held_out],
        aspects_of(held_out),
        Side.DOCUMENT,
    )
    return {
        "ranking_rows": ranking_rows,
        "query_accuracy": asdict(query_accuracy) if query_accuracy else None,
        "product_accuracy": asdict(product_accuracy) if product_accuracy else None,
        "document_cosine": document_cosine,
    }


def _run_result(
    data: DatasetLayout, folder: Path, rule: RelevanceRule, held_out: list[dict[str, Any]], timings: dict
) -> dict[str, Any]:
    """One trained run's per-query metrics (the pipeline's and the driver's), accuracies and timings."""
    per_query = {
        row["query_id"]: row for row in pq.read_table(folder / "eval" / "per_query.parquet").to_pylist()
    }
    driver = _driver_metrics(data, folder, rule, held_out)
    for row in driver["ranking_rows"]:
        per_query.setdefault(row["query_id"], {"query_id": row["query_id"]}).update(row)
    result = {"per_query": per_query, "timings": timings, **driver}
    sparse = read_sparse_results(folder / "eval")
    if sparse is not None:
        result["sparse_indexes"] = sparse["indexes"]
    return result


def run_experiment(config: ExperimentConfig, out: str) -> dict[str, Any]:
    root = Path(out)
    root.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    data = _dataset(config, root)
    rule = RelevanceRule()
    held_out = held_out_products(data, config.held_out_rule())  # the same for every variant
    results: dict[str, Any] = {}
    progress = ProgressLog("variants done", len(config.variants), interval_s=0, log=print)
    for variant in config.variants:
        print(f"\n== {variant} ({config.variants.index(variant) + 1} of {len(config.variants)})", flush=True)
        runs = []
        # The zero-shot backbone is not trained: one run, whatever the seeds.
        seeds = range(config.seed, config.seed + (config.seeds if experiment_role(variant).trained else 1))
        for seed in seeds:
            # The first seed's runs at the root, as with one seed; each further seed's, pre-trained models
            # included, in seeds/<seed>/ over the same data.
            folder = (root if seed == config.seed else root / "seeds" / str(seed)) / variant
            timings = _run_variant(dataclasses.replace(config, seed=seed), variant, data, folder)
            runs.append(_run_result(data, folder, rule, held_out, timings))
        results[variant] = pool_seeds(runs)
        progress.add(1)
        if config.baseline in results:
            # After every variant, so an experiment stopped half-way still leaves its table.
            report = _write_results(config, results, root, time.perf_counter() - started)
    print("\n" + (root / "results.md").read_text())
    return report


def _write_results(
    config: ExperimentConfig, results: dict[str, Any], root: Path, wall: float
) -> dict[str, Any]:
    summary = summarise(results, config.baseline)
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
