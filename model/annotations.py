"""Per-record annotations from a forward pass: what madral-kdd22 Table 8 shows.

For each aspect: the predicted value and its confidence P(x) (§5), the presence
probability P_a (Eq. 5-6), and each fusion slot's weight w_a (Eq. 4-5). Variants
without aspect heads simply give fewer fields; nothing here depends on a variant
name, only on what the `EncoderOutput` holds.

Which predicted values are written is `model.abstention.AbstentionRule`'s to say.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from model.abstention import EVERY_PREDICTION, AbstentionRule, folded_words
from model.aspects.calibration import aspect_probabilities
from model.batch import EncoderOutput
from model.encoder import DenseEncoder
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
    encoder: DenseEncoder,
    output: EncoderOutput,
    rule: AbstentionRule | None = None,
    texts: Sequence[str] | None = None,
) -> list[RecordAnnotations]:
    """Annotations of every row of a batch's output, whose texts were `texts`.

    A predicted value `rule` does not keep is left out of `aspect_values` (the aspect reads as
    unknown); its confidence is still reported. Without `texts`, only the confidence decides; without
    a rule, every prediction is written.
    """
    rule = rule or EVERY_PREDICTION
    rows = output.embedding.shape[0]
    if texts is not None and len(texts) != rows:
        raise ValueError(f"{len(texts)} texts for {rows} encoded rows")
    folded = [folded_words(text) for text in texts] if texts is not None else [None] * rows
    vocabulary = getattr(encoder, "vocabulary", None)
    temperatures = encoder.config.aspect_temperatures
    values: list[dict[str, str]] = [{} for _ in range(rows)]
    confidences: list[dict[str, float]] = [{} for _ in range(rows)]
    for aspect, logits in output.aspect_logits.items():
        # P(x) = softmax(E_a U_a^T + b_a), §5, over the aspect's fitted temperature (aspects/calibration.py).
        probabilities = aspect_probabilities(logits, temperatures.get(aspect, 1.0))
        best, index = probabilities.max(dim=-1)
        # As Python lists first: indexing a tensor row by row cost about 10 us an element.
        for row, (value_id, confidence) in enumerate(zip(index.tolist(), best.float().tolist(), strict=True)):
            # In the catalog's most frequent spelling, so restricts and filters match it exactly.
            name = vocabulary.spell(aspect, value_id) if vocabulary is not None else str(value_id)
            # Without a vocabulary the name is a class id, which no text states: confidence alone decides.
            text = folded[row] if vocabulary is not None else None
            if rule.keeps(aspect, name, confidence, text):
                values[row][aspect] = name
            confidences[row][aspect] = round(confidence, 6)
    presence: list[dict[str, float]] = [{} for _ in range(rows)]
    if output.presence_logits is not None:
        for row, probabilities in enumerate(torch.sigmoid(output.presence_logits.float()).tolist()):
            named = zip(encoder.config.aspects, probabilities, strict=True)
            presence[row] = {aspect: round(p, 6) for aspect, p in named}
    weights: list[dict[str, float]] = [{} for _ in range(rows)]
    slots = output.fusion_slots
    if output.fusion_weights is not None and slots:
        for row, row_weights in enumerate(output.fusion_weights.float().tolist()):
            weights[row] = {s: round(w, 6) for s, w in zip(slots, row_weights, strict=True)}
    return [
        RecordAnnotations(values[row], confidences[row], presence[row], weights[row]) for row in range(rows)
    ]
