"""What training never reads: held-out products by id or by title, and vocabularies of training data only
(issue 27, item 3)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipelines.train.vocabulary import run_build_vocabulary
from schemas import PRODUCT_SCHEMA, QUERY_SCHEMA
from schemas.splits import TITLE_RULE_NAME, HeldOutProducts, title_key


def test_titles_that_differ_only_in_case_numbers_or_punctuation_share_a_side() -> None:
    rule = HeldOutProducts(0.5, by="title")
    variants = ["Acme Trail Shirt, Size 42", "acme trail shirt size 44", "ACME Trail-Shirt (2027)"]
    assert title_key(variants[0]) == title_key(variants[1]) == "acme trail shirt size"
    assert title_key("Acme Shirt, Size 42") == "acme shirt size" == title_key("acme  shirt size 7")
    sides = {rule.holds({"product_id": f"p{i}", "title": title}) for i, title in enumerate(variants[:2])}
    assert len(sides) == 1  # one key, one side, whatever the ids
    # "item 7" and "item 8" are one title to the rule (numbers dropped): distinct titles need other words.
    assert len({rule.holds({"product_id": f"p{i}", "title": f"item {i}"}) for i in range(50)}) == 1
    words = ["".join(chr(97 + (i // 26**k) % 26) for k in range(3)) for i in range(2000)]
    held = sum(rule.holds({"product_id": "same", "title": f"item {word}"}) for word in words)
    assert 0.45 < held / len(words) < 0.55  # distinct titles split at the fraction, whatever the id


def test_a_title_rule_is_recorded_and_read_back_and_needs_the_product() -> None:
    rule = HeldOutProducts(0.1, by="title")
    assert rule.to_dict() == {"rule": TITLE_RULE_NAME, "fraction": 0.1}
    assert HeldOutProducts.from_manifest({"held_out_products": rule.to_dict()}) == rule
    with pytest.raises(ValueError, match="holds"):
        rule.contains("p1")
    with pytest.raises(ValueError, match="by one of"):
        HeldOutProducts(0.1, by="brand")


def _product(product_id: str, brand: str) -> dict:
    return {"product_id": product_id, "title": f"item {product_id}", "aspects": [("brand", [brand])]}


def test_the_vocabulary_counts_only_what_training_reads(tmp_path) -> None:
    """A brand carried only by held-out products, or only by test queries, is not in the vocabulary."""
    rule = HeldOutProducts(0.5)
    ids = [f"p{i}" for i in range(40)]
    held = [pid for pid in ids if rule.contains(pid)]
    kept = [pid for pid in ids if not rule.contains(pid)]
    products = [_product(pid, "common") for pid in kept] + [_product(pid, "heldonly") for pid in held]
    (tmp_path / "products").mkdir()
    pq.write_table(pa.Table.from_pylist(products, PRODUCT_SCHEMA), tmp_path / "products" / "p.parquet")
    queries = [
        {"query_id": f"q{i}", "text": "q", "aspects": [("brand", [brand])], "split": split}
        for i, (brand, split) in enumerate(
            [("trainonly", "train"), ("trainonly", "train"), ("testonly", "test"), ("testonly", "test")]
        )
    ]
    pq.write_table(pa.Table.from_pylist(queries, QUERY_SCHEMA), tmp_path / "queries.parquet")
    pattern, query_path = str(tmp_path / "products" / "*.parquet"), str(tmp_path / "queries.parquet")

    def brands(**filters) -> set[str]:
        vocabulary = run_build_vocabulary(
            pattern, query_path, ("brand",), 2, str(tmp_path / "v.json"), **filters
        )
        return set(vocabulary.aspects["brand"].values)

    assert brands(held_out=rule) == {"common", "trainonly"}
    assert brands(held_out=None, query_splits=None) == {"common", "heldonly", "trainonly", "testonly"}
    assert len(held) >= 2 and len(kept) >= 2  # each brand clears the min count on its own side
