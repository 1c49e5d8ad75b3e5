"""The query plan: queries, the products planted for them, and their graded judgments.

Each query first draws a target (leaf, brand, color, variant), then plants the products
its judgments need at random positions of the product stream: exact matches, partial
matches (another shade, another size) and hard negatives (same category / other brand,
same brand / other category, the listing that names the query's product from another
category, a sibling category). Relevant products are thus known without ever holding the
catalog in memory. A few more exact matches are planted *unjudged*, and background
products of the same leaf match generic queries too: like pooled human judgments, the
judged set is a sample of what is relevant in the catalog.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np

from product_data.synthetic.catalog import CatalogModel, ProductSpec
from product_data.synthetic.config import (
    MAX_JUDGED_PER_QUERY,
    MAX_UNJUDGED_RELEVANT_PER_QUERY,
    MIN_JUDGED_PER_QUERY,
    QUERY_COVERAGE_TARGET,
    SyntheticConfig,
    derived_random,
    derived_seed,
)
from product_data.synthetic.relevance import POSITIVE_GRADE, QueryTarget, grade
from product_data.synthetic.taxonomy import AUDIENCES
from product_data.synthetic.vocabulary import COLOR_FAMILY

# Query intents come in quotas calibrated so annotation coverage lands on Table 3 of
# madral-kdd22 (category 96.5%, brand 11.8%, color 5.9%).
BRAND_ONLY_RATE = 0.02  # "breville": a brand and nothing else, so no category annotation
# The remaining category misses (1.5%) are queries that name a category the tagger missed.
QUALIFIER_RATE = 0.15  # "queen size comforter", "wireless mouse": no aspect, but it moves relevance
_MAX_TEXT_ATTEMPTS = 200
_POPULAR_ATTEMPTS = 20


@dataclass(frozen=True)
class PlannedProduct:
    spec: ProductSpec
    role: str  # why it was planted: "exact", "shade", "other_brand", "mentions_query" ...
    judged: bool


@dataclass(frozen=True)
class PlannedQuery:
    query_id: str
    text: str
    target: QueryTarget
    aspects: dict[str, list[str]]
    split: str
    products: tuple[PlannedProduct, ...]


@dataclass(frozen=True)
class Judgment:
    query_id: str
    position: int  # stream position of the judged product
    grade: int
    label: str  # the planting role, kept for audits like ESCI's E/S/C/I labels


@dataclass(frozen=True)
class BenchmarkPlan:
    queries: tuple[PlannedQuery, ...]
    planted: dict[int, ProductSpec]  # stream position -> spec; grows with queries, not products
    judgments: tuple[Judgment, ...]


@dataclass(frozen=True)
class _Intent:
    """Which aspects a query expresses. Drawn once per query and kept while its text is redrawn
    for uniqueness, so retries do not skew the mix toward rarer (branded, colored) queries."""

    brand_only: bool
    brand: bool
    color: bool
    variant: bool
    category_tagged: bool


def _draw_intents(rng: random.Random, count: int) -> list[_Intent]:
    """Intents by quota rather than coin flips, so that even 120 queries hit Table 3's coverage."""
    brand_only = round(count * BRAND_ONLY_RATE)
    with_category = count - brand_only

    def chosen(share_of_all: float, minus: int = 0) -> set[int]:
        size = min(with_category, max(0, round(count * share_of_all) - minus))
        return set(rng.sample(range(with_category), size))

    brand = chosen(QUERY_COVERAGE_TARGET["brand"], minus=brand_only)
    color = chosen(QUERY_COVERAGE_TARGET["color"])
    variant = chosen(QUALIFIER_RATE)
    untagged = chosen(1.0 - QUERY_COVERAGE_TARGET["category"], minus=brand_only)
    intents = [_Intent(True, True, False, False, False)] * brand_only + [
        _Intent(False, i in brand, i in color, i in variant, i not in untagged) for i in range(with_category)
    ]
    rng.shuffle(intents)
    return intents


def _draw_target(rng: random.Random, model: CatalogModel, intent: _Intent, popular: bool) -> QueryTarget:
    """A target for ``intent``; leaves by popularity, or uniformly once popular texts are used up."""
    if intent.brand_only:
        return QueryTarget(None, model.sample_brand(rng, model.sample_leaf(rng)), None, None)
    among = model.colored_leaves if intent.color else None
    if popular:
        leaf = model.sample_leaf(rng, among)
    else:
        leaf = rng.choice(among) if among else rng.randrange(len(model.taxonomy.leaves))
    return QueryTarget(
        leaf,
        model.sample_brand(rng, leaf) if intent.brand else None,
        model.sample_color(rng, leaf) if intent.color else None,
        model.sample_variant(rng, leaf) if intent.variant else None,
    )


