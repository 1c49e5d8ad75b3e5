"""`madr adapt`: the shipped model fitted to your catalog, and what it measured there.

Adapts (`pipelines.train.adapt`), prints the held-out aspect accuracy, and, when the dataset folder
has queries and judgments, evaluates the adapted model (and the `--from` model it started from)
against the backbone used zero-shot on the same test queries, with paired t-tests.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
from apache_beam.io.filesystems import FileSystems

from model.training import TrainingConfig
from pipelines.embed.stage import EmbedConfig, embed_catalog
from pipelines.evaluate.config import EvaluateConfig
from pipelines.evaluate.corpus_sample import sample_corpus
from pipelines.evaluate.stage import evaluate_retrieval
from pipelines.layout import DatasetLayout
from pipelines.settings.options import EmbedSettings, EvaluateSettings, ModelSettings
from pipelines.settings.stage_config import nested, setting
from pipelines.train.adapt import AdaptJob, AdaptReport, run_adapt
from pipelines.train.encoder_job import require_dataset
from pipelines.train.pretrain import PRETRAIN_PRECISIONS, pretrain_in_bf16
from pipelines.train.shipped_recipe import ADAPT_TRAINING_DEFAULTS

# `AdaptJob`'s fields that are `madr adapt` flags; the variant and its options are the shipped recipe's.
ADAPT_FLAGS = (
    "dataset",
    "output",
    "overwrite",
    "from_model",
    "fraction",  # of held-out products: --held_out_fraction
    "queries_per_product",
    "max_products",
    "min_steps",
    "step_budget",
    "aspects",
    "min_aspect_count",
    "max_query_length",
    "max_document_length",
)


def has_judged_test_queries(data: DatasetLayout) -> bool:
    """Whether evaluation has something to score: a queries file with test queries, and judgments."""
    if not (FileSystems.exists(data.queries) and FileSystems.exists(data.judgments)):
        return False
    splits = pq.read_table(data.queries, columns=["split"]).column("split").to_pylist()
    return "test" in splits


def evaluate_model(
    model: str,
    data: DatasetLayout,
    folder: Path,
    overwrite: bool,
    products: str | None = None,
    *,
    zero_shot_previous: str | None = None,
) -> dict[str, Any]:
    """Embed the catalog (or `products`, a cut of it) with `model`, search exactly, score the test queries,
    and compare with zero-shot (reusing the rows of `zero_shot_previous`, an earlier evaluation's
    zero_shot/embeddings, for the products unchanged since, as `--zero_shot_previous` does)."""
    products = products or data.products
    embeddings = str(folder / "embeddings")
    embed_catalog(
        EmbedConfig(
            model=ModelSettings(model),
            embed=EmbedSettings(products),
            output=embeddings,
            overwrite=overwrite,
        )
    )
    settings = EvaluateSettings(
        queries=data.queries,
        judgments=data.judgments,
        embeddings=embeddings,
        searcher="exact",
        zero_shot="true",
        zero_shot_previous=zero_shot_previous,
    )
    config = EvaluateConfig(
        model=ModelSettings(model),
        evaluate=settings,
        output=str(folder / "eval"),
        products=products,
        overwrite=overwrite,
    )
    return evaluate_retrieval(config)


@dataclass(frozen=True)
class AdaptRun:
    """`madr adapt`: the adaptation (`AdaptJob`), its loop (the shipped recipe's defaults), and where the
    retrieval evaluations go; its flags are theirs."""

    job: AdaptJob = nested(only=ADAPT_FLAGS)
    evaluation: str | None = setting(
        None,
        "Where the retrieval evaluations go when the dataset has judgments (default: OUTPUT-evaluation); "
        "'none' skips them",
        metavar="DIR",
    )
    evaluation_products: int = setting(
        20_000,
        "Evaluate over at most this many products: every judged one and a fixed sample of the rest (by "
        "product-id hash), so that embedding the catalog once per model does not outlast the adaptation; "
        "every system is scored over the same products, and recall is higher than over the whole catalog. "
        "0: every product",
        metavar="N",
    )
    training_precision: str = setting(
        "auto",
        "Forward pass: bf16 autocast where the CPU or GPU computes bfloat16 natively (auto), or fp32",
        choices=PRETRAIN_PRECISIONS,
    )
    loop: TrainingConfig = nested(TrainingConfig, **ADAPT_TRAINING_DEFAULTS)

    def __post_init__(self) -> None:
        # After the loop's settings are built: a bad value is named before the dataset is looked at.
        if self.evaluation_products < 0:
            got = self.evaluation_products
            raise ValueError(f"--evaluation_products must be >= 0 (0: every product), got {got}")
        require_dataset(self.job)

    def training_loop(self) -> TrainingConfig:
        """The loop, in bf16 where `training_precision` asks for it (--bf16 too)."""
        bf16 = self.loop.bf16 or pretrain_in_bf16(self.training_precision)
        return dataclasses.replace(self.loop, bf16=bf16)


def run_adapt_job(run: AdaptRun) -> dict[str, Any]:
    job = run.job
    started = time.perf_counter()
    report: AdaptReport = run_adapt(job, run.training_loop())
    seconds = time.perf_counter() - started
    print(report.format())
    print(f"adapted in {seconds:.0f}s")
    result: dict[str, Any] = {"report": report, "adapt_seconds": seconds, "evaluations": {}}
    data = DatasetLayout(job.dataset)
    if run.evaluation == "none" or not has_judged_test_queries(data):
        if run.evaluation != "none":
            print("no judged test queries in the dataset: retrieval is not evaluated")
        return result
    root = Path(run.evaluation or f"{str(job.output).rstrip('/')}-evaluation")
    corpus = sample_corpus(data.products, data.judgments, run.evaluation_products, root / "corpus")
    print(f"retrieval evaluated {corpus.describe()}")
    result["evaluation_corpus"] = corpus
    models = {"adapted": str(report.model_dir)}
    if job.from_model:
        models = {"before (--from)": job.from_model, **models}
    for name, model in models.items():
        folder = root / name.split()[0].strip("()")
        evaluated = evaluate_model(model, data, folder, job.overwrite, corpus.products)
        result["evaluations"][name] = evaluated
        print(f"\n== {name}: {model} ({folder})\n")
        print(evaluated["table"])
    return result


__all__ = ["ADAPT_FLAGS", "AdaptRun", "evaluate_model", "run_adapt_job"]
