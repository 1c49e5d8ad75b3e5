"""Aspect configuration: which aspects a catalog is annotated with.

Aspects are named data, never positions. The e-commerce default of madral-kdd22
(category, brand, color) and its people-search example (location, company,
education) are both just an `AspectSchema` with other names.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass

_NAME = re.compile(r"^[a-z][a-z0-9_]*$")

ECOMMERCE_ASPECTS: tuple[str, ...] = ("category", "brand", "color")
PEOPLE_SEARCH_ASPECTS: tuple[str, ...] = ("location", "company", "education")


@dataclass(frozen=True)
class AspectSchema:
    """The ordered set of explicit aspect names a model and a catalog share.

    The order only fixes the layout of tensors inside a model; every record and
    artifact refers to aspects by name.
    """

    names: tuple[str, ...] = ECOMMERCE_ASPECTS

    def __post_init__(self) -> None:
        if not self.names:
            raise ValueError("AspectSchema needs at least one aspect name")
        for name in self.names:
            if not _NAME.match(name):
                raise ValueError(f"aspect name {name!r} must be lower-case snake_case (e.g. 'category')")
        if len(set(self.names)) != len(self.names):
            raise ValueError(f"aspect names repeat: {self.names}")
        if "other" in self.names or "cls" in self.names:
            raise ValueError("'other' and 'cls' are reserved for the fusion network, not aspects")

    @classmethod
    def parse(cls, text: str) -> AspectSchema:
        """Build from a comma-separated list, as given on a command line."""
        return cls(tuple(part.strip() for part in text.split(",") if part.strip()))

    def to_json(self) -> str:
        return json.dumps(list(self.names))

    def __len__(self) -> int:
        return len(self.names)

    def __iter__(self) -> Iterator[str]:
        return iter(self.names)
