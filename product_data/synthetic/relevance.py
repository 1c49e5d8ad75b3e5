"""The relevance rule: every judged grade is this function of (query target, product spec).

Grades follow madral-kdd22 §8.1: 4 perfect, 3 excellent, 2 good, 1 fair, 0 non-relevant,
and metrics that need binary labels treat grade <= 1 as negative. The rule reads the
product's *fields* (its leaf, brand, color, variant), never its annotations or text: a
listing that never says "white" is still a white sock, and a cookbook that says "Breville
juicer" in its title is still a book.

1. The query names a category and the product is in another leaf: 1 if that leaf is
   related (a sibling under the same parent, e.g. Blenders for "juicer", or the same style
   for another audience, e.g. women's for "mens athletic socks") and the product has the
   query's brand, if any; otherwise 0. (The "juicer book" of madral-kdd22 Table 8 is a
   Book: 0. The Breville toaster for "breville juicer": 1, fair but negative.)
2. The query names a brand and the product has another or no brand: 1 if the query
   named a category (right category, wrong brand: a substitute, "fair"); 0 for a
   brand-only query ("nike" is not asking for Adidas).
3. Otherwise start at 4 and subtract: color of the same family but another shade 1,
   another or unknown color 2 (only if the query names a color); another variant 1 (only
   if the query names one, e.g. "queen size"). Never below 2: the right category and
   brand is at least "good".
"""

from __future__ import annotations

from dataclasses import dataclass

from product_data.synthetic.catalog import ProductSpec
from product_data.synthetic.taxonomy import Taxonomy
from product_data.synthetic.vocabulary import COLOR_FAMILY

GRADE_NAMES: dict[int, str] = {4: "perfect", 3: "excellent", 2: "good", 1: "fair", 0: "non-relevant"}
POSITIVE_GRADE = 2  # rel <= 1 is negative (madral-kdd22 §8.1)
RULE = (
    "if the query names a category and the product is in another leaf: 1 if the leaf is related "
    "(sibling, or same style for another audience) and no query brand is missed, else 0; "
    "else 1 (0 for brand-only queries) if the query names a brand the product lacks; "
    "else 4 minus 1 for another shade of the query color, 2 for another or unknown color, "
    "1 for another variant, floored at 2"
)


@dataclass(frozen=True)
class QueryTarget:
    """What a query asks for; None where it does not say."""

    leaf: int | None
    brand: str | None
    color: str | None
    variant: str | None

    def __post_init__(self) -> None:
        if self.leaf is None and self.brand is None:
            raise ValueError("a query target needs a category or a brand")
        if self.variant is not None and self.leaf is None:
            raise ValueError("a variant ('queen size') only means something within a category")


def grade(target: QueryTarget, product: ProductSpec, taxonomy: Taxonomy) -> int:
    """The graded relevance of ``product`` for ``target``; see the module docstring."""
    brand_ok = target.brand is None or product.brand == target.brand
    if target.leaf is not None and product.leaf != target.leaf:
        return 1 if brand_ok and taxonomy.related(target.leaf, product.leaf) else 0
    if not brand_ok:
        return 1 if target.leaf is not None else 0
    score = 4
    if target.color is not None and product.color != target.color:
        same_family = product.color is not None and COLOR_FAMILY[product.color] == COLOR_FAMILY[target.color]
        score -= 1 if same_family else 2
    if target.variant is not None and product.variant != target.variant:
        score -= 1
    return max(score, POSITIVE_GRADE)
