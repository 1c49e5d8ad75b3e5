"""What one `madr experiment` runs: its flags, profiles and the benchmark it generates.

`ExperimentConfig` declares every flag once (`pipelines.settings.stage_config` generates them); `--profile`
sets several at once, under any flag given explicitly. `jobs.experiment` runs it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from model.registry import EXPERIMENT_ROLES
from pipelines.experiment.pretraining import PretrainingPlan
from pipelines.settings.stage_config import nested, setting
from pipelines.train.pretrain import PRETRAIN_PRECISION_HELP, PRETRAIN_PRECISIONS
from product_data.synthetic import SyntheticConfig
from schemas import ECOMMERCE_ASPECTS
from schemas.splits import HeldOutProducts

DEFAULT_VARIANTS = tuple(EXPERIMENT_ROLES)

# What `--profile` sets, under any flag given explicitly. default: the 2-core hour (docs/RESULTS.md);
# full: two epochs of pre-training over the catalog and fine-tuning until validation stops improving.
# paper: each variant with its paper's settings (`pipelines.experiment.variant`), the new layers at their own
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
    pre-train each shared model (`pipelines.experiment.pretraining`); 0 turns it off. Each
    field is a flag of `madr experiment` (`pipelines.settings.stage_config`).
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
    run_archive: str | None = setting(
        None,
        "Folder that keeps each finished run's result (DIR/<seed>/<variant>.json.gz, a few hundred KB) and "
        "from which a run already there is read instead of run again: commit it, or copy it back from "
        "another machine, to spread one experiment's seeds over sessions (pipelines/experiment/runs.py)",
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


PROFILE_HELP = (
    "default: the budget that runs every variant in about an hour on 2 cores; full: "
    + ", ".join(f"{name}={value}" for name, value in PROFILES["full"].items())
    + "; paper: each variant with its paper's preset (--paper_settings), "
    + ", ".join(f"{k}={v}" for k, v in PROFILES["paper"].items() if k != "paper_settings")
    + " (a flag given explicitly wins)"
)


@dataclass(frozen=True)
class ExperimentRun:
    """`madr experiment`: the experiment, its (resumable) folder, and the `--profile` under its flags."""

    output: str = setting("runs/experiment", "Experiment folder (resumable)", aliases=("--out",))
    profile: str = setting("default", PROFILE_HELP, choices=sorted(PROFILES))
    experiment: ExperimentConfig = nested(ExperimentConfig)

    def under_profile(self, written: Collection[str]) -> ExperimentRun:
        """The run with `--profile`'s values in every field whose flag is not in `written`."""
        values = {k: v for k, v in PROFILES[self.profile].items() if k not in written}
        return dataclasses.replace(self, experiment=dataclasses.replace(self.experiment, **values))
