"""The fine-tuning loop shared by every variant.

It knows nothing of files of catalogs or of command lines: it takes in-memory
`QueryExamples`, an encoder and a directory to write checkpoints and the selected
model to. Data order and sampling derive from (seed, epoch), so an interrupted run
resumed from its last checkpoint sees the same batches it would have seen.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from model.aspects.losses import pointwise_relevance_loss
from model.batch import EncoderOutput, Side
from model.training.checkpoints import run_fingerprint
from model.training.config import Annotations, QueryExamples, TrainingConfig
from model.training.loop import EncoderRun, StepLoop
from model.training.validation import VALIDATION_METRIC, validation_mrr

LOGGER = logging.getLogger(__name__)


@dataclass(frozen=True)
class Batch:
    """One micro-batch: query i's positive is positives[i]; hard_negatives[j] belongs to query negative_of[j].

    Queries without a hard negative simply add none: every query still meets every
    other document of the batch as an in-batch negative.
    """

    queries: list[str]
    positives: list[str]
    hard_negatives: list[str]
    negative_of: list[int]
    query_aspects: list[Annotations]
    positive_aspects: list[Annotations]
    negative_aspects: list[Annotations]


def _batch(chosen: Sequence[QueryExamples], positive: list[int], negative: list[int | None]) -> Batch:
    positives = [ex.positive(i) for ex, i in zip(chosen, positive, strict=True)]
    owners = [q for q, i in enumerate(negative) if i is not None]
    negatives = [chosen[q].negative(negative[q]) for q in owners]  # type: ignore[arg-type]
    return Batch(
        queries=[ex.query for ex in chosen],
        positives=[text for text, _ in positives],
        hard_negatives=[text for text, _ in negatives],
        negative_of=owners,
        query_aspects=[ex.query_aspects for ex in chosen],
        positive_aspects=[aspects for _, aspects in positives],
        negative_aspects=[aspects for _, aspects in negatives],
    )


@dataclass(frozen=True)
class TrainingReport:
    steps: int
    final_train_loss: float
    best_valid_metric: float | None  # VALIDATION_METRIC of the selected checkpoint
    best_step: int
    model_dir: Path


def epoch_batches(
    examples: Sequence[QueryExamples], batch_size: int, seed: int, epoch: int, hard_negatives: bool = True
) -> list[Batch]:
    """The micro-batches of one epoch, a pure function of (seed, epoch); in-batch negatives only without
    `hard_negatives` (uhd-bert A.1)."""
    rng = np.random.default_rng([seed, epoch])
    order = rng.permutation(len(examples))
    batches = []
    for start in range(0, len(order) - 1, batch_size):
        chosen = [examples[i] for i in order[start : start + batch_size]]
        if len(chosen) < 2:
            break  # a lone query has no in-batch negatives
        positive = [int(rng.integers(len(ex.positives))) for ex in chosen]
        negative = [
            int(rng.integers(len(ex.hard_negatives))) if ex.hard_negatives and hard_negatives else None
            for ex in chosen
        ]
        batches.append(_batch(chosen, positive, negative))
    return batches


def validation_batches(examples: Sequence[QueryExamples], batch_size: int) -> list[Batch]:
    """Fixed batches (first positive, first negative) so validation losses are comparable."""
    batches = []
    for start in range(0, len(examples) - 1, batch_size):
        chosen = list(examples[start : start + batch_size])
        if len(chosen) < 2:
            break
        negative = [0 if ex.hard_negatives else None for ex in chosen]
        batches.append(_batch(chosen, [0] * len(chosen), negative))
    return batches


class Trainer(EncoderRun):
    """Fine-tunes an encoder with in-batch softmax cross-entropy plus one hard negative per query."""

    config: TrainingConfig

    def batch_loss(self, batch: Batch) -> torch.Tensor:
        """L_SCE + w_CE·L_CE + λf·Σ_sides AL (Eq. 8, madral-kdd22)."""
        encoder, tokenizer, cfg = self.encoder, self.tokenizer, self.config
        queries = encoder(encoder.tokenize(tokenizer, batch.queries, Side.QUERY).to(self.device), Side.QUERY)
        documents = batch.positives + batch.hard_negatives
        encoded = encoder(
            encoder.tokenize(tokenizer, documents, Side.DOCUMENT).to(self.device), Side.DOCUMENT
        )
        size = len(batch.positives)
        loss = encoder.retrieval_loss(queries, encoded, size)
        if cfg.pointwise_loss_weight and batch.hard_negatives:
            # L_CE (madral-kdd22 §7.1): each query with its positive, and its hard negative if it has one.
            owners = torch.tensor(batch.negative_of, dtype=torch.long, device=self.device)
            pairs_q = torch.cat([queries.embedding, queries.embedding[owners]])
            relevant = torch.cat([torch.ones(size), torch.zeros(len(owners))]).to(self.device)
            loss = loss + cfg.pointwise_loss_weight * pointwise_relevance_loss(
                pairs_q, encoded.embedding, relevant, encoder.config.temperature
            )
        if cfg.aspect_loss_weight:
            sides = (
                (Side.QUERY, queries, batch.query_aspects),
                (Side.DOCUMENT, encoded, batch.positive_aspects + batch.negative_aspects),
            )
            aspect = sum(
                self._aspect_loss(output, annotations)
                for side, output, annotations in sides
                if side.value in cfg.aspect_sides
            )
            loss = loss + cfg.aspect_loss_weight * aspect
        return loss

    def _aspect_loss(self, output: EncoderOutput, annotations: list[Annotations]) -> torch.Tensor:
        labels = self.encoder.aspect_labels(annotations, tokenize=self.tokenizer.tokenize)
        if labels is None:
            raise ValueError(
                f"aspect_loss_weight > 0, but variant {self.encoder.config.variant!r} learns no aspects"
            )
        return self.encoder.auxiliary_loss(output, labels.to(self.device))

    @torch.no_grad()
    def validation_loss(self, batches: Sequence[Batch]) -> float:
        self.encoder.eval()
        losses = [self.batch_loss(batch).item() for batch in batches]
        self.encoder.train()
        return float(np.mean(losses))

    def validation_metric(self, valid: Sequence[QueryExamples]) -> float:
        """MRR@10 over the validation pool (`model.training.validation`): higher is better."""
        return validation_mrr(self.encoder, self.tokenizer, valid)

    def fit(self, train: Sequence[QueryExamples], valid: Sequence[QueryExamples] = ()) -> TrainingReport:
        cfg = self.config
        if len(train) < 2:
            raise ValueError(f"training needs at least 2 queries with a positive, got {len(train)}")
        hard, accumulate = bool(cfg.hard_negatives), cfg.gradient_accumulation
        steps_per_epoch = max(1, len(epoch_batches(train, cfg.batch_size, cfg.seed, 0, hard)) // accumulate)
        total_steps = cfg.epochs * steps_per_epoch
        if cfg.max_steps is not None:
            total_steps = min(total_steps, cfg.max_steps)
        loop = StepLoop(self, "train")
        state = loop.start(total_steps, lambda: self._run_fingerprint(train))
        best: tuple[float, int] = (float("nan"), 0) if state is None else tuple(state["best"])
        stale = 0  # validations in a row without a better metric, for early stopping
        loss_value = float("nan")
        validate_every = cfg.validate_every or steps_per_epoch
        while loop.running:
            epoch, offset = divmod(loop.step, steps_per_epoch)
            batches = epoch_batches(train, cfg.batch_size, cfg.seed, epoch, hard)
            for index in range(offset, steps_per_epoch):
                if not loop.running:
                    break
                group = batches[index * accumulate : (index + 1) * accumulate]
                loss_value = 0.0
                with loop.optimiser_step():
                    for batch in group:
                        with loop.forward():
                            loss = self.batch_loss(batch) / len(group)
                        loss.backward()
                        loss_value += loss.item()
                loop.progress.set_postfix(loss=f"{loss_value:.4f}")
                if valid and (loop.step == loop.total_steps or loop.step % validate_every == 0):
                    previous = best
                    best = self._maybe_select(loop.step, self.validation_metric(valid), best)
                    stale = 0 if best != previous else stale + 1
                    if cfg.patience and stale >= cfg.patience:
                        LOGGER.info(
                            "validation %s stopped improving; stopping at step %d",
                            VALIDATION_METRIC,
                            loop.step,
                        )
                        loop.stop_after_this_step()
                if loop.checkpoint_due():
                    loop.save(best=best)
        loop.finish()
        if not valid:
            best = (float("nan"), loop.step)
            self.encoder.save_pretrained(self.output_dir, self.tokenizer)
        self.encoder.eval()
        return TrainingReport(
            steps=loop.step,
            final_train_loss=loss_value,
            best_valid_metric=None if math.isnan(best[0]) else best[0],
            best_step=best[1],
            model_dir=self.output_dir,
        )

    # Checkpoints: OUT/checkpoints/last holds weights + optimizer state; OUT itself holds
    # the model selected on the validation split, so OUT is always a loadable model once written.

    def _maybe_select(self, step: int, metric: float, best: tuple[float, int]) -> tuple[float, int]:
        LOGGER.info("step %d: validation %s %.4f (best %.4f)", step, VALIDATION_METRIC, metric, best[0])
        if math.isnan(best[0]) or metric > best[0]:
            self.encoder.save_pretrained(self.output_dir, self.tokenizer)
            return metric, step
        return best

    def _run_fingerprint(self, train: Sequence[QueryExamples]) -> dict[str, object]:
        """What must match for a checkpoint to belong to this run."""
        return run_fingerprint(self.config, self.encoder, examples=len(train))
