"""What `madr train` and `madr pretrain` share: which model to build, on what data, and its flags.

`EncoderJob` holds the dataset, the output directory and the model's settings; the
train and pretrain jobs extend it with their own fields. One argument group and one
function turn it into a fresh encoder, so the two commands cannot drift apart.
"""

from __future__ import annotations

import json
import logging
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from transformers import PreTrainedTokenizerBase

from model import VARIANTS, DenseEncoder, new_encoder
from model.aspects.vocabulary import AspectVocabulary
from model.training.checkpoints import checkpoint_dir
from pipelines.layout import DatasetLayout
from pipelines.settings.stage_config import output_setting, overwrite_setting, setting
from pipelines.train.vocabulary import run_build_vocabulary
from schemas import ECOMMERCE_ASPECTS, AspectSchema, write_manifest
from schemas.splits import HeldOutProducts

LOGGER = logging.getLogger(__name__)


@contextmanager
def seeded(seed: int) -> Iterator[None]:
    """Random initialisation as a function of `seed`, the global torch generator left as it was.

    A new model's random layers (projections, heads) were drawn from the process's unseeded
    generator, so two runs of the same command differed (the demo's recall@100 0.943 / 0.934).
    """
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield


def parse_variant_options(items: Sequence[str]) -> tuple[tuple[str, Any], ...]:
    """["fusion=cls_gating", "dimensions=4096"] -> (("fusion", "cls_gating"), ("dimensions", 4096))."""
    options = []
    for item in items:
        key, separator, text = item.partition("=")
        if not separator or not key:
            raise ValueError(f"--variant_option {item!r} must look like KEY=VALUE")
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            value = text
        options.append((key.strip(), value))
    return tuple(options)


@dataclass(frozen=True)
class EncoderJob:
    """The data, the output directory and the settings of the encoder a job builds.

    Each `setting` field is also the flag of that name of the commands that build an encoder.
    """

    dataset: str = setting("", "Dataset folder (products/, queries.parquet, ...)", required=True, flag="data")
    output: str = output_setting("Model directory to write")
    variant: str = setting("bibert", "Encoder variant (default: %(default)s)", choices=sorted(VARIANTS))
    backbone: str | None = setting(None, "BERT folder to start from (default: the bundled MiniLM)")
    model_version: str = setting("1", "Version stamped on every embedding row")
    projection_dim: int | None = setting(
        None, "Embedding size (default: the variant's: 128, or the hidden size with projection_init=identity)"
    )
    separate_towers: bool = setting(False, "Separate query and document encoders")
    aspects: tuple[str, ...] = setting(ECOMMERCE_ASPECTS, "Aspect names (default: %(default)s)")
    max_query_length: int = setting(32, "Query truncation, in wordpieces")
    max_document_length: int = setting(128, "Product truncation, in wordpieces")
    min_aspect_count: int = setting(2, "Drop aspect values seen in fewer records (§8.1)")
    variant_options: tuple[tuple[str, Any], ...] = setting(
        (),
        "A field of the variant's config, e.g. fusion=cls_gating or dimensions=4096 (repeatable; values are "
        "JSON when they parse as JSON); the config validates it",
        flag="variant_option",
        repeated=True,
        metavar="KEY=VALUE",
        parse=parse_variant_options,
    )
    random_aspect_init: bool = setting(
        False,
        "Leave the aspect value tables and aspect queries at their random initialisation instead of the "
        "backbone's states for the value names (model.aspects.initialisation; an ablation)",
    )
    # Replace a model directory that already holds files (`staged_output.fresh_output`).
    overwrite: bool = overwrite_setting()

    def __post_init__(self) -> None:
        AspectSchema(tuple(self.aspects))  # names the aspect that is not a valid name

    @property
    def shared_towers(self) -> bool:
        return not self.separate_towers

    @property
    def initialise_aspects(self) -> bool:
        return not self.random_aspect_init

    def encoder_settings(self) -> dict[str, Any]:
        """The variant config's fields; --variant_option is the most specific, so it wins."""
        settings: dict[str, Any] = {
            "model_id": self.variant,
            "model_version": self.model_version,
            "shared_towers": self.shared_towers,
            "aspects": self.aspects,
            "max_query_length": self.max_query_length,
            "max_document_length": self.max_document_length,
        }
        if self.projection_dim is not None:
            settings["projection_dim"] = self.projection_dim
        settings.update(self.variant_options)
        return settings

    def new_encoder_for_dataset(
        self, held_out: HeldOutProducts | None = None, query_splits: Sequence[str] = ("train",)
    ) -> tuple[DenseEncoder, PreTrainedTokenizerBase, AspectVocabulary]:
        """A fresh encoder on the job's backbone, its heads sized by the aspect vocabulary of what it
        trains on: the dataset's products outside `held_out` and its queries of `query_splits`."""
        layout = DatasetLayout(self.dataset)
        with tempfile.TemporaryDirectory() as scratch:
            vocabulary = run_build_vocabulary(
                layout.products,
                layout.queries,
                self.aspects,
                self.min_aspect_count,
                f"{scratch}/v.json",
                held_out=held_out,
                query_splits=query_splits,
            )
        LOGGER.info("aspect vocabulary sizes: %s", vocabulary.sizes())
        return (*self.new_encoder(vocabulary), vocabulary)

    def write_model_manifest(self, info: dict[str, Any]) -> None:
        """The model folder's manifest (kind "madr-model"): what every trained model records, then `info`."""
        common = {
            "variant": self.variant,
            "variant_options": dict(self.variant_options),
            "model_version": self.model_version,
            "dataset": self.dataset,
        }
        write_manifest(Path(self.output), kind="madr-model", info={**common, **info})

    def new_encoder(self, vocabulary: AspectVocabulary) -> tuple[DenseEncoder, PreTrainedTokenizerBase]:
        return new_encoder(
            self.variant,
            backbone_path=self.backbone,
            vocabulary=vocabulary,
            initialise_aspects=self.initialise_aspects,
            **self.encoder_settings(),
        )


def require_dataset(job: EncoderJob) -> None:
    """FileNotFoundError naming `--data` when the job's dataset folder has no products: checked when a
    command's config is made, before a model is built."""
    DatasetLayout(job.dataset).require_products()


def has_checkpoint(folder: str) -> bool:
    """Whether an interrupted run left a checkpoint in `folder` to resume from.

    `staged_output.fresh_output` keeps such a staging folder for the rerun (which refuses the checkpoint
    of another run, by its fingerprint); one without a checkpoint holds nothing to resume and is cleared.
    """
    return checkpoint_dir(folder).is_dir()
