"""Which products `madr adapt` trains on when the catalog is larger than its step budget.

Adapting is one pass of pseudo-queries over the training products; on a CPU a step of 32 costs a few
seconds, so a 100,000-product catalog would take hours. The budget (`AdaptJob.step_budget`, 300 steps by
default) fixes the cost instead: when the catalog has more products than the steps need, a sample fills
them, drawn across the catalog's category and brand groups in turn (seeded), so a long tail of small
groups is represented and a dominant one does not take every slot.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from pipelines.train.pseudo_queries import CatalogProduct


@dataclass(frozen=True)
class BudgetSample:
    """The products chosen, out of how many, across how many category/brand groups."""

    products: list[CatalogProduct]
    catalog: int
    groups: int

    @property
    def sampled(self) -> bool:
        return len(self.products) < self.catalog


def products_for_budget(
    products: Sequence[CatalogProduct], step_budget: int, per_step: int, seed: int
) -> BudgetSample:
    """At most `step_budget * per_step` products (all of them with a budget of 0), taken round-robin
    over the (category, brand) groups in a seeded order, each group's products seeded-shuffled."""
    groups: dict[tuple[str | None, str | None], list[CatalogProduct]] = defaultdict(list)
    for product in products:
        groups[(product.first("category"), product.first("brand"))].append(product)
    wanted = step_budget * per_step
    if not step_budget or len(products) <= wanted:
        return BudgetSample(list(products), len(products), len(groups))
    rng = random.Random(seed)
    queues = [list(group) for _, group in sorted(groups.items(), key=lambda item: str(item[0]))]
    for queue in queues:
        rng.shuffle(queue)
    rng.shuffle(queues)
    chosen: list[CatalogProduct] = []
    while len(chosen) < wanted:
        for queue in queues:
            if queue and len(chosen) < wanted:
                chosen.append(queue.pop())
        queues = [queue for queue in queues if queue]
    return BudgetSample(chosen, len(products), len(groups))
