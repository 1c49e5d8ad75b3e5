"""The shipped model and how it is trained: one recipe, used by `madr demo`, `madr adapt` (its loop,
`adapt_loop`) and the benchmarks.

MtBERT (the aspect-aware variant that both retrieves and annotates) on the bundled MiniLM, trained so
that it keeps what the backbone knows (docs/RESULTS.md, "zero-shot"):

- it reads the encoding MiniLM was trained to produce, the mean of its token encodings, through a
  projection that starts as the identity: before any step it *is* the backbone used zero-shot;
- pre-training learns the aspects without MLM (`mlm_weight` 0), which on this sentence-embedding
  backbone only pulled the embedding away from what it knew;
- fine-tuning is short, and its weights are then averaged half way back to the backbone's (WiSE-FT):
  the average keeps the fine-tuned ranking gain and the backbone's recall, where the fine-tuned model
  alone loses a point of Recall@100 to the backbone;
- the aspect heads are then refitted on the averaged encoder, which they had never read.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from model.registry import VARIANTS, embeds_summary_encoding
from model.training import PretrainingConfig, PretrainingReport, TrainingConfig, TrainingReport
from pipelines.settings.stage_config import setting
from pipelines.train.adapt import ADAPT_VARIANT, ADAPT_VARIANT_OPTIONS, SHIPPED_DOCUMENT_LENGTH
from pipelines.train.finetune import TrainJob, run_training
from pipelines.train.pretrain import (
    CATALOG_PRETRAIN_HEAD_LEARNING_RATE,
    CATALOG_PRETRAIN_LEARNING_RATE,
    PRETRAIN_PRECISION_HELP,
    PRETRAIN_PRECISIONS,
    PretrainJob,
    pretrain_in_bf16,
    run_pretraining,
)
from schemas.splits import HeldOutProducts

SHIPPED_VARIANT = ADAPT_VARIANT
SHIPPED_VARIANT_OPTIONS = ADAPT_VARIANT_OPTIONS


# The loop of the shipped recipe (docs/RESULTS.md, "zero-shot"): one pass over one pseudo-query per
# product, the backbone at a low rate so it keeps what it knew, the new layers (heads) fast, and the
# aspect losses at full weight so the catalog's own values are learnt in that one pass.
ADAPT_TRAINING_DEFAULTS: dict[str, Any] = {
    "epochs": 1,
    "batch_size": 32,
    "learning_rate": 2e-5,
    "head_learning_rate": 3e-3,
    "aspect_loss_weight": 1.0,
    "pointwise_loss_weight": 0.0,
    "hard_negatives": 1,
    # Averaged half way back to the backbone afterwards (WiSE-FT), as the shipped model is.
    "wise_ft_alpha": 0.5,
}


def adapt_loop(seed: int = 13, precision: str = "auto", **changes: Any) -> TrainingConfig:
    """The recipe's adapt loop (`ADAPT_TRAINING_DEFAULTS`), bf16 where native unless `precision` is fp32."""
    settings = {**ADAPT_TRAINING_DEFAULTS, "seed": seed, "show_progress": False, **changes}
    return TrainingConfig(**settings, bf16=pretrain_in_bf16(precision))


@dataclass(frozen=True)
class ShippedRecipe:
    """How the shipped model is trained on a dataset folder with judged training queries.

    The fields made with `setting` are `madr demo`'s flags too.

    Attributes:
        pretrain_steps: aspect pre-training steps of 32 texts (0: none; the heads then learn only in
            fine-tuning, through `aspect_loss_weight`).
        mlm_weight: weight of L_MLM in pre-training (Eq. 7 has 1; 0 is the recipe, see the module).
        pretrain_learning_rate / pretrain_head_learning_rate: AdamW rates of the backbone and the heads.
        learning_rate / head_learning_rate: fine-tuning rates (head: the projection and heads).
        aspect_loss_weight: λf of Eq. 8 in fine-tuning.
        frozen_layers: the backbone's lowest layers (and word embeddings) that neither pre-training nor
            fine-tuning updates (3 cost 0.5 points of Recall@100 and 1.1 of NDCG@10, neither significant,
            bench.recipe_ablation: 0).
        head_refit_epochs: passes of the aspect heads over the catalog's encodings after averaging
            (`pipelines.train.head_refit`): the heads then read the encoder as shipped.
        wise_ft_alpha: the fine-tuned weights' share when averaged with the zero-shot backbone's
            afterwards (WiSE-FT, `model.interpolation`); 1 keeps them as trained.
        held_out_fraction: products pre-training never reads, to score the annotations on.
    """

    # At most one epoch over the catalog at 32 texts a step: about 95 steps on the demo's 3,000
    # products, 310 on the benchmark's 10,000.
    pretrain_steps: int = setting(
        310, "Pre-training steps of 32 texts on the catalog before fine-tuning (0: none)"
    )
    mlm_weight: float = 0.0
    pretrain_learning_rate: float = CATALOG_PRETRAIN_LEARNING_RATE
    pretrain_head_learning_rate: float = CATALOG_PRETRAIN_HEAD_LEARNING_RATE
    epochs: int = setting(1, "Fine-tuning epochs over the training queries")
    batch_size: int = setting(16, "Training queries per step")
    learning_rate: float = 5e-5
    head_learning_rate: float | None = None
    aspect_loss_weight: float = 0.0
    frozen_layers: int = 0
    head_refit_epochs: int = 8
    wise_ft_alpha: float = 0.5
    max_document_length: int = setting(
        SHIPPED_DOCUMENT_LENGTH,
        "Product truncation in wordpieces; 64 keeps the demo within minutes on 2 cores (papers: 128)",
    )
    held_out_fraction: float = setting(
        0.05, "Share of products pre-training never reads, on which evaluate measures the annotations"
    )
    pretrain_precision: str = setting("auto", PRETRAIN_PRECISION_HELP, choices=PRETRAIN_PRECISIONS)
    seed: int = setting(13, "Seed for data and training")
    variant: str = setting(
        SHIPPED_VARIANT,
        "Encoder variant; mtbert both retrieves and annotates (docs/RESULTS.md), bibert only retrieves",
        choices=sorted(VARIANTS),
    )

    def variant_options(self) -> tuple[tuple[str, Any], ...]:
        """The recipe's model settings for MtBERT (and every variant that reads a summary encoding)."""
        return SHIPPED_VARIANT_OPTIONS if embeds_summary_encoding(self.variant) else ()


