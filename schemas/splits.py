"""Which products are held out from training, by a rule every stage can recompute.

Pre-training skips the held-out products, writes the rule into the model's manifest, and
fine-tuning carries it on, so `madr evaluate` can measure aspect predictions on products
the model never learned the aspects of without a list of ids travelling between stages.
The rule hashes the product id, so it holds on any catalog, in any order, on any runner,
and a product stays held out when the catalog grows. Keyed by title instead (`by="title"`), it hashes
the title reduced to its lower-cased words without numbers, so products whose titles differ only in
case, punctuation or numbers (sizes, pack counts, model years) land on the same side: a held-out
product then has no near-duplicate among the products trained on.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

BUCKETS = 10_000
RULE_NAME = "sha256(product_id) mod 10000 < fraction * 10000"
TITLE_RULE_NAME = "sha256(title words without numbers, lower-cased) mod 10000 < fraction * 10000"
RULES = {"product_id": RULE_NAME, "title": TITLE_RULE_NAME}
_WORD = re.compile(r"[^\W\d_]+")


def held_out_bucket(key: str) -> int:
    """A stable bucket in [0, 10000) for a product id (or a title key)."""
    digest = hashlib.sha256(key.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") % BUCKETS


def title_key(title: str) -> str:
    """The lower-cased words of a title: "Acme Shirt, Size 42" -> "acme shirt size"."""
    return " ".join(_WORD.findall(title.lower()))


@dataclass(frozen=True)
class HeldOutProducts:
    """The share of a catalog that training never reads (0: none), chosen by product id or by title."""

    # `help` metadata makes the share a flag of the commands that train (pipelines/settings/stage_config.py).
    fraction: float = field(
        default=0.0,
        metadata={
            "help": "Share of products never trained on, chosen by a hash of the product id and recorded in "
            "the model's manifest; validation, aspect accuracy and `madr evaluate --products` measure on "
            "them (0: none)",
            "flag": "held_out_fraction",
        },
    )
    by: str = "product_id"

    def __post_init__(self) -> None:
        if not 0.0 <= self.fraction < 1.0:
            raise ValueError(f"held-out fraction must be in [0, 1), got {self.fraction}")
        if self.by not in RULES:
            raise ValueError(f"a held-out rule is by one of {sorted(RULES)}, not {self.by!r}")

    def contains(self, product_id: str) -> bool:
        """Whether the product of this id is held out (the product-id rule; see `holds` for both)."""
        if self.by != "product_id":
            raise ValueError("a held-out rule by title needs the product: call holds(product)")
        return held_out_bucket(product_id) < round(self.fraction * BUCKETS)

    def holds(self, product: Mapping[str, Any]) -> bool:
        """Whether `product` (a record with product_id and title) is held out."""
        key = product["product_id"] if self.by == "product_id" else title_key(product.get("title") or "")
        return held_out_bucket(key) < round(self.fraction * BUCKETS)

    def to_dict(self) -> dict[str, Any]:
        return {"rule": RULES[self.by], "fraction": self.fraction}

    @classmethod
    def from_manifest(cls, manifest: Mapping[str, Any]) -> HeldOutProducts | None:
        """The rule a model manifest records; None when the model never said (trained on everything)."""
        recorded = manifest.get("held_out_products")
        if not recorded:
            return None
        by = {name: key for key, name in RULES.items()}.get(recorded.get("rule"))
        if by is None:
            raise ValueError(
                f"unknown held-out rule {recorded.get('rule')!r}; expected one of {list(RULES.values())}"
            )
        return cls(float(recorded["fraction"]), by)
