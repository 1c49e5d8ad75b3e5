"""`--preset`: what each paper fixes for its variant family, as `madr train` / `pretrain` flags.

A preset only fills in fields whose flag the user did not give, so any single flag overrides it
(`with_preset`, over the built job and loop configs).
Values the papers leave to tuning keep our defaults and say so. Each command reads
the part that concerns it: `train` the fine-tuning loss and loop, `pretrain` the
pre-training one; both read the model settings (towers, truncation, variant options).

- madral-kdd22 (§7-§8.2): separate towers; L_SCE + L_CE (Eq. 8); Eq. 7 unweighted; 32/128 wordpieces.
- repro-ecir24 (§7): shared towers; L_SCE with one hard negative; λp 0.1, λf 0; lr 1e-4 / 5e-6.
- mural-wsdm24 (§5.3): shared; L_SCE with one hard negative; λ 0.1 (MuralConfig); lr 1e-4 / 5e-6.
- uhd (uhd-bert §3.5, A.1): its hinge loss alone, in-batch negatives only; n 81,920, k 80,
  weight sparsity 0.7, six buckets.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field, fields, replace
from typing import Any, ClassVar, TypeVar

from model.registry import experiment_role, learns_aspects_by_default
from pipelines.settings.stage_config import setting
from pipelines.train.encoder_job import EncoderJob, parse_variant_options, require_dataset

Job = TypeVar("Job", bound=EncoderJob)
Loop = TypeVar("Loop")


@dataclass(frozen=True)
class Preset:
    """Flag values (argparse destinations) a paper fixes, for one command or both.

    Attributes:
        model: flags of the encoder both commands build (towers, truncation).
        variant_options: `--variant_option` KEY=VALUE pairs, applied before the user's own.
        train / pretrain: flags of `madr train` / `madr pretrain` only.
    """

    name: str
    paper: str
    model: dict[str, Any] = field(default_factory=dict)
    variant_options: tuple[str, ...] = ()
    train: dict[str, Any] = field(default_factory=dict)
    pretrain: dict[str, Any] = field(default_factory=dict)

    def train_settings(self, variant: str) -> dict[str, Any]:
        """The preset's fine-tuning settings for `variant`. madral-kdd22's λf is for its aspect variants:
        BiBERT, DSSM and MpBERT train under the same paper and learn none, so they get no aspect loss
        (the trainer refuses one)."""
        if learns_aspects_by_default(variant):
            return dict(self.train)
        return {**self.train, "aspect_loss_weight": 0.0}

    def describe(self) -> str:
        parts = [f"{k}={v}" for k, v in {**self.model, **self.train, **self.pretrain}.items()]
        parts += [f"variant_option {option}" for option in self.variant_options]
        return f"{self.name} ({self.paper}): " + ", ".join(parts)


PRESETS: dict[str, Preset] = {
    preset.name: preset
    for preset in (
        Preset(
            "madral-kdd22",
            "madral-kdd22 §7-§8.2",
            # §8.2: query and document encoders do not share parameters; truncation 32 / 128.
            model={"separate_towers": True, "max_query_length": 32, "max_document_length": 128},
            # Eq. 8: L_CE + L_SCE + λ·AL; λ is "tuned on validation": ours, 0.1.
            train={"pointwise_loss_weight": 1.0, "aspect_loss_weight": 0.1, "hard_negatives": 1},
            # Eq. 7 adds the aspect losses unweighted.
            pretrain={"aspect_weight": 1.0, "mask_probability": 0.15},
        ),
        Preset(
            "repro-ecir24",
            "madral-reproducibility-ecir24 §7",
            model={"separate_towers": False, "max_query_length": 32, "max_document_length": 156},
            train={
                "pointwise_loss_weight": 0.0,  # L_REL is the in-batch softmax with one hard negative
                "aspect_loss_weight": 0.0,  # λf = 0 was best (§8.4)
                "hard_negatives": 1,
                "learning_rate": 5e-6,
                "batch_size": 64,
                "epochs": 20,
            },
            pretrain={"aspect_weight": 0.1, "learning_rate": 1e-4, "epochs": 20, "mask_probability": 0.15},
        ),
        Preset(
            "mural-wsdm24",
            "mural-wsdm24 §5.3",
            model={"separate_towers": False, "max_query_length": 32, "max_document_length": 156},
            # λ of Eq. 9 (0.1) and the 0.15 / 0.3 mask ratios are MuralConfig's defaults.
            train={
                "pointwise_loss_weight": 0.0,
                "aspect_loss_weight": 0.0,
                "hard_negatives": 1,
                "learning_rate": 5e-6,
                "batch_size": 64,
                "epochs": 20,
            },
            pretrain={"learning_rate": 1e-4, "epochs": 20},
        ),
        Preset(
            "uhd",
            "uhd-bert §3.5, A.1",
            model={"max_query_length": 32, "max_document_length": 180},
            # Six buckets are UhdConfig's default (bucket_layers empty: spread over the depth, §4.2).
            variant_options=("dimensions=81920", "winners=80", "weight_sparsity=0.7"),
            # Eq. 8 alone (the variant's loss), in-batch negatives only: A.1 ignores the negative passages.
            train={
                "pointwise_loss_weight": 0.0,
                "hard_negatives": 0,
                "learning_rate": 5e-6,
                "batch_size": 32,
            },
        ),
    )
}

# `--preset paper`: the preset of the paper named by the variant's registry entry (`paper_preset`).
PAPER = "paper"

PRESET_HELP = (
    "Settings a paper fixes, under any flag given explicitly; 'paper' picks the variant's own paper. "
    + "; ".join(p.describe() for p in PRESETS.values())
)


def preset_setting() -> Any:
    """`--preset`: a field of the `madr train` / `pretrain` config (`with_preset` applies it)."""
    return setting(None, PRESET_HELP, choices=[PAPER, *sorted(PRESETS)])


def preset_for(name: str | None, variant: str) -> Preset | None:
    """The preset `name` means for `variant`: PRESETS[name], or with "paper" the one its paper fixes."""
    if name == PAPER:
        name = experiment_role(variant).paper_preset
    return PRESETS[name] if name else None


def with_preset(
    job: Job, loop: Loop, preset_name: str | None, command: str, explicit: Collection[str]
) -> tuple[Job, Loop]:
    """`job` (an `EncoderJob`) and `loop` (its loop's config) with the preset's values for `command`
    ("train" or "pretrain") in every field not given `explicit`ly; its variant options come before the
    job's own, so that the user's win."""
    preset = preset_for(preset_name, job.variant)
    if preset is None:
        return job, loop
    step = preset.train_settings(job.variant) if command == "train" else preset.pretrain
    values = {name: value for name, value in {**preset.model, **step}.items() if name not in explicit}
    options = (*parse_variant_options(list(preset.variant_options)), *job.variant_options)
    job = replace(job, **_fields_of(job, values), variant_options=options)
    return job, replace(loop, **_fields_of(loop, values))


class PresetRun:
    """What `madr train`'s and `madr pretrain`'s run configs share (mixed into each frozen dataclass, which
    declares `job`, `loop` and `preset`): the dataset checked when the run is made, and `--preset` applied
    under the flags written (the `then=` of their `@command`). `COMMAND`: "train" or "pretrain", the part
    of the preset the run reads."""

    COMMAND: ClassVar[str]
    job: Any
    loop: Any
    preset: str | None

    def __post_init__(self) -> None:
        require_dataset(self.job)

    def under_preset(self, written: Collection[str]) -> Any:
        """The run with `--preset`'s values in every field whose flag is not in `written`."""
        job, loop = with_preset(self.job, self.loop, self.preset, self.COMMAND, written)
        return replace(self, job=job, loop=loop)  # type: ignore[type-var]


def _fields_of(config: Any, values: dict[str, Any]) -> dict[str, Any]:
    names = {f.name for f in fields(config)}
    return {name: value for name, value in values.items() if name in names}
