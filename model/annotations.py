"""Per-record annotations from a forward pass: what madral-kdd22 Table 8 shows.

For each aspect: the predicted value and its confidence P(x) (§5), the presence
probability P_a (Eq. 5-6), and each fusion slot's weight w_a (Eq. 4-5). Variants
without aspect heads simply give fewer fields; nothing here depends on a variant
name, only on what the `EncoderOutput` holds.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from model.encoder import DenseEncoder, EncoderOutput
from schemas import EMBEDDING_ANNOTATION_COLUMNS


@dataclass(frozen=True)
class RecordAnnotations:
    """One record's annotations, keyed by aspect or fusion-slot name."""

    aspect_values: dict[str, str] = field(default_factory=dict)
    aspect_confidences: dict[str, float] = field(default_factory=dict)
    aspect_presence: dict[str, float] = field(default_factory=dict)
    fusion_weights: dict[str, float] = field(default_factory=dict)

    def as_row(self) -> dict[str, dict[str, float] | dict[str, str] | None]:
        """Columns of the embedding schema; an empty map is stored as null."""
        return {name: (getattr(self, name) or None) for name in ANNOTATION_COLUMNS}


ANNOTATION_COLUMNS = EMBEDDING_ANNOTATION_COLUMNS


@torch.no_grad()
def annotate(
    encoder: DenseEncoder, output: EncoderOutput, min_confidence: float = 0.0
) -> list[RecordAnnotations]:
    """Annotations of every row of a batch's output.

    A predicted value whose confidence P(x) is below `min_confidence` is left out of
    `aspect_values` (the aspect reads as unknown); its confidence is still reported, so
    a reader can see how close it came.
    """
    if not 0 <= min_confidence <= 1:
        raise ValueError(f"min_confidence must be in [0, 1], got {min_confidence}")
    rows = output.embedding.shape[0]
    vocabulary = getattr(encoder, "vocabulary", None)
    values: list[dict[str, str]] = [{} for _ in range(rows)]
    confidences: list[dict[str, float]] = [{} for _ in range(rows)]
    for aspect, logits in output.aspect_logits.items():
        probabilities = torch.softmax(logits.float(), dim=-1)  # P(x) = softmax(E_a U_a^T + b_a), §5
        best, index = probabilities.max(dim=-1)
        for row in range(rows):
            value_id = int(index[row])
            # In the catalog's most frequent spelling, so restricts and filters match it exactly.
            name = vocabulary.spell(aspect, value_id) if vocabulary is not None else str(value_id)
            confidence = float(best[row])
            if confidence >= min_confidence:
                values[row][aspect] = name
            confidences[row][aspect] = round(confidence, 6)
    presence: list[dict[str, float]] = [{} for _ in range(rows)]
    if output.presence_logits is not None:
        probabilities = torch.sigmoid(output.presence_logits.float())
        for row in range(rows):
            named = zip(encoder.config.aspects, probabilities[row], strict=True)
            presence[row] = {aspect: round(float(p), 6) for aspect, p in named}
    weights: list[dict[str, float]] = [{} for _ in range(rows)]
    slots = output.fusion_slots
    if output.fusion_weights is not None and slots:
        for row in range(rows):
            weights[row] = {
                s: round(float(w), 6) for s, w in zip(slots, output.fusion_weights[row], strict=True)
            }
    return [
        RecordAnnotations(values[row], confidences[row], presence[row], weights[row]) for row in range(rows)
    ]
