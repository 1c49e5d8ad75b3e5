"""Configurations of MURAL and MUR (mural-wsdm24), saved as config.json like every variant."""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass, field
from typing import ClassVar

from model.config import EncoderConfig
from model.mural_aspects import GRANULARITIES, AspectGroup, Grouping, aspect_groups


class ValueTables(str, enum.Enum):
    """Where value embeddings e_v come from (mural-wsdm24 §4.2)."""

    SHARED = "shared"  # mean of the backbone's token embeddings of v, recomputed every step
    UNSHARED = "unshared"  # a separate table per (aspect, granularity), initialised to that mean


@dataclass(frozen=True)
class MuralConfig(EncoderConfig):
    """MURAL settings; defaults are the paper's best MA-Amazon setup (Table 4, §5.3.1).

    Attributes:
        granularities: the value granularities G learnt (Table 5 ablates them).
        grouping: 'single' (a guiding token per aspect and granularity, Eq. 3),
            'granularity' (per granularity, Eq. 4) or 'aspect' (per aspect, Eq. 5).
        value_tables: 'unshared' or 'shared' (§4.2).
        value_vocabulary_sizes: aspect -> granularity -> |V_a^g|; sizes the unshared
            tables so a saved model loads without its vocabularies. Required for every
            (aspect, granularity) when `aspect_loss_weight` > 0.
        aspect_loss_weight: λ of Eq. 9 (0.1 in §5.3.1); 0 gives MUR.
        query_mask_probability / document_mask_probability: MLM ratios (0.3 / 0.15, §5.3.1).
        fusion_includes_cls: also offer the CLS encoding as a fusion slot; Eq. 7 fuses
            only the guiding tokens, so it is off by default.
    """

    variant: ClassVar[str] = "mural"
    model_id: str = "mural"
    granularities: tuple[str, ...] = GRANULARITIES
    grouping: str = Grouping.GRANULARITY.value
    value_tables: str = ValueTables.UNSHARED.value
    value_vocabulary_sizes: dict[str, dict[str, int]] = field(default_factory=dict)
    aspect_loss_weight: float = 0.1
    query_mask_probability: float = 0.3
    document_mask_probability: float = 0.15
    fusion_includes_cls: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "granularities", tuple(self.granularities))
        sizes = json.loads(json.dumps(self.value_vocabulary_sizes, sort_keys=True))
        object.__setattr__(self, "value_vocabulary_sizes", sizes)
        if not self.granularities or len(set(self.granularities)) != len(self.granularities):
            raise ValueError(f"granularities must be non-empty and unique, got {self.granularities}")
        unknown = set(self.granularities) - set(GRANULARITIES)
        if unknown:
            raise ValueError(f"unknown granularities {sorted(unknown)}; use some of {GRANULARITIES}")
        if self.grouping not in {g.value for g in Grouping}:
            raise ValueError(f"grouping must be one of {[g.value for g in Grouping]}, got {self.grouping!r}")
        if self.value_tables not in {v.value for v in ValueTables}:
            raise ValueError(f"value_tables must be 'shared' or 'unshared', got {self.value_tables!r}")
        if self.aspect_loss_weight < 0:
            raise ValueError(f"aspect_loss_weight must be >= 0, got {self.aspect_loss_weight}")
        for name in ("query_mask_probability", "document_mask_probability"):
            if not 0 < getattr(self, name) < 1:
                raise ValueError(f"{name} must be in (0, 1), got {getattr(self, name)}")
        for aspect, tables in sizes.items():
            if aspect not in self.aspects or not set(tables) <= set(self.granularities):
                raise ValueError(f"value_vocabulary_sizes[{aspect!r}] names an unknown aspect or granularity")
            if any(int(size) < 0 for size in tables.values()):
                raise ValueError(f"value_vocabulary_sizes[{aspect!r}] has a negative size")
        missing = [(a, g) for a, g in self.objectives if g not in sizes.get(a, {})]
        if self.aspect_loss_weight > 0 and missing:
            raise ValueError(f"aspect learning needs value_vocabulary_sizes for {missing}")
        shortest = min(self.max_query_length, self.max_document_length)
        if shortest < len(self.groups) + 3:
            raise ValueError(
                f"max lengths must leave room for [CLS], {len(self.groups)} guiding tokens, text, [SEP]"
            )

    @property
    def objectives(self) -> list[tuple[str, str]]:
        return [(a, g) for a in self.aspects for g in self.granularities]

    @property
    def groups(self) -> tuple[AspectGroup, ...]:
        return aspect_groups(self.aspects, self.granularities, Grouping(self.grouping))


@dataclass(frozen=True)
class MurConfig(MuralConfig):
    """MUR: MURAL without aspect learning (λ = 0 in Eq. 9, mural-wsdm24 §5.2)."""

    variant: ClassVar[str] = "mur"
    model_id: str = "mur"
    aspect_loss_weight: float = 0.0

    def __post_init__(self) -> None:
        if self.aspect_loss_weight != 0:
            raise ValueError("mur is MURAL with aspect_loss_weight = 0; use variant 'mural' to learn aspects")
        super().__post_init__()


@dataclass(frozen=True)
class MuralConcatConfig(MuralConfig):
    """MURAL-CONCAT (mural-wsdm24 §5.1 (6)): MURAL reading its documents with their aspect strings, as
    BiBERT-CONCAT does (`model.text.document_text_with_aspects`); queries stay as they are."""

    variant: ClassVar[str] = "mural-concat"
    model_id: str = "mural-concat"

    @property
    def appends_aspects_to_documents(self) -> bool:
        return True
