"""Weight-space averaging with the backbone: what fine-tuning learnt, kept half way to what MiniLM knew.

WiSE-FT (Wortsman et al., "Robust fine-tuning of zero-shot models", CVPR 2022) averages a fine-tuned
model's weights with the zero-shot model's, θ = α·θ_fine-tuned + (1 − α)·θ_zero-shot. Both start from
the same weights, so their average stays in one basin; it keeps most of the in-domain gain and most of
the zero-shot model's robustness on data the fine-tuning never saw. Here the zero-shot model is the
bundled backbone with mean pooling and an identity projection (variant "zero-shot"), so only a model
built on that recipe (`projection_init="identity"`) has weights to average: its transformer layers are
averaged with the backbone's and its projection with the identity. Layers the zero-shot model has no
counterpart for (aspect heads, presence heads) keep their fine-tuned weights.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from model.backbone import load_pretrained_transformer
from model.encoder import DenseEncoder
from model.pooling import Pooling, ProjectionInit
from model.registry import load_encoder


def projections(encoder: DenseEncoder) -> list[nn.Linear]:
    """The square output projections an identity-initialised encoder starts as the identity."""
    found = []
    for name, module in encoder.named_modules():
        leaf = name.rsplit(".", 1)[-1]
        is_projection = leaf == "projection" or name.startswith("projections.")
        if is_projection and isinstance(module, nn.Linear) and module.in_features == module.out_features:
            found.append(module)
    return found


@torch.no_grad()
def average_with_backbone(encoder: DenseEncoder, alpha: float, backbone: str | Path | None = None) -> None:
    """θ ← α·θ + (1 − α)·θ_zero-shot, in place (WiSE-FT); α = 1 leaves the encoder as it is.

    Raises ValueError for an encoder that did not start as the zero-shot model (mean pooling and an
    identity projection): there is no zero-shot model of it to average with.
    """
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must be in [0, 1], got {alpha}")
    config = encoder.config
    if config.pooling is not Pooling.MEAN or config.projection_init is not ProjectionInit.IDENTITY:
        raise ValueError(
            "averaging with the backbone needs a model that started as it: pooling='mean' and "
            f"projection_init='identity' (this {config.variant} has {config.pooling.value} pooling and a "
            f"{config.projection_init.value} projection)"
        )
    if alpha == 1.0:
        return
    for transformer in encoder.transformers.values():
        start = load_pretrained_transformer(backbone, encoder.transformer_layers()).state_dict()
        for name, tensor in transformer.state_dict().items():
            if name in start and tensor.is_floating_point():
                tensor.mul_(alpha).add_(start[name].to(tensor.device, tensor.dtype), alpha=1.0 - alpha)
    for projection in projections(encoder):
        weight = projection.weight
        eye = torch.eye(projection.in_features, device=weight.device, dtype=weight.dtype)
        weight.mul_(alpha).add_(eye, alpha=1.0 - alpha)
        if projection.bias is not None:
            projection.bias.mul_(alpha)


def average_saved_model(directory: str | Path, alpha: float, backbone: str | Path | None = None) -> None:
    """`average_with_backbone` on a saved model directory, written back in place (before its manifest)."""
    if alpha == 1.0:
        return
    encoder, tokenizer = load_encoder(directory, device="cpu")
    average_with_backbone(encoder, alpha, backbone)
    encoder.save_pretrained(directory, tokenizer)
