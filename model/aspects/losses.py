"""Aspect learning losses (madral-kdd22 Eq. 3, 6, 7) and the pointwise relevance loss L_CE (§7.1).

Every batch reduction is a mean over the entries that carry a label: records
without annotations, empty aspects and unseen values are masked out, and a batch
where nothing is labelled gives a loss of 0 (no gradient), never NaN.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch.nn import functional

from model.aspects.labels import IGNORE_INDEX, AspectLabels


def masked_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean of `values` where `mask`; 0 when nothing is masked in."""
    total = torch.where(mask, values, torch.zeros_like(values)).sum()
    return total / mask.sum().clamp_min(1)


def aspect_prediction_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """L_AP^a = -1/|A_a| Σ_{x ∈ A_a} log P(x) (Eq. 3, madral-kdd22), averaged over labelled records.

    Args:
        logits: (B, |V_a|) from the prediction head; P = softmax(logits).
        targets: (B, M) class ids, `IGNORE_INDEX` for padding and unseen values;
            |A_a| counts only the known ids, so an unseen value neither adds a class
            nor dilutes the known ones.
    """
    known = targets != IGNORE_INDEX
    log_probs = logits.log_softmax(-1).gather(1, targets.clamp_min(0))
    annotations = known.sum(1)
    per_record = -torch.where(known, log_probs, torch.zeros_like(log_probs)).sum(1) / annotations.clamp_min(1)
    return masked_mean(per_record, annotations > 0)


def aspect_presence_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """L_APP^a = -y log P_a - (1-y) log(1-P_a) (Eq. 6, madral-kdd22), averaged over known labels.

    Args:
        logits: (B,) presence logits, P_a = sigmoid(logits).
        targets: (B,) 1 present, 0 absent, `IGNORE_INDEX` unknown (record not annotated).
    """
    known = targets != IGNORE_INDEX
    losses = functional.binary_cross_entropy_with_logits(
        logits, targets.clamp_min(0).to(logits.dtype), reduction="none"
    )
    return masked_mean(losses, known)


def aspect_learning_loss(
    aspect_logits: Mapping[str, torch.Tensor],
    presence_logits: torch.Tensor | None,
    labels: AspectLabels,
    prediction: bool = True,
    presence: bool = True,
) -> torch.Tensor:
    """Σ_{a ∈ A \\ {OTHER}} (L_AP^a + L_APP^a) for one side (Eq. 7, madral-kdd22; the λ term of Eq. 8).

    Only the explicit aspects have labels, heads and presence columns, so OTHER
    (and CLS) never receive an aspect loss. `presence_logits` are in `labels.aspects` order.
    """
    terms: list[torch.Tensor] = []
    if prediction:
        missing = sorted(set(labels.aspects) - set(aspect_logits))
        if missing:
            raise ValueError(f"no prediction head for labelled aspects {missing}")
        terms += [aspect_prediction_loss(aspect_logits[name], labels.values[name]) for name in labels.aspects]
    if presence:
        if presence_logits is None:
            raise ValueError("presence learning needs presence logits; the encoder has no presence heads")
        terms += [
            aspect_presence_loss(presence_logits[:, i], labels.presence[:, i])
            for i in range(len(labels.aspects))
        ]
    if not terms:
        raise ValueError("aspect_learning_loss with neither prediction nor presence learning")
    return torch.stack(terms).sum()


def pointwise_relevance_loss(
    queries: torch.Tensor,
    documents: torch.Tensor,
    relevant: torch.Tensor,
    temperature: float,
    bias: float | torch.Tensor = 0.0,
) -> torch.Tensor:
    """L_CE (madral-kdd22 §7.1): sigmoid cross-entropy on whether judged pair i is relevant.

    The logit is cos(q_i, d_i) / temperature + bias, on the unit-length embeddings
    the retrieval loss uses; `relevant` is binary (madral-kdd22 §8.1 counts grades
    <= 1 as negatives). Mean over the pairs.
    """
    if queries.shape != documents.shape or queries.shape[0] != relevant.shape[0]:
        raise ValueError("queries, documents and relevant must describe the same pairs")
    logits = (queries * documents).sum(-1) / temperature + bias
    return functional.binary_cross_entropy_with_logits(logits, relevant.to(logits.dtype))
