"""bench.distractor_recall's catalog: generator products of another seed, unjudged, with ids of their own."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from bench.distractor_recall import PREFIX, distractor_catalog, union_catalog
from product_data.synthetic import SyntheticConfig, generate_benchmark


@pytest.fixture(scope="module")
def benchmark(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("benchmark")
    generate_benchmark(SyntheticConfig(num_products=300, num_queries=20, seed=13), str(folder))
    return folder


def test_distractors_are_another_seeds_products_under_ids_of_their_own(
    benchmark: Path, tmp_path: Path
) -> None:
    distractors = distractor_catalog(tmp_path / "d", 400, seed=1013)
    rows = pq.read_table(distractors).to_pylist()
    catalog = pq.read_table(benchmark / "products").to_pylist()
    assert len(rows) == 400 and all(row["product_id"].startswith(PREFIX) for row in rows)
    assert {row["product_id"] for row in rows}.isdisjoint({row["product_id"] for row in catalog})
    # Another seed: other products, not the catalog's under new names.
    same = {row["title"] for row in rows[:300]} & {row["title"] for row in catalog}
    assert len(same) < 30
    judged = set(pq.read_table(benchmark / "judgments.parquet").column("product_id").to_pylist())
    assert judged.isdisjoint(row["product_id"] for row in rows)  # unjudged
    union = union_catalog(distractors.parent, benchmark / "products", distractors)
    assert pq.read_table(union, columns=["product_id"]).num_rows == 700
    assert (
        union_catalog(distractors.parent, benchmark / "products", distractors) == union
    )  # re-run: same links


def test_a_distractor_id_equal_to_a_catalog_id_is_refused(benchmark: Path, tmp_path: Path) -> None:
    # The catalog against itself: every id collides.
    with pytest.raises(ValueError, match="distractor ids are catalog ids"):
        union_catalog(tmp_path, benchmark / "products", benchmark / "products")
