"""The catalog model: what products exist, and the product stream written shard by shard.

A product is first a `ProductSpec` (leaf, brand, color, variant: everything relevance
depends on) and only then a listing rendered from it (`listing.py`). Background products
draw their spec from popularity-weighted distributions; products planted for queries
(`queries.py`) bring their own. Either way a product is a pure function of the seed, its
shard and its position, so shards stream in bounded memory and can be regenerated alone.
"""

from __future__ import annotations

import bisect
import dataclasses
import functools
import itertools
import random
from collections import defaultdict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from product_data.synthetic.config import PRODUCT_COVERAGE_TARGET, SyntheticConfig, derived_random
from product_data.synthetic.profiles import PROFILES, Profile
from product_data.synthetic.taxonomy import Leaf, Taxonomy, build_taxonomy
from product_data.synthetic.vocabulary import BRAND_DOMAINS, COLOR_FAMILIES, COLOR_FAMILY

# Popularity decays as a power of a seeded rank: a few leaves and brands carry most products,
# as in real catalogs, while every leaf still gets some at 20k products.
_LEAF_POPULARITY_EXPONENT = 0.8
_LEAF_POPULARITY_OFFSET = 10
_BRAND_POPULARITY_EXPONENT = 0.8
# A family's own name ("Pink") is listed more often than its shades ("Hot Pink").
_BASE_COLOR_WEIGHT = 3.0
QUERY_COLOR_MIN_RATE = 0.5


@dataclass(frozen=True)
class ProductSpec:
    """Everything relevance depends on. ``mentions`` marks a listing that names another
    product, e.g. a cookbook written for the Breville juicer: (leaf index, brand or None)."""

    leaf: int
    brand: str | None
    color: str | None
    variant: str
    mentions: tuple[int, str | None] | None = None


def product_id(position: int) -> str:
    """Ids follow stream positions; planted positions are random, so ids reveal nothing."""
    return f"SP{position:08d}"


def _cumulative(weights: list[float]) -> tuple[float, ...]:
    return tuple(itertools.accumulate(weights))


