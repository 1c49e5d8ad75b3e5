"""The optimiser-step loop that fine-tuning (`Trainer`) and pre-training (`Pretrainer`) share.

Both trainers differ only in their batches and losses (and fine-tuning in its validation); what it takes
to turn a loss into a step is written once here, so the two cannot drift apart again (they once resumed
differently, and only pre-training had bfloat16 autocast):

- `start`: the seed, the encoder on its device in train mode with its lowest layers frozen, AdamW with
  the heads' own rate, the linear warmup schedule, and the resume from the run's last checkpoint (whose
  fingerprint must match: `model.training.checkpoints`);
- `forward`: the bfloat16 autocast a config asks for (weights, optimiser and loss stay fp32);
- `optimiser_step`: gradient clipping, the optimiser and scheduler steps, and the progress bar, after the
  block has run the backward passes of one step (several with gradient accumulation);
- `save`: the resumable checkpoint, due every `checkpoint_every` steps and at the last one.

Its settings are `LoopSettings` (`model.training.config`), the base of both trainers' configs.
"""

from __future__ import annotations

import contextlib
import logging
import math
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch
from tqdm.auto import tqdm
from transformers import PreTrainedTokenizerBase

from model.batch import pick_device
from model.encoder import DenseEncoder
from model.training.checkpoints import checkpoint_dir, resume_from_checkpoint, save_checkpoint
from model.training.config import LoopSettings
from model.training.optimizer import adamw_with_head_rate, freeze_lower_layers

LOGGER = logging.getLogger(__name__)
# Steps between re-plans of the decay under --max_minutes: the pace of one step includes warm-up costs.
REPLAN_EVERY = 5


def linear_warmup_then_decay(step: int, warmup: int, total: int) -> float:
    """The learning rate's factor at `step`: 0 to 1 over `warmup` steps, then linearly to 0 at `total`
    (transformers' `get_linear_schedule_with_warmup`, whose end can move here)."""
    if step < warmup:
        return step / max(1, warmup)
    return max(0.0, (total - step) / max(1, total - warmup))


