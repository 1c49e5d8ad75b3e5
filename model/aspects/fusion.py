"""Aspect fusion networks: one weight per slot, fused as E = Σ_a w_a E_a (Eq. 4, madral-kdd22).

Each network only computes the weights (B, S), which sum to one over the slots;
the tower does the weighted sum, so every fusion yields an embedding that is a
convex combination of its slots (what makes madral-kdd22 §9.4's explanation work).

The slots are the explicit aspects plus one implicit slot: OTHER, an extra
learned aspect with no annotations (madral-kdd22 §4, "MADRAL-ori"), or the CLS
encoding (repro-ecir24 §5.2, "en-v1"), which repro-ecir24 finds far easier to train.
"""

from __future__ import annotations

import enum

import torch
from torch import nn

OTHER = "other"
CLS = "cls"

# L1-normalising presence weights divides by their sum; this keeps an all-absent input finite.
_EPS = 1e-12


class FusionType(str, enum.Enum):
    WEIGHTED_SUM = "weighted_sum"  # Eq. 4: input-independent softmax(γ)
    PRESENCE_WEIGHTING = "presence_weighting"  # Eq. 5: P_a(Q)·γ_a, L1-normalised
    CLS_GATING = "cls_gating"  # §6.3: softmax(Linear(E_CLS))
    NONE = "none"  # no fusion: the CLS encoding alone (repro-ecir24 §5.2, "Only CLS")

    @property
    def uses_presence(self) -> bool:
        return self is FusionType.PRESENCE_WEIGHTING


class ImplicitSlot(str, enum.Enum):
    """The slot fused next to the explicit aspects (repro-ecir24 §5.2, Eq. 3 vs Eq. 4)."""

    OTHER = OTHER
    CLS = CLS


class WeightedSum(nn.Module):
    """w_a = e^{γ_a} / Σ_a' e^{γ_a'} (Eq. 4, madral-kdd22); γ starts at 0, i.e. uniform weights."""

    def __init__(self, slots: int) -> None:
        super().__init__()
        self.gamma = nn.Parameter(torch.zeros(slots))

    def forward(self, cls_encoding: torch.Tensor, presence: torch.Tensor | None) -> torch.Tensor:
        return self.gamma.softmax(-1).expand(cls_encoding.shape[0], -1)


class PresenceWeighting(nn.Module):
    """w_a(Q) = P_a(Q)·γ_a, L1-normalised (Eq. 5, madral-kdd22).

    γ_a = softmax(raw γ)_a keeps the importances positive (so the L1 norm is their
    sum and the weights sum to one); the softmax's denominator cancels in the
    normalisation, so with every presence at 1 this is exactly Eq. 4's weighted sum.
    An absent aspect (P_a = 0) gets weight 0, as the colour in Table 8.
    """

    def __init__(self, slots: int) -> None:
        super().__init__()
        self.gamma = nn.Parameter(torch.zeros(slots))

    def forward(self, cls_encoding: torch.Tensor, presence: torch.Tensor | None) -> torch.Tensor:
        if presence is None:
            raise ValueError("presence weighting needs presence probabilities for every slot")
        weights = presence * self.gamma.softmax(-1)
        return weights / weights.sum(-1, keepdim=True).clamp_min(_EPS)


class ClsGating(nn.Module):
    """w = softmax(Linear(E_CLS)) over the slots (§6.3, madral-kdd22), a mixture-of-experts gate."""

    def __init__(self, hidden: int, slots: int) -> None:
        super().__init__()
        self.gate = nn.Linear(hidden, slots)

    def forward(self, cls_encoding: torch.Tensor, presence: torch.Tensor | None) -> torch.Tensor:
        return self.gate(cls_encoding).softmax(-1)


def build_fusion(fusion: FusionType, hidden: int, slots: int) -> nn.Module | None:
    """The weight network a config names; None for `FusionType.NONE` (CLS alone)."""
    builders = {
        FusionType.WEIGHTED_SUM: lambda: WeightedSum(slots),
        FusionType.PRESENCE_WEIGHTING: lambda: PresenceWeighting(slots),
        FusionType.CLS_GATING: lambda: ClsGating(hidden, slots),
        FusionType.NONE: lambda: None,
    }
    return builders[FusionType(fusion)]()
