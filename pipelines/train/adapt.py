"""`madr adapt`: fit the shipped model to a team's own catalog, with no judgments needed.

A model trained on one catalog forces another catalog's brands onto the ones it knows, and its
retrieval falls below the backbone used zero-shot (docs/RESULTS.md, "zero-shot"). Adapting fixes
both from the catalog alone:

- the aspect vocabularies come from this catalog's fields, so the heads predict its own brands,
  categories and colours (initialised from the backbone's states for the value names);
- the model learns them with the aspect losses, and keeps retrieving with a contrastive loss on
  pseudo-queries made from the products' own fields (`pipelines.train.pseudo_queries`), whose hard
  negatives share the product type but not the brand or colour the query names;
- it starts where the backbone used zero-shot is (mean pooling, identity projection: the shipped
  recipe, `ADAPT_VARIANT_OPTIONS`), or from `--from MODEL`'s transformer, and trains briefly at a
  low backbone rate, so what the backbone knew is kept.

A share of the products (by a hash of the id, recorded in the manifest) is never trained on:
validation and the held-out aspect accuracy are measured on it.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from transformers import PreTrainedTokenizerBase

from model import DenseEncoder, Side, text_for_model
from model.interpolation import average_saved_model
from model.text_encoder import TextEncoder
from model.training import Trainer, TrainingConfig
from pipelines.evaluate.judged_ranking import AspectAccuracy, aspect_accuracy
from pipelines.io.product_reader import SkippedProducts, valid_products
from pipelines.layout import DatasetLayout
from pipelines.settings.stage_config import nested, setting
from pipelines.storage.staged_output import fresh_output
from pipelines.storage.verify import verify_model
from pipelines.train.calibrate import calibrate_confidences, calibration_share
from pipelines.train.encoder_job import EncoderJob, seeded
from pipelines.train.head_refit import refit_aspect_heads
from pipelines.train.pseudo_queries import CatalogProduct, catalog_product, pseudo_query_examples
from pipelines.train.step_budget import products_for_budget
from pipelines.train.vocabulary import run_build_vocabulary
from schemas.splits import HeldOutProducts

LOGGER = logging.getLogger(__name__)

ADAPT_VARIANT = "mtbert"
# The shipped recipe: the encoding the backbone was trained to produce (mean pooling), and a projection
# that starts as the identity, so step 0 is the backbone used zero-shot (docs/RESULTS.md, "zero-shot").
ADAPT_VARIANT_OPTIONS: tuple[tuple[str, Any], ...] = (
    ("pooling", "mean"),
    ("projection_init", "identity"),
    ("projection_dim", None),
)
# Products are read at 64 wordpieces, as the shipped model reads them: half the cost of 128 a step.
SHIPPED_DOCUMENT_LENGTH = 64
VALIDATION_QUERIES = 512  # pseudo-queries of held-out products; MRR@10 over them picks the checkpoint


@dataclass(frozen=True)
class AdaptJob(EncoderJob):
    """What to adapt to, from which model, and what to leave out.

    `from_model`: a trained model directory whose transformer (and projection) start the adapted
    model; None starts from the bundled backbone with the shipped recipe. `queries_per_product`
    pseudo-queries are drawn per training product; `max_products` caps how many products train.
    A small catalog gives few steps per epoch: the loop runs as many epochs as `min_steps` needs
    (the heads need about a hundred steps to leave the frequency floor).
    """

    variant: str = ADAPT_VARIANT
    variant_options: tuple[tuple[str, Any], ...] = ADAPT_VARIANT_OPTIONS
    max_document_length: int = setting(
        SHIPPED_DOCUMENT_LENGTH,
        "Product truncation, in wordpieces (64 as the shipped model; half the cost of 128 a step)",
    )
    from_model: str | None = setting(
        None,
        "Trained model to start from (its transformer; heads sized by this catalog, a value the model knew "
        "starting from its learnt row). Default: the bundled backbone with the shipped recipe, i.e. the "
        "backbone used zero-shot",
        flag="from",
    )
    held_out: HeldOutProducts = nested(HeldOutProducts, fraction=0.05)
    queries_per_product: int = setting(1, "Pseudo-queries drawn per product")
    max_products: int | None = setting(None, "Adapt on at most this many products")
    min_steps: int = setting(
        100, "Run as many epochs as this many steps need (a small catalog has few steps per epoch)"
    )
    step_budget: int = setting(
        300,
        "Optimiser steps the adaptation is sized for: a catalog with more products than they need trains "
        "on a sample drawn across its categories and brands (300 steps: about 9,600 products; the whole "
        "command took 18 minutes for 10,000 products and 25 for 100,000 on 2 CPU cores without bf16; "
        "0: every product)",
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.queries_per_product < 1:
            raise ValueError(f"queries_per_product must be >= 1, got {self.queries_per_product}")
        if self.min_steps < 0:
            raise ValueError(f"min_steps must be >= 0, got {self.min_steps}")
        if self.step_budget < 0:
            raise ValueError(f"step_budget must be >= 0, got {self.step_budget}")
        if self.max_products is not None and self.max_products < 2:
            raise ValueError(f"max_products must be >= 2 when set, got {self.max_products}")


@dataclass(frozen=True)
class AdaptReport:
    model_dir: Path
    steps: int
    train_queries: int
    valid_queries: int
    held_out_products: int
    best_valid_mrr: float | None
    held_out_accuracy: AspectAccuracy | None
    vocabulary_sizes: dict[str, int]

    def format(self) -> str:
        lines = [
            f"adapted model: {self.model_dir}",
            "vocabulary from the catalog: "
            + ", ".join(f"{name} {size}" for name, size in self.vocabulary_sizes.items()),
            f"{self.steps} steps on {self.train_queries} pseudo-queries; validation MRR@10 "
            f"{self.best_valid_mrr if self.best_valid_mrr is None else round(self.best_valid_mrr, 4)} "
            f"on {self.valid_queries} pseudo-queries of held-out products",
        ]
        accuracy = self.held_out_accuracy
        if accuracy is not None:
            lines.append(
                f"aspect Accuracy@1 on {self.held_out_products} held-out products (never trained on, less "
                "the share that calibrated the confidences; the evaluation's table also leaves out products "
                "judged for training queries):"
            )
            for aspect, value in accuracy.accuracy.items():
                unseen = accuracy.out_of_vocabulary.get(aspect, 0)
                lines.append(
                    f"  {aspect:<10} {value:.3f} over {accuracy.counts[aspect]} products"
                    + (f" ({unseen} of them have a value the vocabulary lacks: misses)" if unseen else "")
                )
        return "\n".join(lines)


def _catalog(job: AdaptJob, encoder: DenseEncoder) -> tuple[list[CatalogProduct], list[CatalogProduct]]:
    """The valid products as the model reads them: (trained on, held out)."""
    train, held_out, skipped = [], [], SkippedProducts()
    for product in valid_products(DatasetLayout(job.dataset).products, skipped):
        item = catalog_product(product, text_for_model(product, encoder.config))
        (held_out if job.held_out.holds(product) else train).append(item)
    if skipped.count:
        LOGGER.warning("%s", skipped.describe())
    if job.max_products is not None:
        train = train[: job.max_products]
    if len(train) < 2:
        raise ValueError(f"{job.dataset} has {len(train)} products to adapt on; at least 2 are needed")
    return train, held_out


def _new_encoder(job: AdaptJob) -> tuple[DenseEncoder, PreTrainedTokenizerBase, dict[str, int]]:
    """The recipe's encoder with heads sized by this catalog's products outside the held-out share (their
    fields, not queries): a value only held-out products carry stays unknown, as on a catalog never seen."""
    layout = DatasetLayout(job.dataset)
    with tempfile.TemporaryDirectory() as scratch:
        path = f"{scratch}/v.json"
        vocabulary = run_build_vocabulary(
            layout.products, None, job.aspects, job.min_aspect_count, path, held_out=job.held_out
        )
    encoder, tokenizer = job.new_encoder(vocabulary)
    if job.from_model:
        left = encoder.warm_start_from(job.from_model)
        if any(name.startswith("transformers.") for name in left):
            raise ValueError(f"--from {job.from_model}: its transformer does not fit the bundled backbone's")
        LOGGER.info("started from %s; new for this catalog: %s", job.from_model, left or "nothing")
    return encoder, tokenizer, vocabulary.sizes()


def run_adapt(job: AdaptJob, loop: TrainingConfig) -> AdaptReport:
    """Adapt into `job.output`, which appears only once the model and its manifest are whole."""
    if job.from_model:
        verify_model(job.from_model)
    with fresh_output(job.output, job.overwrite) as staging:
        report = _adapt(dataclasses.replace(job, output=staging), loop)
    return dataclasses.replace(report, model_dir=Path(job.output))


def _adapt(job: AdaptJob, loop: TrainingConfig) -> AdaptReport:
    with seeded(loop.seed):
        encoder, tokenizer, sizes = _new_encoder(job)
    train, held_out = _catalog(job, encoder)
    per_step = max(1, loop.batch_size * loop.gradient_accumulation // job.queries_per_product)
    budget = products_for_budget(train, job.step_budget, per_step, loop.seed)
    if budget.sampled:
        LOGGER.info(
            "the catalog has %d products to adapt on; the %d-step budget takes %d of them, drawn across its "
            "%d category/brand groups (--step_budget 0: every product)",
            budget.catalog,
            job.step_budget,
            len(budget.products),
            budget.groups,
        )
    train = budget.products
    examples = pseudo_query_examples(train, job.queries_per_product, loop.seed)
    valid = pseudo_query_examples(held_out, 1, loop.seed + 1, negatives_from=held_out)[:VALIDATION_QUERIES]
    LOGGER.info(
        "adapting on %d pseudo-queries of %d products; %d products held out",
        len(examples),
        len(train),
        len(held_out),
    )
    loop = _with_min_steps(loop, len(examples), job.min_steps)
    trainer = Trainer(encoder, tokenizer, loop, job.output)
    result = trainer.fit(examples, valid)
    shutil.rmtree(trainer.checkpoint_dir.parent, ignore_errors=True)  # only for resuming; the model is kept
    average_saved_model(job.output, loop.wise_ft_alpha, job.backbone)
    if loop.head_refit_epochs:  # off by default: on 10,000 products it costs a pass over the catalog
        refit_aspect_heads(job.output, job.dataset, job.held_out, loop.head_refit_epochs, loop.seed)
    # Confidences fitted on one half of the held-out products; the other half measures them.
    calibrating = calibration_share(job.held_out)
    chosen = [p for p in held_out if calibrating.holds({"product_id": p.product_id, "title": p.title})]
    temperatures = calibrate_confidences(
        job.output, [p.text for p in chosen], [p.aspects or {} for p in chosen]
    )
    # Scored on the held-out products that did not calibrate the confidences, as the evaluation scores them.
    measured = [p for p in held_out if not calibrating.holds({"product_id": p.product_id, "title": p.title})]
    accuracy = _held_out_accuracy(job.output, measured)
    job.write_model_manifest(
        {
            "adapted_from": job.from_model or "the bundled backbone (zero-shot start)",
            "held_out_products": job.held_out.to_dict(),
            "calibrated_on_products": calibrating.to_dict(),
            "aspect_temperatures": temperatures,
            "aspect_vocabulary_sizes": sizes,
            "vocabulary_source": "the catalog's products",
            "loss": {"pointwise": loop.pointwise_loss_weight, "aspect": loop.aspect_loss_weight},
            "wise_ft_alpha": loop.wise_ft_alpha,
            "head_refit_epochs": loop.head_refit_epochs,
            "pseudo_queries": len(examples),
            "valid_queries": len(valid),
            "steps": result.steps,
            "best_step": result.best_step,
            "best_valid_metric": {"mrr@10": result.best_valid_metric},
            "held_out_accuracy": dataclasses.asdict(accuracy) if accuracy else None,
        }
    )
    return AdaptReport(
        Path(job.output),
        result.steps,
        len(examples),
        len(valid),
        len(measured),
        result.best_valid_metric,
        accuracy,
        sizes,
    )


def _with_min_steps(loop: TrainingConfig, examples: int, min_steps: int) -> TrainingConfig:
    """`loop` with enough epochs for `min_steps` optimiser steps (never fewer epochs than asked)."""
    per_epoch = max(1, examples // (loop.batch_size * loop.gradient_accumulation))
    epochs = max(loop.epochs, math.ceil(min_steps / per_epoch))
    if loop.max_steps is not None:
        epochs = max(loop.epochs, min(epochs, math.ceil(loop.max_steps / per_epoch)))
    return dataclasses.replace(loop, epochs=epochs)


def _held_out_accuracy(model_dir: str, held_out: list[CatalogProduct]) -> AspectAccuracy | None:
    """Aspect Accuracy@1 of the saved model on the products it never trained on."""
    if not held_out:
        return None
    annotations = [dict(product.aspects or {}) for product in held_out]
    return aspect_accuracy(
        TextEncoder.load(model_dir), [p.text for p in held_out], annotations, Side.DOCUMENT
    )
