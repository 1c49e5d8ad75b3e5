"""Reading a model's `model.safetensors`: a file that cannot be this model's weights is named, with the fix.

A model directory is verified against its manifest before it is loaded (`pipelines.storage.verify`), but a
manifest can list a damaged or foreign file: one truncated before `madr train` wrote the manifest, or one
copied in from another model with its entry. safetensors and torch then fail with messages about headers
and tensor shapes that name neither the file nor what to do; these say both.
"""

from __future__ import annotations

from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import load_file
from torch import nn

from schemas.manifest import ArtifactError

WEIGHTS_FILE = "model.safetensors"  # in every model directory
FIX = "copy the model directory again from where `madr train` wrote it, or train it again"


class WeightsError(ArtifactError):
    """A weights file that is not safetensors, or not the weights of the model its config describes."""


def read_weights(path: Path) -> dict[str, torch.Tensor]:
    """Every tensor of the safetensors file `path`."""
    if not path.is_file():
        raise FileNotFoundError(f"{path.parent} has no {path.name}; it is not a trained model")
    try:
        return load_file(str(path))
    except SafetensorError as error:
        raise WeightsError(f"{path} is not a readable safetensors file ({error}): {FIX}") from error


def check_weights_readable(path: Path) -> None:
    """Read the safetensors header of `path` and refuse a file it does not describe (cut short, not
    safetensors): cheap, so a driver can check before any worker loads the weights."""
    try:
        with safe_open(str(path), framework="pt") as weights:
            weights.keys()
    except SafetensorError as error:
        raise WeightsError(f"{path} is not a readable safetensors file ({error}): {FIX}") from error


def load_checked_weights(module: nn.Module, path: Path, variant: str) -> None:
    """Load `path` into `module`, which its directory's config.json built; every tensor must fit."""
    try:
        missing, unexpected = module.load_state_dict(read_weights(path), strict=False)
    except RuntimeError as error:  # shapes: the weights of a model of another size
        if isinstance(error, ArtifactError):
            raise
        first = next(
            (line.strip() for line in str(error).splitlines() if "size mismatch" in line), str(error)
        )
        raise WeightsError(
            f"{path} holds the weights of another model than its config.json's {variant} "
            f"({first[:300]}): {FIX}"
        ) from error
    if missing or unexpected:
        raise WeightsError(
            f"{path} does not match its config.json's {variant} (missing {missing[:5]}, unexpected "
            f"{unexpected[:5]}): {FIX}"
        )
