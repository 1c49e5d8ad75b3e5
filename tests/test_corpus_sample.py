"""`madr adapt`'s evaluation corpus: every judged product and a fixed sample of the rest, on real Parquet."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from jobs import adapt as adapt_job
from jobs.cli import parse_command
from pipelines.evaluate.corpus_sample import sample_corpus
from pipelines.layout import DatasetLayout
from product_data.synthetic import SyntheticConfig, generate_benchmark


@pytest.fixture(scope="module")
def catalog(tmp_path_factory: pytest.TempPathFactory) -> DatasetLayout:
    data = DatasetLayout(str(tmp_path_factory.mktemp("corpus-data")))
    generate_benchmark(SyntheticConfig(num_products=1000, num_queries=20, seed=5), data.root)
    return data


def _rows(glob: str) -> dict[str, dict]:
    table = pq.ParquetDataset(sorted(Path(glob).parent.glob(Path(glob).name))).read()
    return {row["product_id"]: row for row in table.to_pylist()}


def test_a_catalog_over_the_limit_keeps_every_judged_product_and_a_fixed_sample(catalog, tmp_path) -> None:
    judged = set(pq.read_table(catalog.judgments, columns=["product_id"]).column("product_id").to_pylist())
    every = _rows(catalog.products)
    assert 0 < len(judged) < 400 < len(every)
    cut = sample_corpus(catalog.products, catalog.judgments, 400, tmp_path / "a")
    kept = _rows(cut.products)
    assert (cut.kept, cut.catalog, cut.judged, len(kept)) == (400, 1000, len(judged), 400)
    assert judged <= set(kept)  # no judged product is cut: its recall would read as a miss
    assert all(kept[pid] == every[pid] for pid in kept)  # the rows as the catalog has them
    again = sample_corpus(catalog.products, catalog.judgments, 400, tmp_path / "b")
    assert set(_rows(again.products)) == set(kept)  # the same corpus on every run
    wider = sample_corpus(catalog.products, catalog.judgments, 500, tmp_path / "a")  # the old cut replaced
    assert set(kept) < set(_rows(wider.products)) and len(_rows(wider.products)) == 500
    wording = f"over 400 of the catalog's 1,000 products ({len(judged)} judged and {400 - len(judged)} of"
    assert wording in cut.describe()
    few = sample_corpus(
        catalog.products, catalog.judgments, 10, tmp_path / "c"
    )  # every judged one all the same
    assert few.kept == len(judged) and f"({len(judged)} judged, no other:" in few.describe()


def test_a_catalog_within_the_limit_or_limit_zero_is_the_catalog_itself(catalog, tmp_path) -> None:
    for limit in (0, 1000, 5000):
        whole = sample_corpus(catalog.products, catalog.judgments, limit, tmp_path / str(limit))
        assert whole.products == catalog.products and whole.whole and not (tmp_path / str(limit)).exists()
    assert whole.describe() == "over all 1,000 products"


def test_madr_adapt_evaluates_both_models_over_one_cut_corpus(catalog, tiny_backbone_dir, tmp_path) -> None:
    """As typed: `--evaluation_products 300` cuts the corpus once; each model's evaluation gets it."""
    argv = ["--data", catalog.root, "--output", str(tmp_path / "adapted")]
    argv += ["--max_steps", "1", "--min_steps", "0", "--batch_size", "8", "--max_document_length", "32"]
    typed = parse_command("adapt", [*argv, "--evaluation_products", "300"])[0]
    # The tiny backbone is a test's (adapt starts from the bundled MiniLM; it has no flag for another).
    run = dataclasses.replace(typed, job=dataclasses.replace(typed.job, backbone=str(tiny_backbone_dir)))
    seen: list[str | None] = []

    def evaluated(model, data, folder, overwrite, products=None):  # the embed + evaluate passes, recorded
        seen.append(products)
        return {"table": ""}

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(adapt_job, "evaluate_model", evaluated)
        result = adapt_job.run_adapt_job(run)
    assert len(seen) == 1 and len(_rows(seen[0])) == 300 and result["evaluation_corpus"].kept == 300
    with pytest.raises(ValueError, match="--evaluation_products must be >= 0"):
        parse_command("adapt", [*argv, "--evaluation_products", "-1"])
