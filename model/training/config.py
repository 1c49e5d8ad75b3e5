"""Training settings and training examples, as validated dataclasses."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


def cli_field(default: Any, help: str, choices: tuple[Any, ...] | None = None) -> Any:
    """A field with its command-line help: what `pipelines.settings.stage_config` makes a flag of."""
    return field(default=default, metadata={"help": help, "choices": choices})


@dataclass(frozen=True)
class LoopSettings:
    """What the optimiser-step loop reads (`model.training.loop`), shared by fine-tuning's and
    pre-training's configs, which add their losses and batches."""

    epochs: int = cli_field(1, "Passes over the training data (a ceiling)")
    max_steps: int | None = cli_field(None, "Stop after this many optimiser steps")
    max_minutes: float | None = cli_field(
        None,
        "Stop once this many minutes have passed since training began (validation passes count); the "
        "learning rate's decay is re-planned to end there at the pace so far; the model kept is the best "
        "validated by then (the last step is validated)",
    )
    batch_size: int = cli_field(32, "Texts per step")
    learning_rate: float = cli_field(5e-5, "AdamW rate, backbone")
    head_learning_rate: float | None = cli_field(
        None, "AdamW rate for the layers above the backbone (if none is set: --learning_rate)"
    )
    warmup_fraction: float = cli_field(0.1, "Share of the steps the learning rate warms up over")
    weight_decay: float = cli_field(0.01, "AdamW weight decay")
    max_grad_norm: float = cli_field(1.0, "Gradient norm clipping")
    frozen_layers: int = cli_field(
        0, "Keep the backbone's word embeddings and lowest N transformer layers as they are (0: train all)"
    )
    seed: int = cli_field(13, "Seed of data order, sampling, masks and init")
    checkpoint_every: int = cli_field(0, "Steps between resumable checkpoints (0: at the end only)")
    device: str | None = cli_field(None, "Torch device; default: GPU when present, else CPU")
    bf16: bool = cli_field(
        False,
        "Forward pass under bfloat16 autocast (weights, optimiser and losses stay fp32): about 1.6x faster "
        "on a CPU with native bfloat16 (AVX-512 BF16, AMX) or a GPU, slower on a CPU without it",
    )
    aspect_sides: tuple[str, ...] = cli_field(
        ("query", "document"),
        "Sides whose aspect losses count, comma-separated (madral-kdd22's ablation learns aspects on one)",
    )
    show_progress: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "aspect_sides", tuple(self.aspect_sides))
        if not self.aspect_sides or not set(self.aspect_sides) <= {"query", "document"}:
            raise ValueError(f"aspect_sides must name 'query', 'document' or both, got {self.aspect_sides}")
        if self.epochs < 1:
            raise ValueError(f"epochs must be >= 1, got {self.epochs}")
        if self.max_steps is not None and self.max_steps < 1:
            raise ValueError(f"max_steps must be >= 1 when set, got {self.max_steps}")
        if self.max_minutes is not None and not self.max_minutes > 0:
            raise ValueError(f"max_minutes must be > 0 when set, got {self.max_minutes}")
        for name in ("learning_rate", "head_learning_rate"):
            rate = getattr(self, name)
            if rate is not None and not 0 < rate < 1:
                raise ValueError(f"{name} must be in (0, 1), got {rate}")
        if not 0 <= self.warmup_fraction < 1:
            raise ValueError("warmup_fraction must be in [0, 1)")
        if self.frozen_layers < 0:
            raise ValueError(f"frozen_layers must be >= 0, got {self.frozen_layers}")
        if self.checkpoint_every < 0:
            raise ValueError("checkpoint_every must be >= 0 (0 = at the end only)")


