"""`madr train`: fine-tune a variant on a dataset folder and write a model directory."""

from __future__ import annotations

import argparse
import logging
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from model import new_encoder
from model.training import Trainer, TrainingConfig, TrainingReport
from pipelines.training_data import load_training_set
from schemas import AspectSchema, write_manifest

LOGGER = logging.getLogger(__name__)


@dataclass(frozen=True)
class TrainJob:
    """What to train on and where to write it; the model and loop settings are separate dataclasses."""

    dataset: str
    output: str
    variant: str = "bibert"
    backbone: str | None = None
    model_version: str = "1"
    projection_dim: int = 128
    shared_towers: bool = True
    aspects: AspectSchema = field(default_factory=AspectSchema)
    max_train_queries: int | None = None
    max_query_length: int = 32
    max_document_length: int = 128


def add_train_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--data", required=True, help="Dataset folder (products/, queries.parquet, judgments.parquet)"
    )
    parser.add_argument("--out", required=True, help="Model directory to write")
    parser.add_argument("--variant", default="bibert", help="Encoder variant (default: %(default)s)")
    parser.add_argument(
        "--backbone", default=None, help="BERT folder to start from (default: the bundled MiniLM)"
    )
    parser.add_argument("--model_version", default="1", help="Version stamped on every embedding row")
    parser.add_argument(
        "--projection_dim", type=int, default=128, help="Embedding size (default: %(default)s)"
    )
    parser.add_argument("--separate_towers", action="store_true", help="Separate query and document encoders")
    parser.add_argument(
        "--aspects", default="category,brand,color", help="Aspect names (default: %(default)s)"
    )
    parser.add_argument("--epochs", type=int, default=1, help="Passes over the training queries")
    parser.add_argument("--max_steps", type=int, default=None, help="Stop after this many optimiser steps")
    parser.add_argument(
        "--batch_size", type=int, default=32, help="Queries per micro-batch (default: %(default)s)"
    )
    parser.add_argument("--grad_accumulation", type=int, default=1, help="Micro-batches per optimiser step")
    parser.add_argument("--learning_rate", type=float, default=5e-5, help="AdamW learning rate")
    parser.add_argument("--checkpoint_every", type=int, default=0, help="Steps between resumable checkpoints")
    parser.add_argument("--seed", type=int, default=13, help="Seed of data order, sampling and init")
    parser.add_argument("--max_train_queries", type=int, default=None, help="Use at most this many queries")
    parser.add_argument("--device", default=None, help="Torch device; default: GPU when present, else CPU")


def train_from_args(args: argparse.Namespace) -> TrainingReport:
    job = TrainJob(
        dataset=args.data,
        output=args.out,
        variant=args.variant,
        backbone=args.backbone,
        model_version=args.model_version,
        projection_dim=args.projection_dim,
        shared_towers=not args.separate_towers,
        aspects=AspectSchema.parse(args.aspects),
        max_train_queries=args.max_train_queries,
        max_query_length=args.max_query_length,
        max_document_length=args.max_document_length,
    )
    loop = TrainingConfig(
        epochs=args.epochs,
        max_steps=args.max_steps,
        batch_size=args.batch_size,
        gradient_accumulation=args.grad_accumulation,
        learning_rate=args.learning_rate,
        checkpoint_every=args.checkpoint_every,
        seed=args.seed,
        device=args.device,
    )
    return run_training(job, loop)


def run_training(job: TrainJob, loop: TrainingConfig) -> TrainingReport:
    train = load_training_set(job.dataset, "train")
    valid = load_training_set(job.dataset, "valid")
    examples = train.examples[: job.max_train_queries] if job.max_train_queries else train.examples
    LOGGER.info("training on %d queries, validating on %d", len(examples), len(valid.examples))
    encoder, tokenizer = new_encoder(
        job.variant,
        backbone_path=job.backbone,
        model_id=job.variant,
        model_version=job.model_version,
        projection_dim=job.projection_dim,
        shared_towers=job.shared_towers,
        aspects=job.aspects.names,
        max_query_length=job.max_query_length,
        max_document_length=job.max_document_length,
    )
    trainer = Trainer(encoder, tokenizer, loop, job.output)
    report = trainer.fit(examples, valid.examples)
    # Checkpoints only serve to resume an interrupted run; the finished artifact is the selected model.
    shutil.rmtree(trainer.checkpoint_dir.parent, ignore_errors=True)
    write_manifest(
        Path(job.output),
        kind="madr-model",
        info={
            "variant": job.variant,
            "model_version": job.model_version,
            "dataset": job.dataset,
            "train_queries": len(examples),
            "valid_queries": len(valid.examples),
            "steps": report.steps,
            "best_step": report.best_step,
            "best_valid_loss": report.best_valid_loss,
            "final_train_loss": report.final_train_loss,
        },
    )
    return report