class StepLoop:
    """One training run's optimiser, schedule, progress and checkpoints around the caller's batches."""

    def __init__(self, run: EncoderRun, name: str) -> None:
        self.encoder, self.tokenizer, self.config, self.name = run.encoder, run.tokenizer, run.config, name
        self.checkpoint_dir, self.device = run.checkpoint_dir, run.device
        self.step = 0
        self.total_steps = 0

    def start(
        self,
        total_steps: int,
        fingerprint: Callable[[], dict[str, object]],
        prepare: Callable[[], None] | None = None,
    ) -> dict[str, Any] | None:
        """Seed, set up the encoder, the optimiser and the schedule, and resume; the resumed checkpoint's
        state (None for a fresh run). `prepare` runs right after seeding, before the optimiser sees the
        parameters (pre-training adds its MLM heads there, from the seeded generator); `fingerprint`, what a
        checkpoint must match to be resumed, is taken after it."""
        cfg = self.config
        torch.manual_seed(cfg.seed)
        if prepare is not None:
            prepare()
        self.encoder.to(self.device).train()
        freeze_lower_layers(self.encoder, cfg.frozen_layers)
        self.optimizer = adamw_with_head_rate(
            self.encoder, cfg.learning_rate, cfg.head_learning_rate, cfg.weight_decay
        )
        # The decay's end, which --max_minutes moves to the step the deadline allows (`_pace`).
        self.planned_steps = total_steps
        warmup = math.ceil(cfg.warmup_fraction * total_steps)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda step: linear_warmup_then_decay(step, warmup, self.planned_steps)
        )
        self.fingerprint = fingerprint()
        state = resume_from_checkpoint(
            self.checkpoint_dir, self.encoder, self.optimizer, self.scheduler, self.fingerprint
        )
        self.step = 0 if state is None else int(state["step"])
        self.total_steps = total_steps
        self.progress = tqdm(
            total=total_steps, initial=self.step, desc=self.name, disable=not cfg.show_progress, mininterval=2
        )
        self._started, self._first_step = time.monotonic(), self.step
        return state

    @property
    def running(self) -> bool:
        return self.step < self.total_steps

    def stop_after_this_step(self) -> None:
        """End the run at the current step (early stopping); its checkpoint is then due."""
        self.total_steps = self.step

    def forward(self) -> contextlib.AbstractContextManager[Any]:
        """The autocast the config asks for, around one forward pass and its loss."""
        return torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.config.bf16)

    @contextlib.contextmanager
    def optimiser_step(self) -> Iterator[None]:
        """Run the block's backward passes, then one optimiser step: clip, step, schedule, clear."""
        yield
        torch.nn.utils.clip_grad_norm_(self.encoder.parameters(), self.config.max_grad_norm)
        self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.step += 1
        self.progress.update(1)
        self._pace()

    def _pace(self) -> None:
        """After the run's first step, what the whole run will take at that pace; with `max_minutes`, the
        learning rate's decay re-planned to end at the step the deadline allows at the pace so far (every
        `REPLAN_EVERY` steps), and once they have passed, the run ended at this step (it is then validated
        and checkpointed as a last step)."""
        elapsed = time.monotonic() - self._started
        left = self.total_steps - self.step
        done = self.step - self._first_step
        deadline = 60 * (self.config.max_minutes or 0)  # seconds; 0: none
        if deadline and left and elapsed < deadline and done % REPLAN_EVERY == 0:
            fits = self._first_step + math.floor(done * deadline / max(elapsed, 1e-9))
            planned = max(self.step + 1, min(self.total_steps, fits))
            # Logged when it moves by more than 5 %: the pace wobbles a step or two between re-plans.
            if abs(planned - self.planned_steps) > max(1, self.planned_steps // 20):
                LOGGER.info(
                    "%s: at %.2f s a step, --max_minutes %g allows about %d of the %d steps: the learning "
                    "rate now decays to 0 at step %d",
                    self.name,
                    elapsed / done,
                    self.config.max_minutes,
                    planned,
                    self.total_steps,
                    planned,
                )
            self.planned_steps = planned
        if self.step == self._first_step + 1 and left:
            limit = self.config.max_minutes
            LOGGER.info(
                "%s: the first step took %.1f s; about %.0f minutes for the %d steps at that pace%s",
                self.name,
                elapsed,
                elapsed * (left + 1) / 60,
                self.total_steps - self._first_step,
                f" (--max_minutes {limit:g} stops it sooner)"
                if limit and elapsed * (left + 1) > 60 * limit
                else "",
            )
        if deadline and left and elapsed >= deadline:
            LOGGER.info(
                "%s: --max_minutes %g reached at step %d of %d; stopping",
                self.name,
                self.config.max_minutes,
                self.step,
                self.total_steps,
            )
            self.stop_after_this_step()

    def checkpoint_due(self) -> bool:
        every = self.config.checkpoint_every
        return self.step == self.total_steps or bool(every and self.step % every == 0)

    def save(self, **extra: object) -> None:
        """The resumable checkpoint of the current step; `extra` comes back in the state on resume."""
        save_checkpoint(
            self.checkpoint_dir,
            self.encoder,
            self.tokenizer,
            step=self.step,
            optimizer=self.optimizer,
            scheduler=self.scheduler,
            fingerprint=self.fingerprint,
            **extra,
        )

    def finish(self) -> None:
        self.progress.close()


class EncoderRun:
    """What both trainers hold: the encoder and its tokenizer, the run's settings, the output folder
    (the model is written there, its resumable checkpoint under `checkpoint_dir`) and the device."""

    def __init__(
        self,
        encoder: DenseEncoder,
        tokenizer: PreTrainedTokenizerBase,
        config: LoopSettings,
        output_dir: str | Path,
    ) -> None:
        self.encoder = encoder
        self.tokenizer = tokenizer
        self.config = config
        self.output_dir = Path(output_dir)
        self.device = pick_device(config.device)

    @property
    def checkpoint_dir(self) -> Path:
        return checkpoint_dir(self.output_dir)
