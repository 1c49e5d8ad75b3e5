"""Configuration of the synthetic benchmark, and the targets it is calibrated against.

Everything the generator does is a pure function of a `SyntheticConfig`: the same
config gives byte-identical files, so a config (kept in ``manifest.json``) is enough
to reproduce a benchmark.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

import numpy as np

# Share of queries / documents that carry an annotation per aspect: Table 3, madral-kdd22 (ECD).
# The generator calibrates its annotation rates against these and reports what it measured.
QUERY_COVERAGE_TARGET: dict[str, float] = {"category": 0.965, "brand": 0.118, "color": 0.059}
PRODUCT_COVERAGE_TARGET: dict[str, float] = {"category": 0.990, "brand": 0.631, "color": 0.158}

# Judged products per query. ERD averages 8.6 (madral-kdd22 §8.1); we judge a few more so that
# every query carries its positives *and* each kind of hard negative.
MIN_JUDGED_PER_QUERY = 8
MAX_JUDGED_PER_QUERY = 20
# Planted products per query are at most the judged ones plus this many unjudged relevant ones.
MAX_UNJUDGED_RELEVANT_PER_QUERY = 2
# A query plants its judged products plus 1-2 unjudged relevant ones, so a catalog needs at least
# this many products per query (smoke tests run 1,500 products / 120 queries).
MIN_PRODUCTS_PER_QUERY = MIN_JUDGED_PER_QUERY + MAX_UNJUDGED_RELEVANT_PER_QUERY
# In small catalogs the judged set per query shrinks (never below 8) so that planted products
# stay under about this share of the catalog; 20k products / 600 queries keep the full 8-20.
MAX_PLANTED_SHARE = 0.75

_LOCALE = re.compile(r"^[a-z]{2}(_[a-z]{2})?$")


def _check_int(name: str, value: object, minimum: int) -> None:
    # bool is an int subclass; `num_products=True` is a bug, not 1.
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")


@dataclass(frozen=True)
class SyntheticConfig:
    """What to generate. Defaults give the embedded default benchmark (20k products, 600 queries)."""

    num_products: int = 20_000
    num_queries: int = 600  # total over the train / valid / test splits
    seed: int = 13
    valid_fraction: float = 0.15
    test_fraction: float = 0.25  # the rest is train
    products_per_shard: int = 50_000  # streaming write unit: one Parquet file each
    locale: str = "us"  # a label on every product; the text itself is US English

    def __post_init__(self) -> None:
        _check_int("num_queries", self.num_queries, 1)
        _check_int("num_products", self.num_products, 1)
        _check_int("seed", self.seed, 0)
        _check_int("products_per_shard", self.products_per_shard, 1)
        needed = MIN_PRODUCTS_PER_QUERY * self.num_queries
        if self.num_products < needed:
            raise ValueError(
                f"num_products={self.num_products} is too small for num_queries={self.num_queries}: "
                f"a query plants up to {MIN_PRODUCTS_PER_QUERY} products even in a small catalog, "
                f"so ask for at least {needed} products (or fewer queries)"
            )
        for name in ("valid_fraction", "test_fraction"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value < 1.0:
                raise ValueError(f"{name} must be a number in [0, 1), got {value!r}")
        if self.valid_fraction + self.test_fraction >= 1.0:
            raise ValueError(
                f"valid_fraction + test_fraction must leave room for train, got "
                f"{self.valid_fraction} + {self.test_fraction} >= 1"
            )
        if not isinstance(self.locale, str) or not _LOCALE.match(self.locale):
            raise ValueError(f"locale must look like 'us' or 'en_us', got {self.locale!r}")

    @property
    def num_shards(self) -> int:
        return -(-self.num_products // self.products_per_shard)

    @property
    def max_judged_per_query(self) -> int:
        """Upper end of the judged-per-query range: 20, less in catalogs with few products per query."""
        per_query = MAX_PLANTED_SHARE * self.num_products / self.num_queries
        budget = int(per_query) - MAX_UNJUDGED_RELEVANT_PER_QUERY
        return max(MIN_JUDGED_PER_QUERY, min(MAX_JUDGED_PER_QUERY, budget))

    def split_sizes(self) -> dict[str, int]:
        """Queries per split; rounding leftovers go to train."""
        valid = round(self.num_queries * self.valid_fraction)
        test = round(self.num_queries * self.test_fraction)
        return {"train": self.num_queries - valid - test, "valid": valid, "test": test}


def derived_seed(seed: int, *keys: str | int) -> int:
    """An independent 64-bit seed per named stream (e.g. ("products", 3) for shard 3).

    Streams never share a generator, so a shard can be regenerated alone and adding a
    draw to one stream does not shift every other one.
    """
    words = [seed] + [int.from_bytes(k.encode(), "little") if isinstance(k, str) else k for k in keys]
    return int(np.random.SeedSequence(words).generate_state(1, dtype=np.uint64)[0])


def derived_random(seed: int, *keys: str | int) -> random.Random:
    """A `random.Random` for one named stream; never the module-level global state."""
    return random.Random(derived_seed(seed, *keys))
