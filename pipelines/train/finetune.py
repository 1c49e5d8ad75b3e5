"""`madr train`: fine-tune a variant on a dataset folder and write a model directory."""

from __future__ import annotations

import dataclasses
import json
import logging
import shutil
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, ClassVar

from transformers import PreTrainedTokenizerBase

from model import DenseEncoder, load_config, load_encoder, text_for_model
from model.aspects.vocabulary import VOCABULARY_FILE, AspectVocabulary
from model.interpolation import average_saved_model
from model.training import Trainer, TrainingConfig, TrainingReport
from model.training.validation import VALIDATION_METRIC
from pipelines.layout import DatasetLayout
from pipelines.settings.stage_config import input_checks, nested, setting
from pipelines.storage.staged_output import fresh_output
from pipelines.storage.verify import verify_model
from pipelines.train.calibrate import calibrate_on_catalog
from pipelines.train.encoder_job import (
    EncoderJob,
    has_checkpoint,
    seeded,
)
from pipelines.train.head_refit import refit_aspect_heads
from pipelines.train.presets import PresetRun, preset_setting
from pipelines.train.training_data import load_training_set
from schemas.manifest import MANIFEST_FILE
from schemas.splits import HeldOutProducts

LOGGER = logging.getLogger(__name__)


@dataclass(frozen=True)
class TrainJob(EncoderJob):
    """What to fine-tune on and where to write it; the loop's settings are a separate dataclass."""

    max_train_queries: int | None = setting(None, "Use at most this many queries")
    init_from: str | None = setting(
        None,
        "Fine-tune this model directory (written by `madr pretrain`) instead of a fresh model on --backbone; "
        "it keeps its architecture, settings and aspect vocabulary",
    )
    # Check `init_from` against its manifest before loading it; False only under --no_verify.
    verify: bool = input_checks()


@dataclass(frozen=True)
class TrainRun(PresetRun):
    """`madr train`: what to fine-tune and where (`TrainJob`), and the loop's settings; its flags are theirs
    and `--preset`'s."""

    job: TrainJob = nested()
    loop: TrainingConfig = nested()
    preset: str | None = preset_setting()

    COMMAND: ClassVar[str] = "train"


def load_pretrained_encoder(
    job: TrainJob, device: str | None = None
) -> tuple[DenseEncoder, PreTrainedTokenizerBase, dict[str, int] | None]:
    """The encoder of `job.init_from`, its tokenizer and, from its manifest, its aspect vocabulary sizes.

    The directory fixes the architecture and settings; only `model_version` is the job's.
    A model of another variant is refused; other settings that differ are logged and ignored.
    """
    directory = Path(str(job.init_from))
    config = load_config(directory)  # names the problem when DIR is no model directory
    if config.variant != job.variant:
        return _warm_started_encoder(job, directory, config.variant)
    wanted = {
        **({"projection_dim": job.projection_dim} if job.projection_dim is not None else {}),
        "shared_towers": job.shared_towers,
        "aspects": list(job.aspects),
        "max_query_length": job.max_query_length,
        "max_document_length": job.max_document_length,
        **dict(job.variant_options),
    }
    saved = config.to_dict()
    ignored = {
        name: saved.get(name)
        for name, value in wanted.items()
        # None asks for the variant's default (projection_dim=None: the hidden size), which the saved
        # config has resolved: nothing to compare.
        if value is not None and json.loads(json.dumps(value)) != saved.get(name)
    }
    if ignored:
        LOGGER.warning(
            "--init_from %s keeps its own settings %s; the job's differ and are ignored", directory, ignored
        )
    encoder, tokenizer = load_encoder(directory, device=device)
    encoder.config = encoder.config.replace(model_version=job.model_version)
    manifest_path = directory / MANIFEST_FILE
    sizes = (
        json.loads(manifest_path.read_text()).get("aspect_vocabulary_sizes")
        if manifest_path.is_file()
        else None
    )
    return encoder, tokenizer, sizes


def run_training(job: TrainJob, loop: TrainingConfig) -> TrainingReport:
    """Fine-tune into `job.output`, which appears only once the model and its manifest are whole.

    A non-empty `job.output` is refused unless `job.overwrite`. Training writes into the staging
    folder of `staged_output.fresh_output`, which an interrupted run leaves behind with its checkpoints:
    the same command run again resumes from them. An `init_from` model is checked against its
    manifest first (`pipelines.storage.verify`), before anything is written.
    """
    if job.init_from:
        verify_model(job.init_from, job.verify)
    with fresh_output(job.output, job.overwrite, resumable=has_checkpoint) as staging:
        report = _train(dataclasses.replace(job, output=staging), loop)
    return dataclasses.replace(report, model_dir=Path(job.output))


