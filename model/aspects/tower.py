"""One side's aspect layers over the transformer output: extract -> presence -> fuse -> project.

The composition of madral-kdd22 Figure 1 above BERT: an extractor gives named
slot encodings, presence heads give P_a where needed, a fusion network weighs
the fused slots, and a linear projection to `projection_dim` (madral-kdd22 §8.2)
precedes the L2 normalisation. With `FusionType.NONE` the embedding is the CLS
encoding and the slots only serve aspect learning (repro-ecir24 §5.2).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional

from model.aspects.extraction import ExtractedSlots
from model.aspects.fusion import CLS, FusionType, build_fusion
from model.aspects.heads import PresenceHeads
from model.pooling import Pooling, ProjectionInit, initialise_projection, pool, positions_for


@dataclass
class TowerOutput:
    embedding: torch.Tensor  # (B, projection_dim), unit length
    slots: ExtractedSlots
    presence_names: tuple[str, ...]
    presence_logits: torch.Tensor | None  # (B, len(presence_names))
    fusion_slots: tuple[str, ...]
    fusion_weights: torch.Tensor | None  # (B, len(fusion_slots)), rows sum to one
    fusion_presence: torch.Tensor | None  # (B, len(fusion_slots)) P_a used by presence weighting

    def presence_of(self, names: Sequence[str]) -> torch.Tensor | None:
        """Presence logits of `names`, in that order; None when some has no presence head."""
        if self.presence_logits is None or not set(names) <= set(self.presence_names):
            return None
        return self.presence_logits[:, [self.presence_names.index(name) for name in names]]


class AspectTower(nn.Module):
    """Aspect extraction, presence, fusion and projection for one tower.

    Args:
        extractor: an extraction module (`model.aspects.extraction`) with `names` and `min_length`.
        fusion: how the slots are weighed; NONE embeds CLS alone.
        cls_slot: fuse the CLS encoding as one more slot, named "cls" (repro-ecir24 Eq. 4).
        presence_learning: slots that get a presence head for the APP loss (the explicit aspects).
            Presence weighting adds a head on every other extracted slot it fuses (OTHER,
            MpBERT's tokens); the CLS slot has none and counts as always present (P = 1),
            since CLS summarises the whole text and γ_CLS alone sets its share.
        pooling: the summary encoding read as "CLS" (the CLS slot, gating, fusion NONE's embedding).
        projection_init: how the projection starts (`model.pooling.ProjectionInit`).
    """

    def __init__(
        self,
        extractor: nn.Module,
        fusion: FusionType,
        hidden: int,
        projection_dim: int,
        cls_slot: bool = False,
        presence_learning: Sequence[str] = (),
        pooling: Pooling = Pooling.CLS,
        projection_init: ProjectionInit = ProjectionInit.RANDOM,
    ) -> None:
        super().__init__()
        fusion = FusionType(fusion)
        self.extractor = extractor
        self.weighs_by_presence = fusion.uses_presence
        names: tuple[str, ...] = extractor.names
        if fusion is FusionType.NONE:
            self.fusion_slots: tuple[str, ...] = ()
        else:
            self.fusion_slots = names + ((CLS,) if cls_slot else ())
        presence = dict.fromkeys(presence_learning)
        if fusion.uses_presence:
            presence.update(dict.fromkeys(names))
        unknown = sorted(set(presence) - set(names))
        if unknown:
            raise ValueError(f"presence heads asked for slots {unknown} the extractor does not produce")
        self.presence = PresenceHeads(hidden, tuple(presence)) if presence else None
        self.fusion = build_fusion(fusion, hidden, len(self.fusion_slots))
        self.projection = nn.Linear(hidden, projection_dim)
        initialise_projection(self.projection, projection_init)
        self.pooling = Pooling(pooling)

    @property
    def positions_read(self) -> int | None:
        """Leading positions of the sequence output this tower reads (None: all); the summary
        encoding needs one (CLS) or all of them (mean pooling)."""
        if positions_for(self.pooling) is None:
            return None
        return getattr(self.extractor, "positions_read", None)

    @property
    def min_length(self) -> int:
        """Shortest token sequence the extractor can read (first-k needs k + 1)."""
        return int(self.extractor.min_length)

    def forward(self, hidden: torch.Tensor, attention_mask: torch.Tensor) -> TowerOutput:
        slots: ExtractedSlots = self.extractor(hidden, attention_mask)
        cls_encoding = pool(hidden, attention_mask, self.pooling)  # CLS, or the mean (model.pooling)
        presence_names = self.presence.names if self.presence is not None else ()
        presence_logits = self.presence(slots) if self.presence is not None else None
        weights = fusion_presence = None
        if self.fusion is None:
            fused = cls_encoding
        else:
            encodings = slots.encodings
            if CLS in self.fusion_slots:
                encodings = torch.cat([encodings, cls_encoding[:, None]], dim=1)
            if self.weighs_by_presence and presence_logits is not None:
                fusion_presence = torch.stack(
                    [
                        presence_logits[:, presence_names.index(name)].sigmoid()
                        if name in presence_names
                        else torch.ones_like(cls_encoding[:, 0])
                        for name in self.fusion_slots
                    ],
                    dim=-1,
                )
            weights = self.fusion(cls_encoding, fusion_presence)
            fused = (weights[..., None] * encodings).sum(1)  # Eq. 4, madral-kdd22
        embedding = functional.normalize(self.projection(fused), dim=-1)
        return TowerOutput(
            embedding, slots, presence_names, presence_logits, self.fusion_slots, weights, fusion_presence
        )