def _text(rng: random.Random, model: CatalogModel, target: QueryTarget) -> str:
    """Lower-case query text; word order varies the way shoppers' does."""
    brand = target.brand.lower() if target.brand else None
    if target.leaf is None:
        return brand or ""
    forms = model.leaf(target.leaf).query_forms
    form = forms[0] if rng.random() < 0.4 else rng.choice(forms)  # a synonym or partial name
    color = target.color.lower() if target.color else None
    if brand and color:
        text = rng.choice((f"{color} {brand} {form}", f"{brand} {form} {color}", f"{brand} {color} {form}"))
    elif brand:
        text = f"{form} {brand}" if rng.random() < 0.15 else f"{brand} {form}"
    elif color:
        text = f"{form} {color}" if rng.random() < 0.2 else f"{color} {form}"
    else:
        text = form
    if target.variant is not None:
        qualifier = model.profile(target.leaf).qualifier_text(target.variant)
        text = f"{qualifier} {text}" if rng.random() < 0.5 else f"{text} {qualifier}"
    return text


def _aspects(model: CatalogModel, target: QueryTarget, intent: _Intent) -> dict[str, list[str]]:
    """Query annotations: what the query expresses (minus the tagger's rare category misses)."""
    aspects: dict[str, list[str]] = {}
    if target.leaf is not None and intent.category_tagged:
        aspects["category"] = [model.leaf(target.leaf).name]
    if target.brand is not None:
        aspects["brand"] = [target.brand]
    if target.color is not None:
        aspects["color"] = [target.color]
    return aspects


class _Planter:
    """Builds the planted products of one query; each method returns one spec or None."""

    def __init__(self, rng: random.Random, model: CatalogModel, target: QueryTarget) -> None:
        self.rng, self.model, self.t = rng, model, target
        taxonomy = model.taxonomy
        if target.leaf is None:  # brand-only: any leaf the brand sells in is a "home" leaf
            self.home = model.sample_leaf(rng, model.leaves_by_brand[target.brand or ""])
        else:
            self.home = target.leaf
        home = taxonomy.leaves[self.home]
        cousins = tuple(  # the same style for another audience: Women's vs Men's Athletic Socks
            taxonomy.index_of[f"{AUDIENCES[a][0]} {home.noun}"] for a in AUDIENCES
            if home.audience and a != home.audience and f"{AUDIENCES[a][0]} {home.noun}" in taxonomy.index_of
        )
        self.near = taxonomy.siblings[self.home] + cousins
        self.department = tuple(
            leaf.index for leaf in taxonomy.leaves
            if leaf.department == home.department and leaf.index != self.home
        )

    def _spec(self, leaf: int, brand: str | None, color: str | None, variant: str | None,
              mentions: tuple[int, str | None] | None = None) -> ProductSpec:
        background = self.model.sample_spec(self.rng, leaf)
        return ProductSpec(
            leaf, brand if brand is not None else background.brand,
            color if color is not None else background.color,
            variant if variant is not None else background.variant, mentions,
        )

    def exact(self) -> ProductSpec:
        return self._spec(self.home, self.t.brand, self.t.color, self.t.variant)

    def shade(self) -> ProductSpec | None:
        if self.t.color is None:
            return None
        family = COLOR_FAMILY[self.t.color]
        color = self.model.sample_color(self.rng, self.home, family=family, exclude=self.t.color)
        return None if color is None else self._spec(self.home, self.t.brand, color, self.t.variant)

    def other_color(self) -> ProductSpec | None:
        if self.t.color is None:
            return None
        color = self.model.sample_color(self.rng, self.home, avoid_family=COLOR_FAMILY[self.t.color])
        return None if color is None else self._spec(self.home, self.t.brand, color, self.t.variant)

    def other_variant(self) -> ProductSpec | None:
        if self.t.variant is None:
            return None
        variant = self.model.sample_variant(self.rng, self.home, exclude=self.t.variant)
        return self._spec(self.home, self.t.brand, self.t.color, variant)

    def other_brand(self) -> ProductSpec | None:
        if self.t.brand is None:
            return None
        return self._spec(self.home, self.model.sample_brand(self.rng, self.home, exclude=self.t.brand),
                          self.t.color, self.t.variant)

    def brand_other_category(self) -> ProductSpec | None:
        if self.t.brand is None or self.t.leaf is None:
            return None
        sells = set(self.model.leaves_by_brand[self.t.brand]) - {self.home}
        pool = [i for i in self.near if i in sells] or [i for i in self.department if i in sells]
        pool = pool or sorted(sells)
        return self._spec(self.rng.choice(pool), self.t.brand, self.t.color, None) if pool else None

    def mentions_query(self) -> ProductSpec:
        leaf = self.rng.choice(self.model.taxonomy.companions[self.home])
        spec = self._spec(leaf, None, None, None, mentions=(self.home, self.t.brand))
        if spec.brand is not None and spec.brand == self.t.brand:  # a cookbook is not by Breville
            spec = ProductSpec(leaf, self.model.sample_brand(self.rng, leaf, exclude=self.t.brand),
                               spec.color, spec.variant, spec.mentions)
        return spec

    def sibling_category(self) -> ProductSpec:
        leaf = self.rng.choice(self.near or self.department)
        color = self.t.color if self.t.color in self.model.profile(leaf).colors else None
        brand = self.t.brand if self.t.brand in self.model.brands(leaf) else None
        return self._spec(leaf, brand, color, None)

    def same_department(self) -> ProductSpec:
        return self._spec(self.rng.choice(self.department or self.near), None, None, None)


