"""`madr pretrain`, `train`, `adapt` and `extend-vocabulary`: making and changing a model."""

from __future__ import annotations

from dataclasses import dataclass

from apache_beam.options.pipeline_options import PipelineOptions

from jobs.adapt import AdaptRun, run_adapt_job
from jobs.command_table import command
from pipelines.settings.stage_config import setting
from pipelines.train.extend_vocabulary import extend_vocabulary
from pipelines.train.finetune import TrainRun, run_training
from pipelines.train.pretrain import PretrainRun, run_pretraining
from schemas.manifest import MANIFEST_FILE


@command("pretrain", PretrainRun, then=PretrainRun.under_preset, show_defaults=True)
def _pretrain(config: PretrainRun, beam_options: PipelineOptions) -> None:
    """Domain pre-training (madral-kdd22 Eq. 7): MLM plus the aspect losses of variants that learn
    aspects, on products (document side) and queries; `madr train --init_from` fine-tunes it."""
    pretrained = run_pretraining(config.job, config.loop)
    print(
        f"pre-trained {pretrained.steps} steps; MLM loss {pretrained.initial.mlm:.4f} -> "
        f"{pretrained.final.mlm:.4f}, aspect loss {pretrained.initial.aspect:.4f} -> "
        f"{pretrained.final.aspect:.4f}; model in {pretrained.model_dir}"
    )


@command("train", TrainRun, then=TrainRun.under_preset, show_defaults=True)
def _train(config: TrainRun, beam_options: PipelineOptions) -> None:
    """Fine-tune an encoder variant with in-batch softmax plus a hard negative per query."""
    report = run_training(config.job, config.loop)
    print(
        f"trained {report.steps} steps; best validation MRR@10 {report.best_valid_metric}; "
        f"model in {report.model_dir}"
    )


@command("adapt", AdaptRun, show_defaults=True)
def _adapt(config: AdaptRun, beam_options: PipelineOptions) -> None:
    """Adapt the shipped model (or --from MODEL) to a dataset folder's catalog: aspect vocabularies from
    its own fields, aspect losses, and a contrastive loss on pseudo-queries made from those fields
    (brand + category, colour + category, category, title fragments), starting where the backbone used
    zero-shot is. A share of products is held out by a hash of the id; the command prints their aspect
    accuracy and, when the folder has judged test queries, retrieval against the backbone used zero-shot."""
    run_adapt_job(config)


@dataclass(frozen=True)
class ExtendVocabularyConfig:
    model: str = setting("", "Trained model directory with aspect heads", required=True)
    products: str | None = setting(None, "Catalog Parquet file, folder or glob: its aspects' values")
    values: str | None = setting(None, 'JSON file of values per aspect: {"brand": ["Fellow"]}')
    aspects: tuple[str, ...] = setting((), "Comma-separated aspects to extend (default: all)")
    output: str = setting("", "Model directory to write (a new one)", required=True, aliases=("--out",))
    overwrite: bool = setting(False, "Replace an existing model directory")


@command("extend-vocabulary", ExtendVocabularyConfig)
def _extend(config: ExtendVocabularyConfig, beam_options: PipelineOptions) -> None:
    """Copy a trained model, giving its aspect heads a row for each value of your catalog (or of a JSON
    file) it does not know, made from its own states for the value's name: no training, seconds. Brand
    and colour values are then written only where a product's text names them (--stated_aspects)."""
    summary = extend_vocabulary(
        config.model, config.output, config.products, config.values, config.aspects or None, config.overwrite
    )
    for aspect, sizes in summary.items():
        print(f"{aspect:<10} {sizes['before']:>6} values + {sizes['added']} new")
    print(f"model written: {config.output} ({MANIFEST_FILE} lists its files)")
