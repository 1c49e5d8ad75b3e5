"""`madr pretrain`: domain pre-training of a variant on a dataset folder (madral-kdd22 §7.1).

Products are pre-trained on the document side and the queries of the chosen splits
on the query side, with L_MLM plus, for variants that learn aspects, the aspect
losses of Eq. 7 (madral-kdd22) or Eq. 9 (mural-wsdm24). The result is a model
directory like `madr train` writes (manifest kind "madr-model", "pretrained": true);
`madr train --init_from DIR` fine-tunes from it.
"""

from __future__ import annotations

import dataclasses
import logging
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from model import DenseEncoder, Side, text_for_model
from model.batch import pick_device
from model.hardware import bf16_is_native
from model.training import Pretrainer, PretrainingConfig, PretrainingRecord, PretrainingReport
from pipelines.io.parquet_reading import parquet_rows
from pipelines.io.product_reader import SkippedProducts, valid_products
from pipelines.layout import DatasetLayout
from pipelines.settings.stage_config import nested, setting
from pipelines.storage.staged_output import fresh_output
from pipelines.train.encoder_job import EncoderJob, has_checkpoint, seeded
from pipelines.train.presets import PresetRun, preset_setting
from schemas import InvalidRecord, validate_query
from schemas.splits import BUCKETS, HeldOutProducts, held_out_bucket

LOGGER = logging.getLogger(__name__)

# A short pre-training on a catalog learns faster at repro-ecir24's backbone rate (1e-4) with the new
# layers at 3e-3: at 150 steps on the demo catalog, held-out brand / color Accuracy@1 0.940 / 0.838
# against 0.925 / 0.788 at 5e-5 / 1e-3. `madr demo` and `madr experiment` pre-train at these rates.
CATALOG_PRETRAIN_LEARNING_RATE = 1e-4
CATALOG_PRETRAIN_HEAD_LEARNING_RATE = 3e-3
PRETRAIN_PRECISIONS = ("auto", "fp32", "bf16")
PRETRAIN_PRECISION_HELP = (
    "Pre-training's forward pass: bf16 autocast is 1.75x faster per step on a CPU with native bfloat16 "
    "(AVX-512 BF16, AMX) or a GPU, slower without; auto uses it where it is native"
)


def pretrain_in_bf16(precision: str) -> bool:
    """Whether `--pretrain_precision` asks for bf16 autocast here ("auto": where bfloat16 is native)."""
    if precision not in PRETRAIN_PRECISIONS:
        raise ValueError(f"pretrain precision must be one of {PRETRAIN_PRECISIONS}, got {precision!r}")
    return precision == "bf16" or (precision == "auto" and bf16_is_native(pick_device(None)))


@dataclass(frozen=True)
class PretrainJob(EncoderJob):
    """What to pre-train on and where to write it; the model settings are `EncoderJob`'s."""

    query_splits: tuple[str, ...] = setting(
        ("train",), "Comma-separated query splits pre-trained on (query side)"
    )
    max_products: int | None = setting(None, "Pre-train on at most this many")
    annotated_share: float = setting(
        1.0,
        "Share of the products whose aspect annotations pre-training learns from, chosen by a hash of the "
        "product id (repro-ecir24 §8.5 compares 1/3, 2/3 and all); L_MLM reads every product",
    )
    held_out: HeldOutProducts = nested(HeldOutProducts)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.max_products is not None and self.max_products < 1:
            raise ValueError(f"max_products must be >= 1 when set, got {self.max_products}")
        if not 0.0 <= self.annotated_share <= 1.0:
            raise ValueError(f"annotated_share must be in [0, 1], got {self.annotated_share}")

    def keeps_annotations(self, product_id: str) -> bool:
        """Whether pre-training learns from this product's annotations (`annotated_share` of them)."""
        # Salted, so that the share is drawn independently of a held-out rule by product id.
        return held_out_bucket(f"annotated:{product_id}") < round(self.annotated_share * BUCKETS)


