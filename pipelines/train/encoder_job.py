"""What `madr train` and `madr pretrain` share: which model to build, on what data, and its flags.

`EncoderJob` holds the dataset, the output directory and the model's settings; the
train and pretrain jobs extend it with their own fields. One argument group and one
function turn it into a fresh encoder, so the two commands cannot drift apart.
"""

from __future__ import annotations

import argparse
import json
import logging
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from transformers import PreTrainedTokenizerBase

from model import VARIANTS, DenseEncoder, new_encoder
from model.aspects.vocabulary import AspectVocabulary
from model.training.checkpoints import checkpoint_dir
from pipelines.layout import DatasetLayout
from pipelines.options import OverwriteOptions, add_stage_arguments
from pipelines.stage_config import add_output_argument
from pipelines.train.vocabulary import run_build_vocabulary
from schemas import AspectSchema, write_manifest

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


@dataclass(frozen=True)
class EncoderJob:
    """The data, the output directory and the settings of the encoder a job builds."""

    dataset: str
    output: str
    variant: str = "bibert"
    backbone: str | None = None
    model_version: str = "1"
    # None: the variant's own (128 for the papers' variants; the hidden size with an identity projection).
    projection_dim: int | None = None
    shared_towers: bool = True
    aspects: AspectSchema = field(default_factory=AspectSchema)
    max_query_length: int = 32
    max_document_length: int = 128
    min_aspect_count: int = 2
    variant_options: tuple[tuple[str, Any], ...] = ()
    # Start aspect layers from the backbone's states for the value names (model.aspects.initialisation).
    initialise_aspects: bool = True
    # Replace a model directory that already holds files (`artifacts.fresh_output`).
    overwrite: bool = False

    def encoder_settings(self) -> dict[str, Any]:
        """The variant config's fields; --variant_option is the most specific, so it wins."""
        settings: dict[str, Any] = {
            "model_id": self.variant,
            "model_version": self.model_version,
            "shared_towers": self.shared_towers,
            "aspects": self.aspects.names,
            "max_query_length": self.max_query_length,
            "max_document_length": self.max_document_length,
        }
        if self.projection_dim is not None:
            settings["projection_dim"] = self.projection_dim
        settings.update(self.variant_options)
        return settings

    def new_encoder_for_dataset(self) -> tuple[DenseEncoder, PreTrainedTokenizerBase, AspectVocabulary]:
        """A fresh encoder on the job's backbone, its heads sized by the dataset's aspect vocabulary."""
        layout = DatasetLayout(self.dataset)
        with tempfile.TemporaryDirectory() as scratch:
            vocabulary = run_build_vocabulary(
                layout.products,
                layout.queries,
                self.aspects.names,
                self.min_aspect_count,
                f"{scratch}/v.json",
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


def add_encoder_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of `EncoderJob`, for every command that builds an encoder."""
    parser.add_argument("--data", required=True, help="Dataset folder (products/, queries.parquet, ...)")
    add_output_argument(parser, required=True, help="Model directory to write")
    parser.add_argument(
        "--variant", default="bibert", choices=sorted(VARIANTS), help="Encoder variant (default: %(default)s)"
    )
    parser.add_argument(
        "--backbone", default=None, help="BERT folder to start from (default: the bundled MiniLM)"
    )
    parser.add_argument("--model_version", default="1", help="Version stamped on every embedding row")
    parser.add_argument(
        "--projection_dim",
        type=int,
        default=None,
        help="Embedding size (default: the variant's: 128, or the hidden size with projection_init=identity)",
    )
    parser.add_argument("--separate_towers", action="store_true", help="Separate query and document encoders")
    parser.add_argument(
        "--aspects", default="category,brand,color", help="Aspect names (default: %(default)s)"
    )
    parser.add_argument(
        "--variant_option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="A field of the variant's config, e.g. fusion=cls_gating or dimensions=4096 (repeatable; "
        "values are JSON when they parse as JSON); the config validates it",
    )
    parser.add_argument(
        "--min_aspect_count", type=int, default=2, help="Drop aspect values seen in fewer records (§8.1)"
    )
    parser.add_argument(
        "--random_aspect_init",
        action="store_true",
        help="Leave the aspect value tables and aspect queries at their random initialisation instead of "
        "the backbone's states for the value names (an ablation)",
    )
    parser.add_argument("--max_query_length", type=int, default=32, help="Query truncation, in wordpieces")
    parser.add_argument(
        "--max_document_length", type=int, default=128, help="Product truncation, in wordpieces"
    )
    add_stage_arguments(parser, OverwriteOptions)


def encoder_job_fields(args: argparse.Namespace) -> dict[str, Any]:
    """`EncoderJob`'s fields from the flags `add_encoder_arguments` declared."""
    return {
        "dataset": DatasetLayout(args.data).require_products(),
        "output": args.out,
        "variant": args.variant,
        "backbone": args.backbone,
        "model_version": args.model_version,
        "projection_dim": args.projection_dim,
        "shared_towers": not args.separate_towers,
        "aspects": AspectSchema.parse(args.aspects),
        "max_query_length": args.max_query_length,
        "max_document_length": args.max_document_length,
        "min_aspect_count": args.min_aspect_count,
        "variant_options": parse_variant_options(args.variant_option),
        "initialise_aspects": not args.random_aspect_init,
        "overwrite": args.overwrite,
    }


def parse_variant_options(items: list[str]) -> tuple[tuple[str, Any], ...]:
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


def has_checkpoint(folder: str) -> bool:
    """Whether an interrupted run left a checkpoint in `folder` to resume from.

    `artifacts.fresh_output` keeps such a staging folder for the rerun (which refuses the checkpoint
    of another run, by its fingerprint); one without a checkpoint holds nothing to resume and is cleared.
    """
    return checkpoint_dir(folder).is_dir()
