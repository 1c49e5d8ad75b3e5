"""What an encoder takes and gives: which tower (`Side`), a tokenized batch, one forward pass's output,
one side's pre-training loss, and the device it runs on. Every variant and every stage that runs one
speaks these types (`model.encoder` holds the base class that produces them)."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

import torch


class Side(str, enum.Enum):
    """Which tower encodes a text: madral-kdd22 allows separate query and document encoders."""

    QUERY = "query"
    DOCUMENT = "document"


@dataclass
class EncoderOutput:
    """What one forward pass gives.

    `embedding` is L2-normalised, so dot product equals cosine (madral-kdd22 §3).
    The aspect fields stay empty for single-vector baselines such as BiBERT; the
    multi-aspect variants fill them for losses and for annotations.
    """

    embedding: torch.Tensor
    aspect_logits: dict[str, torch.Tensor] = field(default_factory=dict)
    presence_logits: torch.Tensor | None = None
    fusion_weights: torch.Tensor | None = None
    # Names of the columns of `fusion_weights` (and `fusion_presence`), e.g.
    # ("category", "brand", "color", "other"); empty when nothing is fused.
    fusion_slots: tuple[str, ...] = ()
    # P_a of each fused slot as presence weighting used it (Eq. 5, madral-kdd22); CLS counts as 1.
    fusion_presence: torch.Tensor | None = None
    # (B, len(aspect_slots), hidden) encodings the aspect heads read, named by `aspect_slots`.
    aspect_slots: tuple[str, ...] = ()
    aspect_embeddings: torch.Tensor | None = None
    # (B, len(aspect_slots), L) attention of the Aspect Extraction Network (Table 2, madral-kdd22).
    aspect_attention: torch.Tensor | None = None


@dataclass(frozen=True)
class TokenizedBatch:
    input_ids: torch.Tensor
    attention_mask: torch.Tensor

    def to(self, device: torch.device) -> TokenizedBatch:
        return TokenizedBatch(self.input_ids.to(device), self.attention_mask.to(device))

    def padded_to(self, length: int, pad_token_id: int) -> TokenizedBatch:
        """At least `length` positions, padding with masked-out pad tokens (for first-k readers)."""
        missing = length - self.input_ids.shape[1]
        if missing <= 0:
            return self
        pad = self.input_ids.new_full((self.input_ids.shape[0], missing), pad_token_id)
        return TokenizedBatch(
            torch.cat([self.input_ids, pad], dim=1),
            torch.cat([self.attention_mask, torch.zeros_like(pad, dtype=self.attention_mask.dtype)], dim=1),
        )


@dataclass(frozen=True)
class PretrainingLoss:
    """One side's pre-training loss: `total` = `mlm` + λp · `aspect`.

    Eq. 7 of madral-kdd22 (λp = 1) and Eq. 9 of mural-wsdm24 (λ = the config's aspect_loss_weight).

    `aspect` is exactly 0 for variants that learn no aspects (and when λp = 0).
    """

    total: torch.Tensor
    mlm: torch.Tensor
    aspect: torch.Tensor
    # Accuracy@1 of the batch's aspect predictions over its labelled (record, aspect) pairs;
    # None when the variant predicts no values from one head per aspect (or nothing is labelled).
    aspect_accuracy: float | None = None

    def __post_init__(self) -> None:
        for name in ("total", "mlm", "aspect"):
            if getattr(self, name).dim() != 0:
                raise ValueError(f"PretrainingLoss.{name} must be a scalar tensor")


def pick_device(preferred: str | None = None) -> torch.device:
    """The GPU when there is one, else the CPU; `preferred` overrides ('cpu', 'cuda:1')."""
    if preferred:
        return torch.device(preferred)
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")
