"""Encoder configurations: one validated dataclass per variant, saved as config.json.

Like Hugging Face's `BertConfig`, a config documents its defaults, every module is
built from it, and a saved model directory carries it, so a loader never needs to
be told which variant it is loading.
"""

from __future__ import annotations

import dataclasses
import enum
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from model.pooling import Pooling, ProjectionInit
from schemas import ECOMMERCE_ASPECTS, AspectSchema

CONFIG_FILE = "config.json"


@dataclass(frozen=True)
class EncoderConfig:
    """Settings shared by every bi-encoder variant.

    Attributes:
        backbone: the transformer's `BertConfig.to_dict()`; weights come from the
            model directory (or from the bundled MiniLM when training starts).
        projection_dim: embeddings are projected to this size (128, madral-kdd22 §8.2)
            to keep nearest-neighbour search cheap; None: the backbone's hidden size.
        pooling: the encoding that summarises a text, CLS (the papers) or the mean of the
            token encodings (what a sentence-embedding backbone such as MiniLM was trained
            with; `model.pooling`). Variants that read "the CLS encoding" read this one.
        projection_init: a random projection (the papers) or the identity (needs
            projection_dim = hidden size): a new model then embeds as its backbone does.
        max_query_length / max_document_length: truncation lengths in wordpieces
            (32 and 128 in madral-kdd22 §8.2).
        shared_towers: one transformer for queries and documents (the later papers)
            or two (madral-kdd22 keeps them separate).
        temperature: softmax temperature of the in-batch retrieval loss over cosines.
        aspects: the explicit aspect names the catalog is annotated with.
        model_id / model_version: identify the artifact in every embedding row.
        aspect_temperatures: per aspect, the temperature its prediction logits are divided by before
            the softmax that gives a confidence P(x), fitted on products the model never trained on
            (`model.aspects.calibration`); an aspect without one reads its logits as they are.
    """

    variant: ClassVar[str] = "base"

    backbone: dict[str, Any] = field(default_factory=dict)
    projection_dim: int | None = 128
    pooling: Pooling = Pooling.CLS
    projection_init: ProjectionInit = ProjectionInit.RANDOM
    max_query_length: int = 32
    max_document_length: int = 128
    shared_towers: bool = True
    temperature: float = 0.05
    aspects: tuple[str, ...] = ECOMMERCE_ASPECTS
    model_id: str = "madr"
    model_version: str = "0"
    aspect_temperatures: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # Stored in its JSON form, so a config equals itself after save + load.
        object.__setattr__(self, "backbone", json.loads(json.dumps(self.backbone, sort_keys=True)))
        if not self.backbone.get("hidden_size"):
            raise ValueError("backbone must be a BertConfig dict with a hidden_size")
        object.__setattr__(self, "pooling", Pooling(self.pooling))
        object.__setattr__(self, "projection_init", ProjectionInit(self.projection_init))
        if self.projection_dim is None:
            object.__setattr__(self, "projection_dim", self.hidden_size)
        if self.projection_init is ProjectionInit.IDENTITY and self.projection_dim != self.hidden_size:
            raise ValueError(
                f"projection_init='identity' needs projection_dim = the hidden size {self.hidden_size} "
                f"(or None), got {self.projection_dim}"
            )
        if self.projection_dim <= 0:
            raise ValueError(f"projection_dim must be positive, got {self.projection_dim}")
        for name in ("max_query_length", "max_document_length"):
            value = getattr(self, name)
            if not 4 <= value <= self.backbone.get("max_position_embeddings", 512):
                raise ValueError(f"{name}={value} must lie in [4, max_position_embeddings]")
        if not 0 < self.temperature <= 1:
            raise ValueError(f"temperature must be in (0, 1], got {self.temperature}")
        AspectSchema(tuple(self.aspects))  # validates the names
        if not self.model_id or "/" in self.model_id:
            raise ValueError(f"model_id must be a non-empty name without '/', got {self.model_id!r}")
        bad = {
            a: t for a, t in self.aspect_temperatures.items() if not (isinstance(t, int | float) and t > 0)
        }
        if bad:
            raise ValueError(f"aspect_temperatures must be positive numbers, got {bad}")

    @property
    def hidden_size(self) -> int:
        return int(self.backbone["hidden_size"])

    @property
    def appends_aspects_to_documents(self) -> bool:
        """Documents are read as `model.text.document_text_with_aspects` (BiBERT-CONCAT) instead of
        `document_text`; embedding and training stages must build texts accordingly."""
        return False

    @property
    def uses_aspect_labels(self) -> bool:
        """The variant learns from aspect annotations: `encoder.auxiliary_loss` needs `AspectLabels`."""
        return False

    def to_dict(self) -> dict[str, Any]:
        data = {name: _json_value(value) for name, value in dataclasses.asdict(self).items()}
        data["aspects"] = list(self.aspects)
        return {"variant": self.variant, **data}

    def save(self, directory: str | Path) -> Path:
        path = Path(directory) / CONFIG_FILE
        path.write_text(json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n")
        return path

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EncoderConfig:
        data = dict(data)
        variant = data.pop("variant", cls.variant)
        if variant != cls.variant:
            raise ValueError(f"config is for variant {variant!r}, not {cls.variant!r}")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown {cls.variant} config fields: {unknown}")
        if "aspects" in data:
            data["aspects"] = tuple(data["aspects"])
        return cls(**data)

    def replace(self, **changes: Any) -> EncoderConfig:
        return dataclasses.replace(self, **changes)


def _json_value(value: Any) -> Any:
    """Enums by value and tuples as lists, so to_dict() equals the config.json it is saved as."""
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, (tuple, list)):
        return [_json_value(item) for item in value]
    return value


def read_config_dict(directory: str | Path) -> dict[str, Any]:
    """The raw config.json of a model directory, with a clear error when it is not one."""
    path = Path(directory) / CONFIG_FILE
    if not path.is_file():
        raise FileNotFoundError(
            f"{directory} is not a madr model directory: {CONFIG_FILE} is missing "
            "(train one with `madr train`, or pass the directory it wrote)"
        )
    return json.loads(path.read_text())
