"""Aspect label tensors for one batch, built from records' `aspects` annotations.

Two kinds of labels, both padded with `IGNORE_INDEX` where nothing is known:

- `values[a]`: (B, M_a) class ids of the annotations of aspect a (madral-kdd22 Eq. 3
  averages over several annotations); unseen values are `IGNORE_INDEX` too.
- `presence`: (B, |A|) 1 when aspect a has any annotation, 0 when it has none
  (madral-kdd22 §6.2), `IGNORE_INDEX` when the record is not annotated at all
  (e.g. MA-Amazon queries, repro-ecir24 §7: absence of labels is not absence of aspects).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch

from model.aspects.vocabulary import UNSEEN, AspectVocabulary, Tokenize

IGNORE_INDEX = UNSEEN

# None: the record carries no annotations at all; {}: annotated, and no aspect applies.
Annotations = Mapping[str, Sequence[str]] | None


@dataclass(frozen=True)
class AspectLabels:
    values: dict[str, torch.Tensor]
    presence: torch.Tensor

    def __post_init__(self) -> None:
        batch = self.presence.shape[0]
        if self.presence.dim() != 2 or self.presence.shape[1] != len(self.values):
            raise ValueError(
                f"presence must be (batch, {len(self.values)}), got {tuple(self.presence.shape)}"
            )
        for name, ids in self.values.items():
            if ids.dim() != 2 or ids.shape[0] != batch:
                raise ValueError(f"values[{name!r}] must be (batch={batch}, annotations)")

    @property
    def aspects(self) -> tuple[str, ...]:
        return tuple(self.values)

    @torch.no_grad()
    def top1_accuracy(self, logits: dict[str, torch.Tensor]) -> float | None:
        """Share of labelled (record, aspect) pairs whose argmax is one of the record's known values."""
        hits = total = 0
        for name, ids in self.values.items():
            if name not in logits:
                continue
            known = ids != IGNORE_INDEX
            labelled = known.any(1)
            top = logits[name].argmax(-1, keepdim=True)
            hits += int(((ids == top) & known).any(1)[labelled].sum())
            total += int(labelled.sum())
        return hits / total if total else None

    def to(self, device: torch.device | str) -> AspectLabels:
        return AspectLabels({n: t.to(device) for n, t in self.values.items()}, self.presence.to(device))

    @classmethod
    def from_annotations(
        cls,
        annotations: Sequence[Annotations],
        vocabulary: AspectVocabulary,
        aspects: Sequence[str],
        tokenize: Tokenize | None = None,
    ) -> AspectLabels:
        """Labels for a batch, in `aspects` order (the model config's)."""
        values: dict[str, torch.Tensor] = {}
        for name in aspects:
            rows = [
                vocabulary.encode(name, record.get(name) or (), tokenize) if record is not None else []
                for record in annotations
            ]
            width = max(1, *(len(row) for row in rows)) if rows else 1
            padded = [row + [IGNORE_INDEX] * (width - len(row)) for row in rows]
            values[name] = torch.tensor(padded, dtype=torch.long).reshape(len(rows), width)
        presence = [
            [IGNORE_INDEX if record is None else int(bool(record.get(name))) for name in aspects]
            for record in annotations
        ]
        return cls(values, torch.tensor(presence, dtype=torch.long).reshape(len(annotations), len(aspects)))
