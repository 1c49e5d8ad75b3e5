"""What one variant of `madr experiment` is pre-trained and fine-tuned with.

Two profiles of settings:

- the budget (`--profile default` or `full`): every variant gets the experiment's own steps, batch,
  truncation and loss weights, one shared encoder for queries and documents, and its registry entry's
  budget options (UHD at 8,192 × 1 bucket); the MADRAL family keeps all of the backbone's layers unless
  `--paper_layer_drop` asks for madral-kdd22 §7.2's drop (on MiniLM-L6 it collapses CLS);
- the papers (`--profile paper`, `ExperimentConfig.paper_settings`): each variant gets the preset of the
  paper its registry entry names (`ExperimentRole.paper_preset`, `pipelines.train.presets`): separate
  or shared towers, truncation, losses, rates and variant options as that paper says, and it is
  pre-trained when that paper pre-trains it (`ExperimentRole.paper_pretraining`). Its pre-trained model is
  kept per source and preset, so variants that share one in the paper share it here too.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from model.registry import drops_last_layer_by_default, experiment_role, learns_aspects_by_default
from model.training import TrainingConfig
from pipelines.train.encoder_job import parse_variant_options
from pipelines.train.presets import PRESETS, Preset
from schemas import ECOMMERCE_ASPECTS


class TrainingBudget(Protocol):
    """What a variant's training reads from an experiment's config (`jobs.experiment_config.ExperimentConfig`
    has these fields, and the generator's settings besides, which this room may not import)."""

    epochs: int
    patience: int
    batch_size: int
    seed: int
    aspect_loss_weight: float
    aspect_sides: tuple[str, ...]
    head_learning_rate: float | None
    paper_settings: bool
    paper_layer_drop: bool
    max_document_length: int
    aspects: tuple[str, ...]


@dataclass(frozen=True)
class VariantTraining:
    """One variant's pre-training and fine-tuning in an experiment.

    Attributes:
        pretrained_from: the variant whose pre-trained model it fine-tunes from (None: the backbone).
        pretrained_name: that model's folder under the experiment's pretrained/ (source, and the preset
            under the paper profile, whose settings the pre-trained model keeps).
        model: `EncoderJob` fields of both pre-training and fine-tuning (towers, truncation, options).
        pretraining: `PretrainingConfig` changes the paper asks for (empty under the budget).
        loop: the fine-tuning loop.
        embeddings_from: a model folder, relative to the experiment root, whose word embeddings it
            starts from (DSSM: BiBERT's), or None.
        preset: the paper preset applied, or None under the budget.
    """

    pretrained_from: str | None
    pretrained_name: str | None
    model: dict[str, Any]
    pretraining: dict[str, Any]
    loop: TrainingConfig
    embeddings_from: str | None
    preset: str | None


def variant_training(config: TrainingBudget, variant: str) -> VariantTraining:
    """How `variant` is trained under `config`'s profile (see the module)."""
    role = experiment_role(variant)
    learns_aspects = learns_aspects_by_default(variant)
    loop = TrainingConfig(
        epochs=config.epochs,
        patience=config.patience,
        batch_size=config.batch_size,
        seed=config.seed,
        aspect_loss_weight=config.aspect_loss_weight if learns_aspects else 0.0,
        aspect_sides=config.aspect_sides,
        head_learning_rate=config.head_learning_rate,
        pointwise_loss_weight=1.0 if role.pointwise_loss else 0.0,
    )
    preset: Preset | None = (
        PRESETS[role.paper_preset] if config.paper_settings and role.paper_preset else None
    )
    if preset is None:
        options, name = role.budget_options, _ablation_name(role.pretrained_from, config)
        if drops_last_layer_by_default(variant):
            # The budget keeps every layer unless asked (`ExperimentConfig.paper_layer_drop`); a pre-trained
            # model is kept per layer setting, so the ablation never fine-tunes from the other's.
            options = (*options, ("drop_last_layer", config.paper_layer_drop))
            name = f"{name}-paper-layers" if name and config.paper_layer_drop else name
        return VariantTraining(
            pretrained_from=role.pretrained_from,
            pretrained_name=name,
            model={
                "max_document_length": config.max_document_length,
                "aspects": config.aspects,
                "variant_options": options,
            },
            pretraining={},
            loop=loop,
            # The fine-tuned BiBERT's word embeddings: the budget shortcut (madral-kdd22 §8.2 starts DSSM from
            # the pre-trained one).
            embeddings_from=f"{role.embeddings_from}/model" if role.embeddings_from else None,
            preset=None,
        )
    source = role.paper_pretraining or role.pretrained_from
    train = preset.train_settings(variant)
    name = _ablation_name(f"{source}-{preset.name}", config) if source else None
    return VariantTraining(
        pretrained_from=source,
        pretrained_name=name,
        model={
            **preset.model,
            "aspects": config.aspects,
            "variant_options": (*parse_variant_options(list(preset.variant_options)), *role.paper_options),
        },
        pretraining=dict(preset.pretrain),
        loop=dataclasses.replace(loop, **train),
        embeddings_from=(
            f"pretrained/{role.embeddings_from}-{preset.name}" if role.embeddings_from else None
        ),
        preset=preset.name,
    )


def _ablation_name(name: str | None, config: TrainingBudget) -> str | None:
    """A pre-trained model's folder name, marked with the aspects it learns when they are not all of the
    benchmark's, the side it learns them on when only one, and the share of annotated products when not
    all, so that an ablation never fine-tunes from a model that learnt what it leaves out."""
    if name is None:
        return None
    if config.aspects != ECOMMERCE_ASPECTS:
        name = f"{name}-{'-'.join(config.aspects)}"
    if len(config.aspect_sides) == 1:
        name = f"{name}-{config.aspect_sides[0]}-side"
    if config.annotated_share < 1.0:
        name = f"{name}-annotated-{config.annotated_share:g}"
    return name


def embeddings_source(training: VariantTraining, root: Path) -> Path | None:
    """The model folder whose word embeddings the variant starts from, when it is there."""
    if training.embeddings_from is None:
        return None
    folder = root / training.embeddings_from
    return folder if (folder / "manifest.json").is_file() else None
