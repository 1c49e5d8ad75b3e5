"""Resumable checkpoints, shared by the fine-tuning and the pre-training loops.

A run writing to OUT keeps its last checkpoint in OUT/checkpoints/last: a loadable
model directory (`save_pretrained`) plus the loop state: the step, the optimiser and
scheduler states, torch's RNG state, a fingerprint of the run and whatever else the
loop needs back. A checkpoint is swapped in whole, so a crash leaves the old or the new.

The loop state is never pickled: unpickling a file runs whatever code it names, and a
checkpoint directory is often shared storage. Its tensors (optimiser moments, the RNG
state) go to TENSORS_FILE as safetensors, keyed by their place in the state (for example
``optimizer.state.0.exp_avg``: parameter 0's first moment); everything else goes to
STATE_FILE as JSON. JSON has no tuples, integer keys or NaN, so those are written as
small tagged objects and read back as they were: a resumed run gets the very state it saved.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import shutil
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file
from transformers import PreTrainedTokenizerBase

from model.encoder import DenseEncoder

LOGGER = logging.getLogger(__name__)
STATE_FILE = "trainer_state.json"
TENSORS_FILE = "trainer_state.safetensors"
# Where madr used to pickle the loop state; it is never read, only recognised to say so.
LEGACY_STATE_FILE = "trainer_state.pt"
FORMAT_NAME = "madr-trainer-state"
FORMAT_VERSION = 1
# Loop settings that do not change what a run computes.
UNFINGERPRINTED = ("device", "show_progress")

# JSON stand-ins for what JSON cannot say. A str-keyed dict that happens to use one of
# these keys is written in the _ITEMS form, so reading one back is never ambiguous.
_TENSOR, _TUPLE, _ITEMS, _FLOAT = "__tensor__", "__tuple__", "__items__", "__float__"
_TAGS = frozenset((_TENSOR, _TUPLE, _ITEMS, _FLOAT))


class CheckpointError(ValueError):
    """A checkpoint directory whose loop state cannot (or must not) be read."""


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
    """Write the model and the loop state to `directory` atomically; `extra` is returned on resume.

    Raises:
        TypeError: some value of the state is neither a tensor nor plain JSON data (before
            anything is written, so the previous checkpoint stays).
    """
    state = {
        "step": step,
        "optimizer": optimizer.state_dict(),
        "scheduler": scheduler.state_dict(),
        "torch_rng": torch.get_rng_state(),
        "fingerprint": fingerprint,
        **extra,
    }
    tensors: dict[str, torch.Tensor] = {}
    document = {"format": FORMAT_NAME, "format_version": FORMAT_VERSION, "state": _encode(state, "", tensors)}
    text = json.dumps(document, allow_nan=False, indent=1)
    staging = directory.with_name(directory.name + ".tmp")
    shutil.rmtree(staging, ignore_errors=True)
    encoder.save_pretrained(staging, tokenizer)
    save_file(tensors, staging / TENSORS_FILE)
    (staging / STATE_FILE).write_text(text, encoding="utf-8")
    shutil.rmtree(directory, ignore_errors=True)
    staging.rename(directory)  # a crash leaves either the old or the new checkpoint


def read_checkpoint_state(directory: Path) -> dict[str, Any] | None:
    """The loop state of the checkpoint in `directory`; None when there is none.

    Raises:
        CheckpointError: the state files are damaged, or the directory holds only a
            checkpoint in the old pickled format, which is refused unread.
    """
    path = directory / STATE_FILE
    if not path.is_file():
        if (directory / LEGACY_STATE_FILE).exists():
            # Starting afresh would silently overwrite it; reading it could run planted code.
            raise CheckpointError(
                f"{directory} holds a pickled checkpoint ({LEGACY_STATE_FILE}) from an older madr, which is "
                "never loaded because unpickling can run arbitrary code; delete that directory to start over"
            )
        return None
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(document, dict) or document.get("format") != FORMAT_NAME:
            raise ValueError(f"not a {FORMAT_NAME} file")
        if document.get("format_version") != FORMAT_VERSION:
            raise ValueError(f"format_version {document.get('format_version')!r}, expected {FORMAT_VERSION}")
        state = _decode(document["state"], load_file(directory / TENSORS_FILE))
        if not isinstance(state, dict):
            raise ValueError("the state is not an object")
    except (OSError, ValueError, KeyError, TypeError, RecursionError, SafetensorError) as err:
        raise CheckpointError(
            f"{directory} holds a damaged checkpoint ({err}); delete that directory to start over"
        ) from err
    return state


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


def _encode(value: object, path: str, tensors: dict[str, torch.Tensor]) -> object:
    """`value` as JSON data; its tensors move to `tensors`, named by `path`, the place they held."""
    if isinstance(value, torch.Tensor):
        if path in tensors:
            raise TypeError(f"checkpoint state: two tensors would both be saved as {path!r}")
        # safetensors stores contiguous CPU tensors; load_state_dict moves them back to the parameters.
        tensors[path] = value.detach().cpu().contiguous()
        return {_TENSOR: path}
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else {_FLOAT: repr(value)}
    if isinstance(value, tuple):
        return {_TUPLE: [_encode(item, _child(path, i), tensors) for i, item in enumerate(value)]}
    if isinstance(value, list):
        return [_encode(item, _child(path, i), tensors) for i, item in enumerate(value)]
    if isinstance(value, dict):
        if all(isinstance(key, str) for key in value) and not _TAGS & value.keys():
            return {key: _encode(item, _child(path, key), tensors) for key, item in value.items()}
        # The optimiser's per-parameter state is keyed by parameter index: JSON keys are strings only.
        return {
            _ITEMS: [
                [_encode(key, _child(path, key) + ".key", tensors), _encode(item, _child(path, key), tensors)]
                for key, item in value.items()
            ]
        }
    raise TypeError(
        f"checkpoint state {path or '<root>'!r} is a {type(value).__name__}: only tensors and plain "
        "JSON data (with tuples) are saved, because a checkpoint is never pickled"
    )


def _child(path: str, key: object) -> str:
    return f"{path}.{key}" if path else str(key)


def _decode(value: object, tensors: dict[str, torch.Tensor]) -> object:
    """The inverse of `_encode`: builds only containers, numbers, strings and tensors, never objects."""
    if isinstance(value, list):
        return [_decode(item, tensors) for item in value]
    if not isinstance(value, dict):
        return value
    if len(value) == 1 and _TAGS & value.keys():
        [(tag, content)] = value.items()
        if tag == _TENSOR:
            if content not in tensors:
                raise KeyError(f"{TENSORS_FILE} has no tensor {content!r}")
            return tensors[content]
        if tag == _TUPLE:
            return tuple(_decode(item, tensors) for item in content)
        if tag == _FLOAT:
            return float(content)
        return {_decode(key, tensors): _decode(item, tensors) for key, item in content}
    return {key: _decode(item, tensors) for key, item in value.items()}
