"""Domain pre-training before fine-tuning (madral-kdd22 §7.1, Eq. 7; mural-wsdm24 Eq. 9).

The loop is generic: every variant's `pretraining_loss` says what its loss is
(L_MLM, plus the aspect losses when it learns aspects), and the loop only feeds it
batches of one side at a time, products on the document side and queries on the
query side. Like the fine-tuning `Trainer`, batches and masks derive from (seed,
epoch, step), and an interrupted run resumed from its last checkpoint ends exactly
where an uninterrupted one would.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from model.batch import PretrainingLoss, Side
from model.training.checkpoints import run_fingerprint
from model.training.config import Annotations, LoopSettings, cli_field
from model.training.loop import EncoderRun, StepLoop


@dataclass(frozen=True)
class PretrainingConfig(LoopSettings):
    """How long and how to pre-train.

    Attributes:
        epochs / max_steps: passes over the records, capped at `max_steps` optimiser steps.
        batch_size: texts per step; a step sees one side only (queries or products).
        learning_rate / head_learning_rate: AdamW's rate for the backbone, and for the layers
            above it (aspect extraction, heads, MLM heads); None: the backbone's. The heads
            need the larger one to leave the value-frequency floor within a CPU budget
            (docs/RESULTS.md, "aspect learning").
        aspect_weight: λp on the aspect losses. Eq. 7 (madral-kdd22) adds them unweighted,
            hence 1; MURAL uses its config's λ instead (Eq. 9).
        mlm_weight: weight of L_MLM; 0 leaves MLM out (no masking, no MLM heads' gradient).
        mask_probability: share of content tokens chosen for L_MLM (BERT's 0.15); MURAL
            uses its config's per-side ratios.
        checkpoint_every: steps between resumable checkpoints (0: only at the end).
        bf16: run the forward pass under bfloat16 autocast (weights, optimiser and losses stay
            fp32). 1.6x the fp32 step on this project's CPU (AMD EPYC with AVX-512 BF16); on a
            CPU without native bfloat16 it is slower, hence off by default.
    """

    # `help` metadata makes a field a flag of `madr pretrain` (pipelines/settings/stage_config.py generates
    # them).
    batch_size: int = cli_field(32, "Texts per step (one side)")
    head_learning_rate: float | None = cli_field(
        1e-3, "AdamW rate for the layers above the backbone (aspect extraction, heads, MLM heads)"
    )
    aspect_weight: float = cli_field(1.0, "λp on the aspect losses (Eq. 7: 1)")
    mask_probability: float = cli_field(0.15, "MLM masking ratio")
    mlm_weight: float = cli_field(
        1.0, "Weight of L_MLM (Eq. 7: 1); 0 trains the aspect losses alone, on unmasked text"
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {self.batch_size}")
        if self.aspect_weight < 0 or self.mlm_weight < 0:
            raise ValueError(
                f"loss weights must be >= 0, got aspect_weight {self.aspect_weight}, "
                f"mlm_weight {self.mlm_weight}"
            )
        if not 0 < self.mask_probability < 1:
            raise ValueError(f"mask_probability must be in (0, 1), got {self.mask_probability}")


@dataclass(frozen=True)
class PretrainingRecord:
    """One pre-training text: a product (document side) or a query (query side), with its annotations."""

    text: str
    side: Side
    aspects: Annotations = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "side", Side(self.side))
        if not isinstance(self.text, str) or not self.text.strip():
            raise ValueError(f"a pre-training record needs a non-empty text, got {self.text!r}")


@dataclass(frozen=True)
class PretrainingBatch:
    side: Side
    texts: tuple[str, ...]
    aspects: tuple[Annotations, ...]


@dataclass(frozen=True)
class StepLosses:
    """The losses of one optimiser step, as floats."""

    total: float
    mlm: float
    aspect: float

    @classmethod
    def of(cls, loss: PretrainingLoss) -> StepLosses:
        return cls(loss.total.item(), loss.mlm.item(), loss.aspect.item())

    @classmethod
    def mean(cls, steps: Sequence[StepLosses]) -> StepLosses:
        if not steps:
            return cls(math.nan, math.nan, math.nan)
        means = (float(np.mean([getattr(s, name) for s in steps])) for name in ("total", "mlm", "aspect"))
        return cls(*means)


@dataclass(frozen=True)
class PretrainingReport:
    """Steps run, per-step losses, and means over the first and last steps (a window of up to 10)."""

    steps: int
    history: tuple[StepLosses, ...]
    model_dir: Path

    @property
    def window(self) -> int:
        return max(1, min(10, len(self.history) // 4))

    @property
    def initial(self) -> StepLosses:
        return StepLosses.mean(self.history[: self.window])

    @property
    def final(self) -> StepLosses:
        return StepLosses.mean(self.history[-self.window :])


def pretraining_batches(
    records: Sequence[PretrainingRecord], batch_size: int, seed: int, epoch: int
) -> list[PretrainingBatch]:
    """The batches of one epoch, each of one side, in an order that is a pure function of (seed, epoch)."""
    rng = np.random.default_rng([seed, epoch])
    batches = []
    for side in Side:
        chosen = [record for record in records if record.side is side]
        order = rng.permutation(len(chosen))
        for start in range(0, len(order), batch_size):
            group = [chosen[i] for i in order[start : start + batch_size]]
            batches.append(
                PretrainingBatch(side, tuple(r.text for r in group), tuple(r.aspects for r in group))
            )
    return [batches[i] for i in rng.permutation(len(batches))]


def mask_generator(seed: int, step: int) -> torch.Generator:
    """The CPU generator that draws step `step`'s MLM masks: the same after a resume."""
    return torch.Generator().manual_seed(int(np.random.SeedSequence([seed, step]).generate_state(1)[0]))


class Pretrainer(EncoderRun):
    """Pre-trains an encoder with its `pretraining_loss` and writes it with `save_pretrained`.

    OUT receives the pre-trained model (MLM heads included, so pre-training can go on
    from it); OUT/checkpoints/last the resumable checkpoint (`model.training.checkpoints`).
    """

    config: PretrainingConfig

    def batch_loss(self, batch: PretrainingBatch, step: int) -> PretrainingLoss:
        """Eq. 7 (madral-kdd22) of one side's batch, with the masks of `step`."""
        encoder, cfg = self.encoder, self.config
        tokenized = encoder.tokenize(self.tokenizer, list(batch.texts), batch.side).to(self.device)
        return encoder.pretraining_loss(
            tokenized,
            self.tokenizer,
            batch.side,
            list(batch.aspects),
            mask_generator(cfg.seed, step),
            # A side left out of `aspect_sides` pre-trains with L_MLM alone.
            aspect_weight=cfg.aspect_weight if batch.side.value in cfg.aspect_sides else 0.0,
            mask_probability=cfg.mask_probability,
            mlm_weight=cfg.mlm_weight,
        )

    def fit(self, records: Sequence[PretrainingRecord]) -> PretrainingReport:
        cfg = self.config
        if not records:
            raise ValueError("pre-training needs at least one record")
        steps_per_epoch = len(pretraining_batches(records, cfg.batch_size, cfg.seed, 0))
        total_steps = cfg.epochs * steps_per_epoch
        if cfg.max_steps is not None:
            total_steps = min(total_steps, cfg.max_steps)
        sides = {side.value: sum(r.side is side for r in records) for side in Side}
        loop = StepLoop(self, "pretrain")
        state = loop.start(
            total_steps,
            lambda: run_fingerprint(cfg, self.encoder, records=sides),
            # The MLM heads exist before the optimiser is built, drawn from the seeded generator.
            prepare=self.encoder.prepare_pretraining,
        )
        history = [] if state is None else [StepLosses(*losses) for losses in state["history"]]
        recent_accuracy: deque[float] = deque(maxlen=20)
        while loop.running:
            epoch, offset = divmod(loop.step, steps_per_epoch)
            batches = pretraining_batches(records, cfg.batch_size, cfg.seed, epoch)
            for batch in batches[offset : offset + loop.total_steps - loop.step]:
                with loop.optimiser_step():
                    with loop.forward():
                        loss = self.batch_loss(batch, loop.step)
                    loss.total.backward()
                history.append(StepLosses.of(loss))
                if loss.aspect_accuracy is not None:
                    recent_accuracy.append(loss.aspect_accuracy)
                postfix = {"mlm": f"{history[-1].mlm:.3f}", "aspect": f"{history[-1].aspect:.3f}"}
                if recent_accuracy:  # Accuracy@1 of the aspect heads over the last 20 labelled batches
                    postfix["acc@1"] = f"{np.mean(recent_accuracy):.3f}"
                loop.progress.set_postfix(postfix)
                if loop.checkpoint_due():
                    loop.save(history=[(s.total, s.mlm, s.aspect) for s in history])
        loop.finish()
        self.encoder.save_pretrained(self.output_dir, self.tokenizer)
        self.encoder.eval()
        return PretrainingReport(steps=loop.step, history=tuple(history), model_dir=self.output_dir)
