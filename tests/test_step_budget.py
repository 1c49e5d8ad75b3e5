"""`madr adapt`'s step budget: a catalog larger than the budget's steps trains on a sample drawn across
its category and brand groups, seeded; a smaller one trains on every product."""

from __future__ import annotations

from collections import Counter

from pipelines.train.pseudo_queries import CatalogProduct
from pipelines.train.step_budget import products_for_budget


def _catalog() -> list[CatalogProduct]:
    # One dominant group (900 kettles by one brand) and 20 small ones of 5 products each.
    products = [
        CatalogProduct(f"k{i}", f"Kettle {i}", f"Kettle {i}", {"category": ["Kettles"], "brand": ["Smeg"]})
        for i in range(900)
    ]
    for group in range(20):
        aspects = {"category": [f"Category {group}"], "brand": [f"Brand {group % 7}"]}
        products += [CatalogProduct(f"g{group}-{i}", f"Thing {i}", f"Thing {i}", aspects) for i in range(5)]
    return products


def test_a_catalog_over_the_budget_is_sampled_across_its_groups() -> None:
    sample = products_for_budget(_catalog(), step_budget=4, per_step=20, seed=13)
    assert sample.sampled and len(sample.products) == 80 and sample.catalog == 1000 and sample.groups == 21
    groups = Counter(p.first("category") for p in sample.products)
    assert len(groups) == 21  # every small group is in, though a sample in catalog order would be all kettles
    assert groups["Kettles"] <= 4  # round-robin: the dominant group gets a turn like the others
    assert len({p.product_id for p in sample.products}) == 80


def test_the_sample_is_seeded() -> None:
    ids = [p.product_id for p in products_for_budget(_catalog(), 4, 20, seed=13).products]
    assert ids == [p.product_id for p in products_for_budget(_catalog(), 4, 20, seed=13).products]
    assert ids != [p.product_id for p in products_for_budget(_catalog(), 4, 20, seed=14).products]


def test_a_catalog_within_the_budget_or_a_budget_of_0_trains_on_every_product() -> None:
    catalog = _catalog()
    assert not products_for_budget(catalog, step_budget=50, per_step=20, seed=13).sampled
    assert products_for_budget(catalog, step_budget=0, per_step=20, seed=13).products == catalog
