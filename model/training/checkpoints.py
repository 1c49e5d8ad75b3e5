"""Resumable checkpoints, shared by the fine-tuning and the pre-training loops.

A run writing to OUT keeps its last checkpoint in OUT/checkpoints/last: a loadable
model directory (`save_pretrained`) plus STATE_FILE with the step, the optimiser and
scheduler states, torch's RNG state, a fingerprint of the run and whatever else the
loop needs back. A checkpoint is swapped in whole, so a crash leaves the old or the new.
"""

from __future__ import annotations

import dataclasses
import logging
import shutil
from pathlib import Path
from typing import Any

import torch
from transformers import PreTrainedTokenizerBase

from model.encoder import DenseEncoder

LOGGER = logging.getLogger(__name__)
STATE_FILE = "trainer_state.pt"
# Loop settings that do not change what a run computes.
UNFINGERPRINTED = ("device", "show_progress")


def checkpoint_dir(output_dir: str | Path) -> Path:
    return Path(output_dir) / "checkpoints" / "last"


def run_fingerprint(settings: Any, encoder: DenseEncoder, **data: object) -> dict[str, object]:
    """What must match for a checkpoint to belong to a run: loop settings, model config, `data`."""
    loop = dataclasses.asdict(settings)
    for irrelevant in UNFINGERPRINTED:
        loop.pop(irrelevant, None)
    return {"training": loop, **data, "model": encoder.config.to_dict()}


def save_checkpoint(
    directory: Path,
    encoder: DenseEncoder,
    tokenizer: PreTrainedTokenizerBase,
    *,
    step: int,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
    fingerprint: dict[str, object],
    **extra: object,
) -> None:
    """Write the model and the loop state to `directory` atomically; `extra` is returned on resume."""
    staging = directory.with_name(directory.name + ".tmp")
    shutil.rmtree(staging, ignore_errors=True)
    encoder.save_pretrained(staging, tokenizer)
    torch.save(
        {
            "step": step,
            "optimizer": optimizer.state_dict(),
            "scheduler": scheduler.state_dict(),
            "torch_rng": torch.get_rng_state(),
            "fingerprint": fingerprint,
            **extra,
        },
        staging / STATE_FILE,
    )
    shutil.rmtree(directory, ignore_errors=True)
    staging.rename(directory)  # a crash leaves either the old or the new checkpoint


def read_checkpoint_state(directory: Path) -> dict[str, Any] | None:
    """The loop state of the checkpoint in `directory`; None when there is none."""
    path = directory / STATE_FILE
    if not path.is_file():
        return None
    return torch.load(path, weights_only=False)


def resume_from_checkpoint(
    directory: Path,
    encoder: DenseEncoder,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
    fingerprint: dict[str, object],
) -> dict[str, Any] | None:
    """Restore weights, optimiser, scheduler and RNG from `directory`; its state, or None to start afresh.

    A checkpoint of another run (other settings, data or model) is refused, not overwritten.
    """
    state = read_checkpoint_state(directory)
    if state is None:
        return None
    if state.get("fingerprint") != fingerprint:
        raise ValueError(
            f"{directory} holds a checkpoint of a different run (other settings, data or "
            "model); write to a new output directory, or delete that checkpoint to start over"
        )
    encoder.load_weights(directory)
    optimizer.load_state_dict(state["optimizer"])
    scheduler.load_state_dict(state["scheduler"])
    torch.set_rng_state(state["torch_rng"])
    LOGGER.info("resuming from %s at step %d", directory, state["step"])
    return state
