"""When a predicted aspect value is written, and when its aspect reads as unknown instead.

A head can only pick among the values it knows, so on a catalog with other brands it puts an
unknown brand on the nearest known one ("Fellow" -> "penn"), often confidently. `AbstentionRule`
leaves such an aspect unknown: below `min_confidence`, or, for the aspects a listing names in
words (brand, colour), when the text does not state the value. The papers' annotations for those
aspects are extractive (madral-kdd22 §8.1 takes them from the listing), so a value the text does
not name is a guess, not a reading.

Plain Python, apart from `model.annotations` which applies the rule to a forward pass: the stage
options (`pipelines.settings.options`) declare the rule's flags without importing torch.
"""

from __future__ import annotations

from dataclasses import dataclass

from schemas.value_folding import folded_words

# Aspects whose values a listing states in words; a category is inferred ("Kettles" from "Electric Kettle").
STATED_ASPECTS = ("brand", "color")


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
