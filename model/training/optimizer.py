"""The AdamW optimiser both training loops use, with its own learning rate for the new layers.

The backbone arrives pre-trained and wants a small step (BERT's 5e-5); the layers
built above it (aspect extraction, prediction and presence heads, fusion, projection,
MLM heads) start from scratch or from a rough initialisation and, at that step, barely
move in a pre-training budget: the aspect-learning probe measured gradients of about
1e-3 on the aspect queries and AP losses stuck at the value-frequency floor.
"""

from __future__ import annotations

import torch
from torch import nn

# Prefixes of the parameters that come from the pre-trained backbone.
BACKBONE_PREFIXES = ("transformers.",)


def freeze_lower_layers(model: nn.Module, layers: int) -> None:
    """Stop training the backbone's word embeddings and its lowest `layers` transformer layers.

    Why: the lower layers of a sentence-embedding backbone hold what it learned from a billion pairs,
    and on a CPU most of a step's time is the backward pass through them; freezing 3 of MiniLM's 6
    halves the step (docs/RESULTS.md, "zero-shot"). With MLM, the tied output embeddings stay fixed too.
    """
    if layers <= 0:
        return
    towers = getattr(model, "transformers", None)
    if not isinstance(towers, nn.ModuleDict) or not towers:
        raise ValueError(f"{type(model).__name__} has no backbone towers to freeze; use frozen_layers 0")
    for tower in towers.values():
        available = len(tower.encoder.layer)
        if layers > available:
            raise ValueError(f"frozen_layers {layers} exceeds the backbone's {available} layers")
        for module in (tower.embeddings, *tower.encoder.layer[:layers]):
            module.requires_grad_(False)


def adamw_with_head_rate(
    model: nn.Module, learning_rate: float, head_learning_rate: float | None, weight_decay: float
) -> torch.optim.AdamW:
    """AdamW: `learning_rate` for the backbone, `head_learning_rate` (default: the same) for the rest.

    Biases and LayerNorm weights get no weight decay, as in BERT's recipe.
    """
    head_rate = learning_rate if head_learning_rate is None else head_learning_rate
    groups: dict[tuple[bool, bool], list[nn.Parameter]] = {}
    for name, parameter in model.named_parameters():
        if not parameter.requires_grad:
            continue
        backbone = name.startswith(BACKBONE_PREFIXES)
        decays = parameter.dim() > 1
        groups.setdefault((backbone, decays), []).append(parameter)
    return torch.optim.AdamW(
        [
            {
                "params": params,
                "lr": learning_rate if backbone else head_rate,
                "weight_decay": weight_decay if decays else 0.0,
            }
            for (backbone, decays), params in sorted(groups.items())
        ]
    )
