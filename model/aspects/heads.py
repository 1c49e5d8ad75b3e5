"""Aspect prediction and aspect presence heads (madral-kdd22 §5 and §6.2)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch
from torch import nn

from model.aspects.extraction import ExtractedSlots
from model.aspects.vocabulary import AspectVocabulary


class AspectPredictionHeads(nn.Module):
    """P(x) = softmax(E_a U_a^T + b_a) over the values x of V_a (madral-kdd22 §5).

    One `Linear` per aspect holds U_a (its weight, |V_a| x H) and b_a (its bias).
    The encoder keeps a single instance for both towers, because U_a and b_a are
    shared between the query and the document encoders (madral-kdd22 §5). The rows
    of U_a are the aspect value embeddings of Table 9. Used for training and
    interpretation only: the retrieval embedding never depends on them.
    """

    def __init__(self, hidden: int, vocabulary_sizes: Mapping[str, int]) -> None:
        super().__init__()
        self.tables = nn.ModuleDict(
            {name: nn.Linear(hidden, size) for name, size in vocabulary_sizes.items()}
        )

    @property
    def aspects(self) -> tuple[str, ...]:
        return tuple(self.tables)

    def forward(self, slots: ExtractedSlots) -> dict[str, torch.Tensor]:
        """Logits (B, |V_a|) per aspect; softmax gives P(x)."""
        return {name: table(slots.get(name)) for name, table in self.tables.items()}

    @torch.no_grad()
    def nearest_values(self, aspect: str, value_id: int, top: int) -> list[tuple[int, float]]:
        """The `top` rows of U_a nearest to row `value_id` by cosine, as (value id, cosine), the value
        itself first at 1.0: the neighbours of Table 9 (madral-kdd22)."""
        table = nn.functional.normalize(self.tables[aspect].weight, dim=-1)
        best = torch.topk(table @ table[value_id], min(top, table.shape[0]))
        return list(zip(best.indices.tolist(), best.values.tolist(), strict=True))


class PresenceHeads(nn.Module):
    """P_a = SigmoidLayer(E_a) (madral-kdd22 §6.2, Eq. 5/6); returns the logits.

    Per tower, since it belongs to the presence-weighting fusion network. Which
    slots get a head is the tower's choice: the explicit aspects for the APP loss,
    and every fused slot for presence weighting (OTHER included, whose presence
    only the retrieval loss trains, as in Table 8 of madral-kdd22).
    """

    def __init__(self, hidden: int, names: Sequence[str]) -> None:
        super().__init__()
        self.names = tuple(names)
        self.layers = nn.ModuleDict({name: nn.Linear(hidden, 1) for name in self.names})

    def forward(self, slots: ExtractedSlots) -> torch.Tensor:
        """(B, len(names)) presence logits, in `names` order."""
        return torch.cat([self.layers[name](slots.get(name)) for name in self.names], dim=-1)


def copy_value_rows(
    heads: AspectPredictionHeads,
    vocabulary: AspectVocabulary,
    source: Mapping[str, torch.Tensor],
    source_vocabulary: AspectVocabulary,
    prefix: str,
) -> dict[str, int]:
    """Copy U_a and b_a row by value from another model's heads (`source`, its tensors under `prefix`,
    its classes `source_vocabulary`) into `heads`, whose classes are `vocabulary`'s.

    A row is a value's class id in one vocabulary; two vocabularies counted over other products order
    their classes otherwise, so a copy by tensor shape would give values each other's rows. Values the
    source lacks keep their initialisation. Returns the rows copied per tensor name.
    """
    copied: dict[str, int] = {}
    with torch.no_grad():
        for aspect, table in heads.tables.items():
            if aspect not in source_vocabulary.aspects:
                continue
            theirs = {value: row for row, value in enumerate(source_vocabulary.values(aspect).values)}
            mine = vocabulary.values(aspect).values
            pairs = [(row, theirs[value]) for row, value in enumerate(mine) if value in theirs]
            if not pairs:
                continue
            rows, their_rows = (list(r) for r in zip(*pairs, strict=True))
            for part in ("weight", "bias"):
                name = f"{prefix}.{aspect}.{part}"
                if name in source:
                    getattr(table, part)[rows] = source[name][their_rows].to(getattr(table, part).dtype)
                    copied[name] = len(pairs)
    return copied
