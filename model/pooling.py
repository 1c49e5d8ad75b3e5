"""How one vector summarises a text's token encodings, and how the projection above it starts.

The papers read the CLS encoding of a BERT pre-trained with MLM (madral-kdd22 §8.2). The bundled
MiniLM is a sentence-embedding model instead: it was trained contrastively with *mean* pooling,
and its CLS encoding was never trained as an embedding. Used as it is (mean pooling, no projection,
as sentence-transformers does), it is a strong retriever with no training at all, and a model that
starts from exactly that point (mean pooling, an identity projection) can only move away from it
as far as training pays for.
"""

from __future__ import annotations

import enum

import torch


class Pooling(str, enum.Enum):
    """Which encoding summarises the text: the variant's embedding and every "CLS" slot read it."""

    CLS = "cls"  # the first position (the papers, on an MLM-pre-trained BERT)
    MEAN = "mean"  # the mean over attended positions (how sentence-embedding backbones were trained)


class ProjectionInit(str, enum.Enum):
    """How the linear projection to `projection_dim` starts."""

    RANDOM = "random"  # nn.Linear's default (the papers: a new 128-wide layer)
    IDENTITY = "identity"  # the identity: a new model embeds exactly as its backbone does


def pool(hidden: torch.Tensor, attention_mask: torch.Tensor, pooling: Pooling) -> torch.Tensor:
    """(B, L, H) token encodings -> (B, H): CLS, or the mean over attended positions.

    The mean is sentence-transformers' `Pooling(pooling_mode_mean_tokens=True)`: padding is left
    out, [CLS] and [SEP] are in, so the bundled backbone pooled this way is its zero-shot self.
    """
    if Pooling(pooling) is Pooling.CLS:
        return hidden[:, 0]
    mask = attention_mask[:, : hidden.shape[1], None].to(hidden.dtype)
    return (hidden * mask).sum(1) / mask.sum(1).clamp_min(1e-9)


def positions_for(pooling: Pooling) -> int | None:
    """Leading positions of the last layer pooling reads (None: all of them)."""
    return 1 if Pooling(pooling) is Pooling.CLS else None


def initialise_projection(projection: torch.nn.Linear, init: ProjectionInit) -> None:
    """Start `projection` as `init` says; identity needs a square layer (projection_dim = hidden)."""
    if ProjectionInit(init) is ProjectionInit.RANDOM:
        return
    if projection.in_features != projection.out_features:
        raise ValueError(
            f"projection_init='identity' needs projection_dim = hidden size ({projection.in_features}), "
            f"got {projection.out_features}"
        )
    with torch.no_grad():
        projection.weight.copy_(torch.eye(projection.in_features))
        if projection.bias is not None:
            projection.bias.zero_()
