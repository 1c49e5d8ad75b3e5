"""`madr pretrain`, `train`, `adapt` and `extend-vocabulary`: making and changing a model."""

from __future__ import annotations

import argparse

from jobs.adapt import add_adapt_arguments, run_adapt_job
from jobs.command_table import command
from pipelines.stage_config import add_output_argument
from pipelines.train.extend_vocabulary import extend_vocabulary
from pipelines.train.finetune import add_train_arguments, train_from_args
from pipelines.train.presets import apply_preset, explicit_flags
from pipelines.train.pretrain import add_pretrain_arguments, pretrain_from_args
from schemas.manifest import MANIFEST_FILE


@command("pretrain", add_pretrain_arguments, show_defaults=True)
def _pretrain(args: argparse.Namespace, beam_args: list[str], stage_argv: list[str]) -> None:
    """Domain pre-training (madral-kdd22 Eq. 7): MLM plus the aspect losses of variants that learn
    aspects, on products (document side) and queries; `madr train --init_from` fine-tunes it."""
    apply_preset(args, "pretrain", explicit_flags(add_pretrain_arguments, stage_argv))
    pretrained = pretrain_from_args(args)
    print(
        f"pre-trained {pretrained.steps} steps; MLM loss {pretrained.initial.mlm:.4f} -> "
        f"{pretrained.final.mlm:.4f}, aspect loss {pretrained.initial.aspect:.4f} -> "
        f"{pretrained.final.aspect:.4f}; model in {pretrained.model_dir}"
    )


@command("train", add_train_arguments, show_defaults=True)
def _train(args: argparse.Namespace, beam_args: list[str], stage_argv: list[str]) -> None:
    """Fine-tune an encoder variant with in-batch softmax plus a hard negative per query."""
    apply_preset(args, "train", explicit_flags(add_train_arguments, stage_argv))
    report = train_from_args(args)
    print(
        f"trained {report.steps} steps; best validation MRR@10 {report.best_valid_metric}; "
        f"model in {report.model_dir}"
    )


@command("adapt", add_adapt_arguments, show_defaults=True)
def _adapt(args: argparse.Namespace, beam_args: list[str], stage_argv: list[str]) -> None:
    """Adapt the shipped model (or --from MODEL) to a dataset folder's catalog: aspect vocabularies from
    its own fields, aspect losses, and a contrastive loss on pseudo-queries made from those fields
    (brand + category, colour + category, category, title fragments), starting where the backbone used
    zero-shot is. A share of products is held out by a hash of the id; the command prints their aspect
    accuracy and, when the folder has judged test queries, retrieval against the backbone used zero-shot."""
    run_adapt_job(args)


def add_extend_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", required=True, help="Trained model directory with aspect heads")
    parser.add_argument(
        "--products", default=None, help="Catalog Parquet file, folder or glob: its aspects' values"
    )
    parser.add_argument(
        "--values", default=None, help='JSON file of values per aspect: {"brand": ["Fellow"]}'
    )
    parser.add_argument("--aspects", default=None, help="Comma-separated aspects to extend (default: all)")
    add_output_argument(parser, required=True, help="Model directory to write (a new one)")
    parser.add_argument("--overwrite", action="store_true", help="Replace an existing model directory")


@command("extend-vocabulary", add_extend_arguments)
def _extend(args: argparse.Namespace, beam_args: list[str], stage_argv: list[str]) -> None:
    """Copy a trained model, giving its aspect heads a row for each value of your catalog (or of a JSON
    file) it does not know, made from its own states for the value's name: no training, seconds. Brand
    and colour values are then written only where a product's text names them (--stated_aspects)."""
    aspects = tuple(a.strip() for a in args.aspects.split(",") if a.strip()) if args.aspects else None
    summary = extend_vocabulary(args.model, args.out, args.products, args.values, aspects, args.overwrite)
    for aspect, sizes in summary.items():
        print(f"{aspect:<10} {sizes['before']:>6} values + {sizes['added']} new")
    print(f"model written: {args.out} ({MANIFEST_FILE} lists its files)")