def _train(job: TrainJob, loop: TrainingConfig) -> TrainingReport:
    with seeded(loop.seed):
        if job.init_from:
            encoder, tokenizer, vocabulary_sizes = load_pretrained_encoder(job, loop.device)
        else:
            encoder, tokenizer, vocabulary_sizes = _new_job_encoder(job)
    text_of = partial(text_for_model, config=encoder.config)
    train = load_training_set(job.dataset, "train", text_of)
    valid = load_training_set(job.dataset, "valid", text_of)
    examples = train.examples[: job.max_train_queries] if job.max_train_queries else train.examples
    LOGGER.info("training on %d queries, validating on %d", len(examples), len(valid.examples))
    trainer = Trainer(encoder, tokenizer, loop, job.output)
    report = trainer.fit(examples, valid.examples)
    # Checkpoints only serve to resume an interrupted run; the finished artifact is the selected model.
    shutil.rmtree(trainer.checkpoint_dir.parent, ignore_errors=True)
    average_saved_model(job.output, loop.wise_ft_alpha, job.backbone)
    inherited = _inherited_from_init(job)
    refit, calibrated = None, {}
    held_out = HeldOutProducts.from_manifest(inherited)
    if loop.head_refit_epochs:
        refit = refit_aspect_heads(job.output, job.dataset, held_out, loop.head_refit_epochs, loop.seed)
    if held_out is not None and held_out.fraction > 0:  # products pre-training never read calibrate P(x)
        share, temperatures = calibrate_on_catalog(job.output, DatasetLayout(job.dataset), held_out)
        calibrated = {"calibrated_on_products": share.to_dict(), "aspect_temperatures": temperatures}
    job.write_model_manifest(
        {
            "init_from": job.init_from,
            **inherited,
            **calibrated,
            **({"head_refit": {"epochs": loop.head_refit_epochs, **vars(refit)}} if refit else {}),
            "aspect_vocabulary_sizes": vocabulary_sizes,
            "loss": {"pointwise": loop.pointwise_loss_weight, "aspect": loop.aspect_loss_weight},
            "wise_ft_alpha": loop.wise_ft_alpha,
            "train_queries": len(examples),
            "valid_queries": len(valid.examples),
            "steps": report.steps,
            "best_step": report.best_step,
            "best_valid_metric": {VALIDATION_METRIC: report.best_valid_metric},
            "final_train_loss": report.final_train_loss,
        }
    )
    return report


def _inherited_from_init(job: TrainJob) -> dict[str, Any]:
    """What the init model's manifest says about the data it saw, so evaluation can hold it out.

    Fine-tuning reads only the judged products of the train and valid queries, which evaluation
    leaves out by itself; the products pre-training held out stay unseen.
    """
    if not job.init_from:
        return {}
    path = Path(str(job.init_from)) / MANIFEST_FILE
    manifest = json.loads(path.read_text()) if path.is_file() else {}
    return {key: manifest[key] for key in ("held_out_products", "pretrained") if key in manifest}


def _warm_started_encoder(
    job: TrainJob, directory: Path, source_variant: str
) -> tuple[DenseEncoder, PreTrainedTokenizerBase, dict[str, int]]:
    """A new `job.variant` encoder that takes every matching tensor of another variant's model.

    repro-ecir24 fine-tunes en-v1 and "Only CLS" from MADRAL-ori's pre-trained model
    (§5.2, §8.1); a model whose transformer does not match is refused, since nothing
    pre-trained would carry over.

    The new encoder takes the source's aspect vocabulary, as MADRAL's own fine-tuning keeps it, so
    en-v1 and MADRAL differ only in their fusion. (The heads are copied row by value either way,
    `copy_value_rows`; before that, a vocabulary built again from the job's data, counted over other
    products, gave en-v1's values each other's rows: held-out category Acc@1 0.16 against 0.94.)
    """
    source_file = directory / VOCABULARY_FILE
    vocabulary = AspectVocabulary.load(source_file) if source_file.is_file() else None
    if vocabulary is not None and set(job.aspects) <= set(vocabulary.aspects):
        encoder, tokenizer = job.new_encoder(vocabulary)
        sizes = vocabulary.sizes(job.aspects)
    else:
        encoder, tokenizer, sizes = _new_job_encoder(job)
    left = encoder.warm_start_from(directory)
    backbone_left = [name for name in left if name.startswith("transformers.")]
    if backbone_left:
        raise ValueError(
            f"--init_from {directory} holds a {source_variant!r} model whose transformer does not fit a "
            f"{job.variant!r} model (e.g. {backbone_left[0]}): fine-tune it with --variant {source_variant}, "
            f"or pre-train a {job.variant} model"
        )
    LOGGER.info(
        "warm start of %s from the %s model in %s; left at initialisation: %s",
        job.variant,
        source_variant,
        directory,
        left or "nothing",
    )
    return encoder, tokenizer, sizes


def _new_job_encoder(job: TrainJob) -> tuple[DenseEncoder, PreTrainedTokenizerBase, dict[str, int]]:
    """A fresh encoder on the job's backbone, its heads sized by the dataset's aspect vocabulary."""
    encoder, tokenizer, vocabulary = job.new_encoder_for_dataset()
    return encoder, tokenizer, vocabulary.sizes()
