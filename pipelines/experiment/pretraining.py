"""Which pre-trained model each variant of `madr experiment` fine-tunes from, and how it is made.

The papers pre-train on the catalog before fine-tuning (madral-kdd22 §7.1, Eq. 7;
repro-ecir24 §7: MLM + AP + APP with λp = 0.1; mural-wsdm24 Eq. 9). Variants that
differ only in fine-tuning share one pre-trained model, as in repro-ecir24 §8.1, where
en-v1 "only differs during fine-tuning" from MADRAL-ori and "Only CLS" (§5.2) fuses
nothing on top of the same pre-trained aspect embeddings. BiBERT is pre-trained with
MLM alone for the same number of steps, so that a gain of an aspect variant is not
just domain-adaptive MLM. The products `held_out` holds (a hash of their title's words) are never
pre-trained on: product Accuracy@1 is measured on them.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

from model.training import PretrainingConfig
from pipelines.experiment.variant import VariantTraining
from pipelines.layout import DatasetLayout
from pipelines.train.pretrain import (
    CATALOG_PRETRAIN_HEAD_LEARNING_RATE,
    CATALOG_PRETRAIN_LEARNING_RATE,
    PretrainJob,
    run_pretraining,
)
from schemas.splits import HeldOutProducts


@dataclass(frozen=True)
class PretrainingPlan:
    """Pre-training settings shared by every pre-trained model of one experiment.

    Attributes:
        steps: optimiser steps per pre-trained model (0: no pre-training at all).
        batch_size: texts per step (one side at a time).
        aspect_weight: λp of Eq. 7 (repro-ecir24 §7 uses 0.1; 1 is Eq. 7 as written).
        held_out: the products no model is pre-trained on (`ExperimentConfig.held_out_rule`).
        learning_rate / head_learning_rate: AdamW's rates for the backbone / the new layers.
        bf16: bfloat16 autocast in the forward pass (1.75x per step where it is native).
    """

    steps: int = 250
    batch_size: int = 32
    aspect_weight: float = 1.0
    held_out: HeldOutProducts = field(default_factory=lambda: HeldOutProducts(0.1, by="title"))
    learning_rate: float = CATALOG_PRETRAIN_LEARNING_RATE
    head_learning_rate: float = CATALOG_PRETRAIN_HEAD_LEARNING_RATE
    bf16: bool = False
    aspect_sides: tuple[str, ...] = ("query", "document")
    annotated_share: float = 1.0

    def __post_init__(self) -> None:
        if self.steps < 0 or self.batch_size < 1 or self.aspect_weight < 0:
            raise ValueError(f"invalid pre-training plan {self}")


def pretrained_model(
    training: VariantTraining,
    plan: PretrainingPlan,
    data: DatasetLayout,
    root: Path,
    seed: int,
) -> Path | None:
    """The pre-trained model a variant fine-tunes from (`training.pretrained_from`, kept in
    root/pretrained/`training.pretrained_name`), pre-training it first if needed; None if none."""
    source = training.pretrained_from
    if source is None or plan.steps == 0:
        return None
    folder = root / "pretrained" / str(training.pretrained_name)
    if (folder / "manifest.json").is_file():
        return folder
    precision = "bf16" if plan.bf16 else "fp32"
    print(f"   pre-training {training.pretrained_name} ({plan.steps} steps, {precision})", flush=True)
    loop = PretrainingConfig(
        max_steps=plan.steps,
        epochs=1000,  # a ceiling: max_steps decides
        batch_size=plan.batch_size,
        aspect_weight=plan.aspect_weight,
        learning_rate=plan.learning_rate,
        head_learning_rate=plan.head_learning_rate,
        bf16=plan.bf16,
        aspect_sides=plan.aspect_sides,
        seed=seed,
        show_progress=True,
    )
    # The paper's own pre-training settings (rates, λp, masking); its epochs yield to the step budget.
    changes = {name: value for name, value in training.pretraining.items() if name != "epochs"}
    run_pretraining(
        PretrainJob(
            dataset=data.root,
            output=str(folder),
            variant=source,
            held_out=plan.held_out,
            annotated_share=plan.annotated_share,
            **training.model,
        ),
        dataclasses.replace(loop, **changes),
    )
    return folder
