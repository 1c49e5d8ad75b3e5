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

import numpy as np
import pyarrow as pa
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


def _map_column(
    keys: Sequence[str], items: np.ndarray, present: np.ndarray, item_type: pa.DataType
) -> pa.Array:
    """A map column of `rows` maps from a (rows, len(keys)) grid of items, each row holding the keys it
    has `present`, in `keys`' order; a row with none is null, as `RecordAnnotations.as_row` writes it."""
    rows = present.shape[0]
    counts = present.sum(axis=1, dtype=np.int32)
    offsets = pa.array(np.concatenate([[0], np.cumsum(counts)]).astype(np.int32))
    flat = present.ravel()
    key_array = pa.array(np.tile(np.asarray(keys, dtype=object), rows)[flat], pa.string())
    item_array = pa.array(items.ravel()[flat], item_type)
    map_type = pa.map_(pa.string(), item_type)
    return pa.MapArray.from_arrays(offsets, key_array, item_array, type=map_type, mask=pa.array(counts == 0))


def _rounded(values: torch.Tensor) -> np.ndarray:
    # As `annotate` rounds (6 decimals), before the float32 the schema stores.
    return np.round(values.float().numpy().astype(np.float64), 6)


class ColumnAnnotator:
    """`annotate`'s annotations of a batch as the embedding schema's four map columns, built column-wise:
    the same values as `RecordAnnotations.as_row` of each row, without a Python object per record.

    Made once per loaded model: it keeps each aspect's class names and each name's folded words, looked
    up once per class rather than once per row.
    """

    def __init__(self, encoder: DenseEncoder, rule: AbstentionRule | None = None) -> None:
        self.encoder = encoder
        self.rule = rule or EVERY_PREDICTION
        self.vocabulary = getattr(encoder, "vocabulary", None)
        self.names: dict[str, np.ndarray] = {}
        self.folded_values: dict[str, str] = {}

    def _names(self, aspect: str, index: np.ndarray) -> np.ndarray:
        if self.vocabulary is None:  # a class id, which no text states: confidence alone decides
            return index.astype(str).astype(object)
        if aspect not in self.names:
            size = len(self.vocabulary.values(aspect))
            spelled = [self.vocabulary.spell(aspect, i) for i in range(size)]
            self.names[aspect] = np.asarray(spelled, dtype=object)
        return self.names[aspect][index]

    def _stated(self, folded_text: str, value: str) -> bool:
        # `states_value`, with the value's folded words kept
        if value not in self.folded_values:
            self.folded_values[value] = folded_words(value)
        words = self.folded_values[value]
        return words.strip() != "" and words in folded_text

    @torch.no_grad()
    def __call__(self, output: EncoderOutput, texts: Sequence[str] | None = None) -> dict[str, pa.Array]:
        rows = output.embedding.shape[0]
        if texts is not None and len(texts) != rows:
            raise ValueError(f"{len(texts)} texts for {rows} encoded rows")
        temperatures = self.encoder.config.aspect_temperatures
        aspects = list(output.aspect_logits)
        names = np.empty((rows, len(aspects)), dtype=object)
        confidences = np.zeros((rows, len(aspects)), dtype=np.float64)
        kept = np.zeros((rows, len(aspects)), dtype=bool)
        folded: list[str] | None = None
        for column, (aspect, logits) in enumerate(output.aspect_logits.items()):
            # P(x) = softmax(E_a U_a^T + b_a), §5, over the aspect's fitted temperature.
            best, index = aspect_probabilities(logits, temperatures.get(aspect, 1.0)).max(dim=-1)
            names[:, column] = self._names(aspect, index.numpy())
            keep = best.float().numpy() >= self.rule.min_confidence  # unrounded, as `annotate` compares
            if texts is not None and self.vocabulary is not None and aspect in self.rule.stated_aspects:
                folded = folded or [folded_words(text) for text in texts]
                pairs = zip(keep.tolist(), folded, names[:, column].tolist(), strict=True)
                keep = np.fromiter((k and self._stated(f, name) for k, f, name in pairs), bool, rows)
            kept[:, column] = keep
            confidences[:, column] = _rounded(best)
        every = np.ones((rows, len(aspects)), dtype=bool)
        columns = {
            "aspect_values": _map_column(aspects, names, kept, pa.string()),
            "aspect_confidences": _map_column(aspects, confidences, every, pa.float32()),
            "aspect_presence": pa.nulls(rows, pa.map_(pa.string(), pa.float32())),
            "fusion_weights": pa.nulls(rows, pa.map_(pa.string(), pa.float32())),
        }
        if output.presence_logits is not None:
            presence = _rounded(torch.sigmoid(output.presence_logits.float()))
            present = np.ones(presence.shape, dtype=bool)
            columns["aspect_presence"] = _map_column(
                self.encoder.config.aspects, presence, present, pa.float32()
            )
        slots = output.fusion_slots
        if output.fusion_weights is not None and slots:
            weights = _rounded(output.fusion_weights)
            present = np.ones(weights.shape, dtype=bool)
            columns["fusion_weights"] = _map_column(list(slots), weights, present, pa.float32())
        return {name: columns[name] for name in ANNOTATION_COLUMNS}
