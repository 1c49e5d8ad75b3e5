"""Which products are held out from training, by a rule every stage can recompute.

Pre-training skips the held-out products, writes the rule into the model's manifest, and
fine-tuning carries it on, so `madr evaluate` can measure aspect predictions on products
the model never learned the aspects of without a list of ids travelling between stages.
The rule hashes the product id, so it holds on any catalog, in any order, on any runner,
and a product stays held out when the catalog grows.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

_BUCKETS = 10_000
RULE_NAME = "sha256(product_id) mod 10000 < fraction * 10000"


def held_out_bucket(product_id: str) -> int:
    """A stable bucket in [0, 10000) for a product id."""
    digest = hashlib.sha256(product_id.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") % _BUCKETS


@dataclass(frozen=True)
class HeldOutProducts:
    """The share of a catalog that training never reads (0: none)."""

    fraction: float = 0.0

    def __post_init__(self) -> None:
        if not 0.0 <= self.fraction < 1.0:
            raise ValueError(f"held-out fraction must be in [0, 1), got {self.fraction}")

    def contains(self, product_id: str) -> bool:
        return held_out_bucket(product_id) < round(self.fraction * _BUCKETS)

    def to_dict(self) -> dict[str, Any]:
        return {"rule": RULE_NAME, "fraction": self.fraction}

    @classmethod
    def from_manifest(cls, manifest: Mapping[str, Any]) -> HeldOutProducts | None:
        """The rule a model manifest records; None when the model never said (trained on everything)."""
        recorded = manifest.get("held_out_products")
        if not recorded:
            return None
        if recorded.get("rule") != RULE_NAME:
            raise ValueError(f"unknown held-out rule {recorded.get('rule')!r}; expected {RULE_NAME!r}")
        return cls(float(recorded["fraction"]))