@dataclass(frozen=True)
class PretrainRun(PresetRun):
    """`madr pretrain`: what to pre-train on and where (`PretrainJob`), and the loop's settings; its flags
    are theirs and `--preset`'s."""

    job: PretrainJob = nested()
    loop: PretrainingConfig = nested()
    preset: str | None = preset_setting()

    COMMAND: ClassVar[str] = "pretrain"


def load_pretraining_records(job: PretrainJob, encoder: DenseEncoder) -> list[PretrainingRecord]:
    """Products (as the model reads them) on the document side, then the chosen splits' queries."""
    layout = DatasetLayout(job.dataset)
    records, skipped, held_out = [], SkippedProducts(), 0
    for product in valid_products(layout.products, skipped):
        if job.max_products is not None and len(records) >= job.max_products:
            break
        if job.held_out.holds(product):
            held_out += 1
            continue
        text = text_for_model(product, encoder.config)
        aspects = product["aspects"] if job.keeps_annotations(product["product_id"]) else None
        records.append(PretrainingRecord(text, Side.DOCUMENT, aspects or None))
    invalid_queries = 0
    for row in parquet_rows(layout.queries):
        try:
            query = validate_query(row)
        except InvalidRecord as error:
            invalid_queries += 1
            LOGGER.debug("skipping query: %s", error)
            continue
        if query["split"] in job.query_splits:
            records.append(PretrainingRecord(query["text"], Side.QUERY, query["aspects"] or None))
    if skipped.count:
        LOGGER.warning("%s", skipped.describe())
    if invalid_queries:
        LOGGER.warning("%d invalid queries skipped", invalid_queries)
    if held_out:
        LOGGER.info("%d products held out (%s)", held_out, job.held_out.to_dict()["rule"])
    return records


def run_pretraining(job: PretrainJob, loop: PretrainingConfig) -> PretrainingReport:
    """Pre-train into `job.output`, which appears only once the model and its manifest are whole.

    As `pipelines.train.finetune.run_training`: a non-empty `job.output` is refused unless `job.overwrite`,
    and an interrupted run resumes from the checkpoints in its staging folder.
    """
    with fresh_output(job.output, job.overwrite, resumable=has_checkpoint) as staging:
        report = _pretrain(dataclasses.replace(job, output=staging), loop)
    return dataclasses.replace(report, model_dir=Path(job.output))


def _pretrain(job: PretrainJob, loop: PretrainingConfig) -> PretrainingReport:
    with seeded(loop.seed):
        encoder, tokenizer, vocabulary = job.new_encoder_for_dataset(job.held_out, job.query_splits)
    records = load_pretraining_records(job, encoder)
    sides = {side.value: sum(r.side is side for r in records) for side in Side}
    LOGGER.info("pre-training on %d products and %d queries", sides["document"], sides["query"])
    pretrainer = Pretrainer(encoder, tokenizer, loop, job.output)
    report = pretrainer.fit(records)
    # Checkpoints only serve to resume an interrupted run; the finished artifact is the model.
    shutil.rmtree(pretrainer.checkpoint_dir.parent, ignore_errors=True)
    job.write_model_manifest(
        {
            "pretrained": True,
            "initialise_aspects": job.initialise_aspects,
            "aspect_vocabulary_sizes": vocabulary.sizes(),
            "loss": {
                "aspect_weight": loop.aspect_weight,
                "mask_probability": loop.mask_probability,
                "mlm_weight": loop.mlm_weight,
            },
            "records": sides,
            "query_splits": list(job.query_splits),
            **({"held_out_products": job.held_out.to_dict()} if job.held_out.fraction else {}),
            "steps": report.steps,
            "losses": {
                "window": report.window,
                "initial": dataclasses.asdict(report.initial),
                "final": dataclasses.asdict(report.final),
            },
        }
    )
    return report