@dataclass(frozen=True)
class TrainingConfig(LoopSettings):
    """How long and how to fine-tune.

    The effective batch is `batch_size * gradient_accumulation` queries; each
    brings one positive and one hard negative, and every other document in the
    micro-batch is an in-batch negative.

    The loss is Eq. 8 of madral-kdd22: L_SCE (in-batch softmax, with the hard
    negatives) + `pointwise_loss_weight` * L_CE (each query against its positive
    and its hard negative) + `aspect_loss_weight` (λf) * the aspect losses of both
    sides. The reproducibility study found λf = 0 best, hence the default.

    The model written is the one with the best validation MRR@10 (`model.training.validation`),
    measured every `validate_every` steps (0: once per epoch) and at the end. With
    `patience` > 0, training stops after that many validations without improvement, so
    `epochs` is a ceiling.

    `head_learning_rate` is AdamW's rate for the layers above the backbone (aspect
    extraction, heads, fusion, projection); None uses `learning_rate` for everything.

    `wise_ft_alpha` < 1 averages the selected model's weights with the zero-shot backbone's after
    training (`model.interpolation`, WiSE-FT): the shipped recipe's 0.5 keeps the fine-tuned gain and
    the backbone's recall (docs/RESULTS.md, "zero-shot"). `head_refit_epochs` then refits the aspect
    heads on the averaged encoder (`pipelines.train.head_refit`).
    """

    # `help` metadata makes a field a flag of `madr train` (pipelines/settings/stage_config.py generates
    # them).
    batch_size: int = cli_field(32, "Queries per micro-batch")
    gradient_accumulation: int = cli_field(1, "Micro-batches per optimiser step")
    pointwise_loss_weight: float = cli_field(1.0, "Weight of L_CE over judged pairs (Eq. 8)")
    aspect_loss_weight: float = cli_field(0.0, "λf of Eq. 8 on the aspect losses (repro: 0 is best)")
    hard_negatives: int = cli_field(1, "Hard negatives per query (0: in-batch only)", choices=(0, 1))
    validate_every: int = cli_field(0, "Steps between validations (0: once per epoch)")
    patience: int = cli_field(
        0, "Stop after this many validations without a better validation MRR@10; 0: never"
    )
    wise_ft_alpha: float = cli_field(
        1.0,
        "After training, average the weights with the backbone used zero-shot: α·fine-tuned + "
        "(1 − α)·zero-shot (WiSE-FT; needs pooling=mean, projection_init=identity); 1: no averaging",
    )
    head_refit_epochs: int = cli_field(
        0,
        "After training (and averaging), refit the aspect prediction heads on the encoder as saved: N passes "
        "over the dataset's products outside the held-out share (pipelines/train/head_refit.py); 0: none",
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.batch_size < 2:
            raise ValueError("batch_size must be >= 2: in-batch negatives need other queries")
        if self.gradient_accumulation < 1:
            raise ValueError("gradient_accumulation must be >= 1")
        if self.pointwise_loss_weight < 0 or self.aspect_loss_weight < 0:
            raise ValueError("loss weights must be >= 0")
        if self.hard_negatives not in (0, 1):
            raise ValueError(f"hard_negatives must be 0 or 1 per query, got {self.hard_negatives}")
        if self.patience < 0:
            raise ValueError(f"patience must be >= 0 (0 = never stop early), got {self.patience}")
        if self.validate_every < 0:
            raise ValueError("validate_every must be >= 0 (0 = once per epoch)")
        if self.head_refit_epochs < 0:
            raise ValueError(f"head_refit_epochs must be >= 0, got {self.head_refit_epochs}")
        if not 0 <= self.wise_ft_alpha <= 1:
            raise ValueError(f"wise_ft_alpha must be in [0, 1], got {self.wise_ft_alpha}")


Annotations = Mapping[str, Sequence[str]] | None


@dataclass(frozen=True)
class QueryExamples:
    """One training query with its judged documents' texts and, optionally, aspect annotations.

    Each step samples one positive and, when there is one, one hard negative, so a
    query never meets its own other positives as in-batch negatives. Annotation
    tuples run parallel to the text tuples; empty means "not annotated".
    """

    query: str
    positives: tuple[str, ...]
    hard_negatives: tuple[str, ...] = ()
    query_aspects: Annotations = None
    positive_aspects: tuple[Annotations, ...] = ()
    negative_aspects: tuple[Annotations, ...] = ()

    def __post_init__(self) -> None:
        if not self.positives:
            raise ValueError(f"query {self.query!r} has no positive document to train on")
        for texts, labels in (
            (self.positives, self.positive_aspects),
            (self.hard_negatives, self.negative_aspects),
        ):
            if labels and len(labels) != len(texts):
                raise ValueError(f"query {self.query!r}: aspect annotations must run parallel to the texts")

    def positive(self, index: int) -> tuple[str, Annotations]:
        return self.positives[index], self.positive_aspects[index] if self.positive_aspects else None

    def negative(self, index: int) -> tuple[str, Annotations]:
        return self.hard_negatives[index], self.negative_aspects[index] if self.negative_aspects else None