@dataclass(frozen=True)
class ShippedTraining:
    pretraining: PretrainingReport | None
    training: TrainingReport


Stage = Callable[[str, Callable[[], Any]], Any]


def train_shipped_model(
    dataset: str, folder: str | Path, recipe: ShippedRecipe, run_stage: Stage | None = None
) -> ShippedTraining:
    """Pre-train (into FOLDER/pretrained) and fine-tune (into FOLDER/model) the shipped model on `dataset`.

    `run_stage(name, work)` runs each stage (the demo's `StageRunner.run` prints and times them).
    """
    stage = run_stage or (lambda _name, work: work())
    folder = Path(folder)
    pretrained = folder / "pretrained"
    pretraining: PretrainingReport | None = None
    init_from: Path | None = None
    if recipe.pretrain_steps:
        pretraining = stage("pretrain", lambda: pretrain_shipped(dataset, pretrained, recipe))
        init_from = pretrained
    training = stage("train", lambda: finetune_shipped(dataset, folder / "model", recipe, init_from))
    return ShippedTraining(pretraining, training)


def pretrain_shipped(dataset: str, output: str | Path, recipe: ShippedRecipe) -> PretrainingReport | None:
    """The recipe's aspect pre-training on `dataset` into `output`; None (nothing written) at 0 steps."""
    if not recipe.pretrain_steps:
        return None
    job = PretrainJob(
        dataset=dataset,
        output=str(output),
        variant=recipe.variant,
        variant_options=recipe.variant_options(),
        max_document_length=recipe.max_document_length,
        held_out=HeldOutProducts(recipe.held_out_fraction),
    )
    steps = PretrainingConfig(
        max_steps=recipe.pretrain_steps,
        seed=recipe.seed,
        learning_rate=recipe.pretrain_learning_rate,
        head_learning_rate=recipe.pretrain_head_learning_rate,
        mlm_weight=recipe.mlm_weight,
        frozen_layers=recipe.frozen_layers,
        bf16=pretrain_in_bf16(recipe.pretrain_precision),
    )
    return run_pretraining(job, steps)


def finetune_shipped(
    dataset: str, output: str | Path, recipe: ShippedRecipe, init_from: str | Path | None
) -> TrainingReport:
    """The recipe's fine-tuning (then its averaging and head refit) of `init_from` (a pre-trained model
    directory; None: a fresh model on the backbone) into `output`. One pre-training can so be fine-tuned
    under several recipes (bench.recipe_ablation)."""
    options = recipe.variant_options()
    train = TrainJob(
        dataset=dataset,
        output=str(output),
        variant=recipe.variant,
        variant_options=options,
        max_document_length=recipe.max_document_length,
        init_from=str(init_from) if init_from else None,
    )
    loop = TrainingConfig(
        epochs=recipe.epochs,
        batch_size=recipe.batch_size,
        seed=recipe.seed,
        learning_rate=recipe.learning_rate,
        head_learning_rate=recipe.head_learning_rate,
        aspect_loss_weight=recipe.aspect_loss_weight,
        frozen_layers=recipe.frozen_layers,
        head_refit_epochs=recipe.head_refit_epochs,
        bf16=pretrain_in_bf16(recipe.pretrain_precision),
        wise_ft_alpha=recipe.wise_ft_alpha if options else 1.0,
    )
    return run_training(train, loop)
