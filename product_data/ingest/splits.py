"""Deterministic train/valid/test assignment of queries by a hash of their id.

A split must not depend on file order, on which other queries were loaded, or on the
Python process (built-in ``hash`` of a string is salted per process), or a query could
move between train and test from one nightly run to the next. SHA-256 of
``"<salt>:<query_id>"`` read as a number in [0, 1) gives each query a fixed position;
the fractions cut that interval as [0, test) → test, [test, test + valid) → valid,
the rest → train. Changing the salt reshuffles every split on purpose.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

DEFAULT_SALT = "madr-split-v1"


@dataclass(frozen=True)
class HashSplit:
    """Fractions of queries sent to valid and test; the remainder is train."""

    valid_fraction: float = 0.0
    test_fraction: float = 0.0
    salt: str = DEFAULT_SALT

    def __post_init__(self) -> None:
        for name in ("valid_fraction", "test_fraction"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} must be a number in [0, 1], got {value!r}")
        if self.valid_fraction + self.test_fraction > 1.0 + 1e-12:
            raise ValueError(
                "valid_fraction + test_fraction must be <= 1, "
                f"got {self.valid_fraction} + {self.test_fraction}"
            )
        if not self.salt:
            raise ValueError("salt must be a non-empty string")

    def position(self, query_id: str) -> float:
        """The query's fixed point in [0, 1)."""
        digest = hashlib.sha256(f"{self.salt}:{query_id}".encode()).digest()
        return int.from_bytes(digest[:8], "big") / 2.0**64

    def assign(self, query_id: str) -> str:
        point = self.position(query_id)
        if point < self.test_fraction:
            return "test"
        if point < self.test_fraction + self.valid_fraction:
            return "valid"
        return "train"

    def describe(self) -> dict[str, object]:
        """How the splits were made, for a dataset manifest."""
        return {
            "method": "sha256(salt + ':' + query_id)[:8] / 2**64 in [0, 1); "
            "[0, test) test, [test, test + valid) valid, else train",
            "salt": self.salt,
            "valid_fraction": self.valid_fraction,
            "test_fraction": self.test_fraction,
        }