@dataclass(frozen=True)
class CatalogModel:
    """Seeded popularity over a static taxonomy, plus calibrated annotation rates."""

    taxonomy: Taxonomy
    leaf_weights: tuple[float, ...]
    brand_annotation_rate: float  # P(brand annotated | product has a brand field)
    color_annotation_rate: float  # P(color annotated | product has a color field)

    @classmethod
    def build(cls, seed: int) -> CatalogModel:
        taxonomy = build_taxonomy()
        rng = derived_random(seed, "popularity")
        ranks = list(range(len(taxonomy.leaves)))
        rng.shuffle(ranks)
        weights = tuple((rank + _LEAF_POPULARITY_OFFSET) ** -_LEAF_POPULARITY_EXPONENT for rank in ranks)
        model = cls(taxonomy, weights, brand_annotation_rate=1.0, color_annotation_rate=1.0)
        return model.calibrated({}, 1)

    def calibrated(self, planted: Mapping[int, ProductSpec], num_products: int) -> CatalogModel:
        """Annotation rates that hit Table 3 over the whole catalog, planted products included.

        Planted products are not a random sample (every query plants a cookbook or an accessory
        that names it, brand queries plant branded products), so the expected number of brand /
        color fields is counted exactly for them and taken from the popularity model for the rest.
        """
        total = sum(self.leaf_weights)
        background = num_products - len(planted)
        expected = {}
        for aspect in ("brand", "color"):
            # Expected share of background products with a brand / color *field*.
            rate = sum(weight * getattr(PROFILES[leaf.profile], f"{aspect}_rate")
                       for weight, leaf in zip(self.leaf_weights, self.taxonomy.leaves, strict=True)) / total
            fields = sum(getattr(spec, aspect) is not None for spec in planted.values()) + background * rate
            wanted = PRODUCT_COVERAGE_TARGET[aspect] * num_products
            expected[aspect] = min(1.0, wanted / fields) if fields else 1.0
        return dataclasses.replace(
            self, brand_annotation_rate=expected["brand"], color_annotation_rate=expected["color"]
        )

    # --- lookups -------------------------------------------------------------------------
    def leaf(self, index: int) -> Leaf:
        return self.taxonomy.leaves[index]

    def profile(self, leaf: int) -> Profile:
        return PROFILES[self.taxonomy.leaves[leaf].profile]

    def brands(self, leaf: int) -> tuple[str, ...]:
        return BRAND_DOMAINS[self.taxonomy.leaves[leaf].brand_domain]

    @functools.cached_property
    def _leaf_cum(self) -> tuple[float, ...]:
        return _cumulative(list(self.leaf_weights))

    @functools.cached_property
    def _brand_cum(self) -> dict[str, tuple[float, ...]]:
        return {
            domain: _cumulative([(i + 1) ** -_BRAND_POPULARITY_EXPONENT for i in range(len(brands))])
            for domain, brands in BRAND_DOMAINS.items()
        }

    @functools.cached_property
    def _color_cum(self) -> dict[str, tuple[float, ...]]:
        return {
            name: _cumulative([_BASE_COLOR_WEIGHT if c in COLOR_FAMILIES else 1.0 for c in p.colors])
            for name, p in PROFILES.items()
        }

    @functools.cached_property
    def leaves_by_brand(self) -> dict[str, tuple[int, ...]]:
        """Where each brand sells: a brand in several domains spans departments."""
        found: dict[str, list[int]] = defaultdict(list)
        for leaf in self.taxonomy.leaves:
            for brand in BRAND_DOMAINS[leaf.brand_domain]:
                found[brand].append(leaf.index)
        return {brand: tuple(leaves) for brand, leaves in found.items()}

    @functools.cached_property
    def colored_leaves(self) -> tuple[int, ...]:
        """Leaves where shoppers ask for a color: most of their products have one ("hot pink yoga
        mat" is a query; "tan eye cream" is not)."""
        return tuple(
            leaf.index for leaf in self.taxonomy.leaves
            if PROFILES[leaf.profile].color_rate >= QUERY_COLOR_MIN_RATE
        )

    # --- sampling ------------------------------------------------------------------------
    def sample_leaf(self, rng: random.Random, among: tuple[int, ...] | None = None) -> int:
        if among is None:
            return bisect.bisect_right(self._leaf_cum, rng.random() * self._leaf_cum[-1])
        return rng.choices(among, weights=[self.leaf_weights[i] for i in among])[0]

    def sample_brand(self, rng: random.Random, leaf: int, exclude: str | None = None) -> str:
        domain = self.taxonomy.leaves[leaf].brand_domain
        brands, cum = BRAND_DOMAINS[domain], self._brand_cum[domain]
        while True:  # every domain holds several brands, so a retry ends quickly
            brand = brands[bisect.bisect_right(cum, rng.random() * cum[-1])]
            if brand != exclude:
                return brand

    def sample_color(self, rng: random.Random, leaf: int, *, family: str | None = None,
                     avoid_family: str | None = None, exclude: str | None = None) -> str | None:
        """A color of the leaf's palette, optionally within / outside one family; None if none fits."""
        profile = self.profile(leaf)
        cum = self._color_cum[profile.name]
        candidates = [
            i for i, color in enumerate(profile.colors)
            if color != exclude and (family is None or COLOR_FAMILY[color] == family)
            and (avoid_family is None or COLOR_FAMILY[color] != avoid_family)
        ]
        if not candidates:
            return None
        weights = [cum[i] - (cum[i - 1] if i else 0.0) for i in candidates]
        return profile.colors[rng.choices(candidates, weights=weights)[0]]

    def sample_variant(self, rng: random.Random, leaf: int, exclude: str | None = None) -> str:
        variants = [v for v in self.profile(leaf).variants if v != exclude]
        return rng.choice(variants)

    def sample_spec(self, rng: random.Random, leaf: int | None = None) -> ProductSpec:
        """A background product: brand and color fields at the rates of its kind."""
        leaf = self.sample_leaf(rng) if leaf is None else leaf
        profile = self.profile(leaf)
        brand = self.sample_brand(rng, leaf) if rng.random() < profile.brand_rate else None
        color = self.sample_color(rng, leaf) if rng.random() < profile.color_rate else None
        return ProductSpec(leaf, brand, color, self.sample_variant(rng, leaf))


def iter_shard(config: SyntheticConfig, model: CatalogModel, planted: Mapping[int, ProductSpec],
               shard: int) -> Iterator[tuple[int, ProductSpec, random.Random]]:
    """(position, spec, rng) for every product of one shard, in stream order.

    Each shard has its own generator, so shard k is the same whether or not shards before
    it were generated; only the plan's planted positions are shared.
    """
    rng = derived_random(config.seed, "products", shard)
    start = shard * config.products_per_shard
    stop = min(start + config.products_per_shard, config.num_products)
    for position in range(start, stop):
        spec = planted.get(position)
        yield position, (spec if spec is not None else model.sample_spec(rng)), rng