def _plant(rng: random.Random, model: CatalogModel, target: QueryTarget,
           max_judged: int) -> tuple[PlannedProduct, ...]:
    planter = _Planter(rng, model, target)
    judged_total = rng.randint(MIN_JUDGED_PER_QUERY, max_judged)
    # Positives first (2 to half the judged set), then one of each hard negative the intent allows
    # (at most 4, so all fit even at 8 judged), then partial matches, then drawn negatives.
    queue = ["exact"] * rng.randint(2, judged_total // 2)
    queue += ["mentions_query", "other_brand", "brand_other_category", "sibling_category"]
    queue += [role for role in ("shade", "other_color", "other_variant") if rng.random() < 0.8]
    fill = ("mentions_query", "other_brand", "brand_other_category", "sibling_category", "sibling_category",
            "same_department")
    products: list[PlannedProduct] = []
    attempts = 0
    while len(products) < judged_total and attempts < 10 * MAX_JUDGED_PER_QUERY:
        attempts += 1
        role = queue.pop(0) if queue else rng.choice(fill)
        spec = getattr(planter, role)()
        if spec is not None:
            products.append(PlannedProduct(spec, role, judged=True))
    unjudged = rng.randint(1, MAX_UNJUDGED_RELEVANT_PER_QUERY)
    products += [PlannedProduct(planter.exact(), "unjudged_relevant", judged=False) for _ in range(unjudged)]
    return tuple(products)


def plan_benchmark(config: SyntheticConfig, model: CatalogModel) -> BenchmarkPlan:
    """Draw every query, its planted products and their grades; assign splits and positions."""
    rng = derived_random(config.seed, "queries")
    drafts: list[tuple[str, QueryTarget, dict[str, list[str]], tuple[PlannedProduct, ...]]] = []
    seen: set[str] = set()
    for intent in _draw_intents(rng, config.num_queries):
        for attempt in range(_MAX_TEXT_ATTEMPTS):  # query texts are distinct, as in a query log
            target = _draw_target(rng, model, intent, popular=attempt < _POPULAR_ATTEMPTS)
            text = _text(rng, model, target)
            if text not in seen:
                break
        else:
            raise ValueError(
                f"could not draw {config.num_queries} distinct query texts; the taxonomy supports about "
                "3,000, ask for fewer queries"
            )
        seen.add(text)
        products = _plant(rng, model, target, config.max_judged_per_query)
        drafts.append((text, target, _aspects(model, target, intent), products))

    order = list(range(config.num_queries))
    derived_random(config.seed, "splits").shuffle(order)
    split_of: dict[int, str] = {}
    cursor = 0
    for split in ("test", "valid", "train"):
        size = config.split_sizes()[split]
        split_of.update((i, split) for i in order[cursor:cursor + size])
        cursor += size

    total = sum(len(products) for *_, products in drafts)
    if total > config.num_products:
        raise ValueError(f"{total} planted products do not fit in {config.num_products} products")
    positions = np.random.default_rng(derived_seed(config.seed, "positions")).choice(
        config.num_products, size=total, replace=False
    ).tolist()
    planted: dict[int, ProductSpec] = {}
    queries: list[PlannedQuery] = []
    judgments: list[Judgment] = []
    cursor = 0
    for index, (text, target, aspects, products) in enumerate(drafts):
        query_id = f"q{index:05d}"
        queries.append(PlannedQuery(query_id, text, target, aspects, split_of[index], products))
        graded = []
        for product in products:
            position = positions[cursor]
            cursor += 1
            planted[position] = product.spec
            if product.judged:
                graded.append(Judgment(query_id, position, grade(target, product.spec, model.taxonomy),
                                       product.role))
        if max(j.grade for j in graded) < POSITIVE_GRADE:  # cannot happen: "exact" is planted first
            raise AssertionError(f"query {query_id} ({text!r}) has no positive judgment")
        judgments += sorted(graded, key=lambda j: j.position)
    return BenchmarkPlan(tuple(queries), planted, tuple(judgments))
