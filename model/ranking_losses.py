"""Retrieval losses over unit-length embeddings."""

from __future__ import annotations

import torch
from torch.nn import functional


def in_batch_softmax_loss(
    queries: torch.Tensor,
    positives: torch.Tensor,
    hard_negatives: torch.Tensor | None,
    temperature: float,
) -> torch.Tensor:
    """Softmax cross-entropy of each query against every document in the batch (L_SCE, Eq. 8, madral-kdd22).

    Query i's positive is document i; the other positives and all hard negatives
    are its negatives. Embeddings are unit length, so the logits are cosines
    divided by the temperature.
    """
    documents = positives if hard_negatives is None else torch.cat([positives, hard_negatives])
    logits = queries @ documents.T / temperature
    targets = torch.arange(queries.shape[0], device=queries.device)
    return functional.cross_entropy(logits, targets)
