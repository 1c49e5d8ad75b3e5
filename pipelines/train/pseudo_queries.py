"""Training queries made from a catalog's own fields, for a catalog that has no judgments.

A shopper's query names what a listing's fields hold: a brand and a product type ("zwilling chef
knives"), a colour and a type ("red frying pans"), the type alone, or a few words of a title. Each
product gives such queries, with itself as the positive and, where the catalog has one, a hard
negative that shares the query's product type but not its brand or colour, so the contrastive loss
has to read the aspect the query names. The query's annotations are the fields it was made from, so
the aspect losses learn from it too; a title fragment names no field and is left unannotated.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from model.training import QueryExamples
from model.training.config import Annotations

_WORD = re.compile(r"[^\W_]+(?:[-'.][^\W_]+)*", re.UNICODE)
MIN_FRAGMENT_WORDS = 2
MAX_FRAGMENT_WORDS = 4


@dataclass(frozen=True)
class CatalogProduct:
    """What pseudo-queries need of a product: its text as the model reads it and its aspect values."""

    product_id: str
    title: str
    text: str
    aspects: Annotations

    def first(self, aspect: str) -> str | None:
        values = (self.aspects or {}).get(aspect) or ()
        return str(values[0]) if values else None


@dataclass(frozen=True)
class PseudoQuery:
    text: str
    aspects: Annotations
    kind: str  # "brand+category", "color+category", "category" or "title"
    differs_in: str | None  # the aspect a hard negative must not share (None: no hard negative)


def pseudo_queries_of(product: CatalogProduct) -> list[PseudoQuery]:
    """Every pseudo-query a product's fields allow, in a fixed order (the caller samples among them)."""
    category, brand, color = (product.first(name) for name in ("category", "brand", "color"))
    found = []
    if brand and category:
        found.append(
            PseudoQuery(
                f"{brand} {category}", {"brand": [brand], "category": [category]}, "brand+category", "brand"
            )
        )
    if color and category:
        found.append(
            PseudoQuery(
                f"{color} {category}", {"color": [color], "category": [category]}, "color+category", "color"
            )
        )
    if category:
        found.append(PseudoQuery(category, {"category": [category]}, "category", None))
    words = _WORD.findall(product.title)
    if len(words) > MIN_FRAGMENT_WORDS:
        found.append(PseudoQuery(" ".join(words), None, "title", None))  # replaced by a fragment when drawn
    return found


def _fragment(title: str, rng: np.random.Generator) -> str:
    """A span of 2-4 consecutive title words, never the whole title."""
    words = _WORD.findall(title)
    length = int(rng.integers(MIN_FRAGMENT_WORDS, min(MAX_FRAGMENT_WORDS, len(words) - 1) + 1))
    start = int(rng.integers(0, len(words) - length + 1))
    return " ".join(words[start : start + length])


class HardNegatives:
    """Products of the same category, looked up by the aspect value they must not share."""

    def __init__(self, products: Sequence[CatalogProduct]) -> None:
        self.by_category: dict[str, list[CatalogProduct]] = defaultdict(list)
        for product in products:
            category = product.first("category")
            if category:
                self.by_category[category.casefold()].append(product)

    def draw(
        self, product: CatalogProduct, query: PseudoQuery, rng: np.random.Generator, scan: int = 64
    ) -> CatalogProduct | None:
        """A sibling with another known value of `query.differs_in`, scanned from a random start."""
        if query.differs_in is None:
            return None
        siblings = self.by_category.get((product.first("category") or "").casefold(), [])
        if not siblings:
            return None
        value = (product.first(query.differs_in) or "").casefold()
        start = int(rng.integers(len(siblings)))
        for step in range(min(scan, len(siblings))):
            other = siblings[(start + step) % len(siblings)]
            other_value = (other.first(query.differs_in) or "").casefold()
            if other.product_id != product.product_id and other_value and other_value != value:
                return other
        return None


def pseudo_query_examples(
    products: Sequence[CatalogProduct],
    per_product: int,
    seed: int,
    negatives_from: Sequence[CatalogProduct] | None = None,
) -> list[QueryExamples]:
    """Up to `per_product` distinct pseudo-queries of each product, drawn with `seed`, as training examples.

    Hard negatives come from `negatives_from` (default: `products`). Queries are lower-cased, as
    shoppers type them; their annotations keep the catalog's spelling for the aspect labels.
    """
    if per_product < 1:
        raise ValueError(f"per_product must be >= 1, got {per_product}")
    rng = np.random.default_rng(seed)
    negatives = HardNegatives(negatives_from if negatives_from is not None else products)
    examples = []
    for product in products:
        candidates = pseudo_queries_of(product)
        if not candidates:
            continue
        chosen = rng.choice(len(candidates), size=min(per_product, len(candidates)), replace=False)
        for index in sorted(int(i) for i in chosen):
            query = candidates[index]
            text = _fragment(product.title, rng) if query.kind == "title" else query.text
            negative = negatives.draw(product, query, rng)
            examples.append(
                QueryExamples(
                    query=text.lower(),
                    positives=(product.text,),
                    hard_negatives=(negative.text,) if negative else (),
                    query_aspects=query.aspects,
                    positive_aspects=(product.aspects,),
                    negative_aspects=(negative.aspects,) if negative else (),
                )
            )
    return examples


def catalog_product(record: Mapping[str, Any], text: str) -> CatalogProduct:
    """A validated product record (`schemas.validate_product`) and the text the model reads of it."""
    return CatalogProduct(
        str(record["product_id"]), str(record["title"]), text, record.get("aspects") or None
    )
