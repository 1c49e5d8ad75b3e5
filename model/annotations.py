"""Per-record annotations from a forward pass: what madral-kdd22 Table 8 shows.

For each aspect: the predicted value and its confidence P(x) (§5), the presence
probability P_a (Eq. 5-6), and each fusion slot's weight w_a (Eq. 4-5). Variants
without aspect heads simply give fewer fields; nothing here depends on a variant
name, only on what the `EncoderOutput` holds.

A head can only pick among the values it knows, so on a catalog with other brands it puts an
unknown brand on the nearest known one ("Fellow" -> "penn"), often confidently. `AbstentionRule`
leaves such an aspect unknown: below `min_confidence`, or, for the aspects a listing names in
words (brand, colour), when the text does not state the value. The papers' annotations for those
aspects are extractive (madral-kdd22 §8.1 takes them from the listing), so a value the text does
not name is a guess, not a reading.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

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

# Aspects whose values a listing states in words; a category is inferred ("Kettles" from "Electric Kettle").
STATED_ASPECTS = ("brand", "color")
_WORD = re.compile(r"\w+")


def folded_words(text: str) -> str:
    """`text` as its words, case-folded, accents dropped, spaces around each ("Wüsthof," -> " wusthof ")."""
    plain = text.casefold()
    if not plain.isascii():
        # NFKD splits "ü" into "u" and a combining mark, dropped here. Only for non-ASCII text: the
        # per-character pass was 80% of annotating a batch, and an ASCII text is already NFKD.
        decomposed = unicodedata.normalize("NFKD", plain)
        plain = "".join(char for char in decomposed if not unicodedata.combining(char))
    return f" {' '.join(_WORD.findall(plain))} "


def states_value(folded_text: str, value: str) -> bool:
    """Whether a text (from `folded_words`) names `value` as whole words: "black" in "matte black", not
    "lack"; "Wüsthof" in "WUSTHOF". A value with no words is never stated."""
    words = folded_words(value)
    return words.strip() != "" and words in folded_text


@dataclass(frozen=True)
class AbstentionRule:
    """When a predicted value is written, and when its aspect reads as unknown instead.

    `min_confidence`: a value below this P(x) is left out. `stated_aspects`: for these aspects a value is
    kept only when the record's text states it (`states_value`); an unknown brand is then left unknown,
    not put on a known one. The confidence is reported either way, so a reader sees how close it came.
    """

    min_confidence: float = 0.0
    stated_aspects: tuple[str, ...] = STATED_ASPECTS

    def __post_init__(self) -> None:
        if not 0 <= self.min_confidence <= 1:
            raise ValueError(f"min_confidence must be in [0, 1], got {self.min_confidence}")
        object.__setattr__(self, "stated_aspects", tuple(self.stated_aspects))

    def keeps(self, aspect: str, value: str, confidence: float, folded_text: str | None) -> bool:
        """Whether `value` is written for `aspect`; `folded_text` is the record's `folded_words` (None: no
        text to check against, so only the confidence decides)."""
        if confidence < self.min_confidence:
            return False
        return folded_text is None or aspect not in self.stated_aspects or states_value(folded_text, value)


# Every prediction written, whatever its confidence or text: the papers' view, and the default of a caller
# that passes no rule.
EVERY_PREDICTION = AbstentionRule(0.0, stated_aspects=())


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
