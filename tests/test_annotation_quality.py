"""Held-out products by rule, carried from pre-training through fine-tuning to `madr evaluate`."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from jobs.cli import main
from model import load_encoder, load_vocabulary
from model.abstention import AbstentionRule
from pipelines.evaluate.annotation_quality import (
    held_out_products,
    measure_annotation_quality,
    tuned_products,
    written_annotation_accuracy,
)
from pipelines.evaluate.trained_products import never_trained_on
from pipelines.layout import DatasetLayout
from pipelines.settings.options import ModelSettings
from product_data.synthetic import SyntheticConfig, generate_benchmark
from schemas.splits import RULE_NAME, HeldOutProducts, held_out_bucket


def test_the_rule_holds_out_its_share_stably() -> None:
    ids = [f"product-{i}" for i in range(20_000)]
    rule = HeldOutProducts(0.1)
    held = [pid for pid in ids if rule.contains(pid)]
    assert 0.09 < len(held) / len(ids) < 0.11
    assert held == [pid for pid in ids if HeldOutProducts(0.1).contains(pid)]
    assert not any(HeldOutProducts(0.0).contains(pid) for pid in ids)
    # A larger share holds out a superset: growing the held-out set never returns products to training.
    assert set(held) <= {pid for pid in ids if HeldOutProducts(0.2).contains(pid)}
    assert held_out_bucket("a") == held_out_bucket("a") != held_out_bucket("b")


def test_the_rule_round_trips_through_a_manifest_and_refuses_unknown_rules() -> None:
    assert HeldOutProducts.from_manifest({"held_out_products": HeldOutProducts(0.05).to_dict()}) == (
        HeldOutProducts(0.05)
    )
    assert HeldOutProducts.from_manifest({}) is None
    with pytest.raises(ValueError, match="unknown held-out rule"):
        HeldOutProducts.from_manifest({"held_out_products": {"rule": "first 10", "fraction": 0.1}})
    with pytest.raises(ValueError, match=r"in \[0, 1\)"):
        HeldOutProducts(1.0)


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> DatasetLayout:
    data = DatasetLayout(str(tmp_path_factory.mktemp("data")))
    generate_benchmark(SyntheticConfig(num_products=300, num_queries=30, seed=5), data.root)
    return data


@pytest.fixture(scope="module")
def tuned(dataset: DatasetLayout, tiny_backbone_dir, tmp_path_factory: pytest.TempPathFactory) -> str:
    """`madr pretrain --held_out_fraction 0.2`, then `madr train --init_from` it (a tiny MtBERT)."""
    root = tmp_path_factory.mktemp("models")
    common = ["--data", dataset.root, "--variant", "mtbert", "--backbone", str(tiny_backbone_dir)]
    common += ["--projection_dim", "16", "--max_document_length", "32"]
    pretrain = [
        "--out",
        str(root / "pre"),
        "--max_steps",
        "2",
        "--batch_size",
        "8",
        "--held_out_fraction",
        "0.2",
    ]
    assert main(["pretrain", *common, *pretrain]) == 0
    tune = [
        "--out",
        str(root / "tuned"),
        "--init_from",
        str(root / "pre"),
        "--max_steps",
        "1",
        "--batch_size",
        "4",
    ]
    assert main(["train", *common, *tune]) == 0
    return str(root / "tuned")


def test_pretraining_skips_the_held_out_products_and_fine_tuning_keeps_the_rule(
    dataset: DatasetLayout, tuned: str
) -> None:
    ids = pq.read_table(f"{dataset.root}/products", columns=["product_id"]).column("product_id").to_pylist()
    held = sum(HeldOutProducts(0.2).contains(pid) for pid in ids)
    assert 0 < held < len(ids)
    pre = json.loads((Path(tuned).parent / "pre" / "manifest.json").read_text())
    assert pre["records"]["document"] == len(ids) - held
    assert pre["held_out_products"] == {"rule": RULE_NAME, "fraction": 0.2}
    assert (
        json.loads((Path(tuned) / "manifest.json").read_text())["held_out_products"]
        == pre["held_out_products"]
    )


def test_held_out_products_are_the_rule_minus_products_tuned_on(dataset: DatasetLayout) -> None:
    excluded = tuned_products(dataset.queries, dataset.judgments, "test")
    assert excluded
    chosen = held_out_products(dataset.products, HeldOutProducts(0.2), excluded, sample=10_000)
    assert chosen and all(HeldOutProducts(0.2).contains(p["product_id"]) for p in chosen)
    assert not {p["product_id"] for p in chosen} & excluded
    assert all(p["aspects"] for p in chosen)
    assert len(held_out_products(dataset.products, HeldOutProducts(0.2), excluded, sample=3)) == 3
    everything = held_out_products(dataset.products, None, excluded, sample=10_000)
    assert len(everything) > len(chosen)


def test_quality_report_is_calibrated_at_min_confidence(dataset: DatasetLayout, tuned: str) -> None:
    args = (tuned, dataset.products, dataset.queries, dataset.judgments, "test")
    everything = measure_annotation_quality(*args, rule=AbstentionRule(0.0, stated_aspects=()))
    nothing = measure_annotation_quality(*args, rule=AbstentionRule(1.0, stated_aspects=()))
    stated = measure_annotation_quality(*args, rule=AbstentionRule(0.0))
    assert everything is not None and nothing is not None
    assert "held-out products (20% of the catalog" in everything.held_out
    for aspect, accuracy in everything.products.accuracy.items():
        assert 0 <= accuracy <= everything.products.accuracy_at_3[aspect] <= 1
        # At threshold 0 every prediction counts; above 1, none does.
        assert everything.products.confident_coverage[aspect] == 1.0
        assert everything.products.confident_accuracy[aspect] == pytest.approx(accuracy)
        assert nothing.products.confident_coverage[aspect] == 0.0
        assert nothing.products.confident_accuracy[aspect] is None
    # Brand and colour values the product's text does not name are not written: fewer are, none wrong
    # because of the check (a value the text names is one the annotation, taken from the text, can be).
    assert stated is not None
    assert stated.products.confident_coverage["category"] == 1.0
    for aspect in ("brand", "color"):
        assert stated.products.confident_coverage[aspect] < 1.0
    assert sum(everything.products.counts.values()) > 0 and everything.queries is not None
    table = everything.table().splitlines()
    assert table[1].split()[:5] == ["aspect", "products", "OOV", "Acc@1", "Acc@3"]
    assert {line.split()[0] for line in table[2:]} == set(everything.products.accuracy)


def test_a_catalog_is_unseen_by_its_product_ids_never_by_its_folder(
    dataset: DatasetLayout, tuned: str, tmp_path: Path
) -> None:
    """Issue 69: a fresh export of the same shop in a new folder holds the products the model trained on,
    so its held-out slice is scored, as in the dataset itself; a catalog none of whose ids the model
    trained on is scored whole."""
    copy = DatasetLayout(str(tmp_path / "store"))
    shutil.copytree(dataset.root, copy.root)
    own = measure_annotation_quality(tuned, dataset.products, dataset.queries, dataset.judgments)
    same = measure_annotation_quality(tuned, copy.products, copy.queries, copy.judgments)
    assert own is not None and same is not None
    assert same.held_out == own.held_out and same.products_measured == own.products_measured
    assert same.unseen and "held-out products" in same.held_out
    # The same products under new ids: never trained on, so every annotated one is scored.
    other = DatasetLayout(str(tmp_path / "renamed"))
    shutil.copytree(dataset.root, other.root)
    for path in sorted(Path(other.root, "products").glob("*.parquet")):
        table = pq.read_table(path)
        ids = [f"new-{pid}" for pid in table.column("product_id").to_pylist()]
        pq.write_table(table.set_column(0, "product_id", pa.array(ids)), path)
    whole = measure_annotation_quality(tuned, other.products, other.queries, other.judgments)
    assert whole is not None and whole.unseen
    assert "of a catalog the model never trained on" in whole.held_out
    annotated = sum(1 for row in pq.read_table(f"{dataset.root}/products").to_pylist() if row["aspects"])
    assert whole.products_measured == annotated > own.products_measured
    # --products as a folder reads the same catalog as its glob (the nightly passes what embed was given).
    folder = measure_annotation_quality(tuned, f"{other.root}/products", other.queries, other.judgments)
    assert folder is not None and folder.products_measured == whole.products_measured
    # A model whose training data cannot be read any more assumes nothing: its held-out rule decides.
    manifest = json.loads(Path(tuned, "manifest.json").read_text())
    assert never_trained_on(tuned, manifest, ["new-p1"]) is True
    assert never_trained_on(tuned, {**manifest, "dataset": str(tmp_path / "gone")}, ["new-p1"]) is False
    assert never_trained_on(tuned, {}, ["new-p1"]) is False


def test_a_model_without_aspect_heads_reports_none(dataset: DatasetLayout, tiny_model_dir) -> None:
    assert (
        measure_annotation_quality(str(tiny_model_dir), dataset.products, dataset.queries, dataset.judgments)
        is None
    )
    assert load_vocabulary(tiny_model_dir) is None


def test_the_vocabulary_read_alone_is_the_loaded_models(tuned: str) -> None:
    """`written_annotation_accuracy` names values with the vocabulary read without the weights."""
    encoder, _ = load_encoder(tuned)
    alone = load_vocabulary(tuned)
    assert encoder.vocabulary is not None and alone is not None
    assert alone.to_dict() == encoder.vocabulary.to_dict()


def test_written_annotations_score_like_the_model_and_int8_stays_close(
    dataset: DatasetLayout, tuned: str, tmp_path: Path
) -> None:
    """The shards of an fp32 embed run score exactly what the model scores; int8 shards stay close."""
    measured = measure_annotation_quality(tuned, dataset.products, dataset.queries, dataset.judgments, "test")
    assert measured is not None
    written = {}
    for precision in ("fp32", "int8"):
        output = tmp_path / precision
        flags = ["embed", "--products", dataset.products, "--model", tuned, "--output", str(output)]
        assert main([*flags, "--precision", precision]) == 0
        written[precision] = written_annotation_accuracy(
            tuned, str(output), dataset.products, dataset.queries, dataset.judgments, "test"
        )
    assert {aspect: accuracy for aspect, (accuracy, _) in written["fp32"].items()} == pytest.approx(
        measured.products.accuracy
    )
    assert {aspect: count for aspect, (_, count) in written["fp32"].items()} == measured.products.counts
    for aspect, (accuracy, count) in written["int8"].items():
        # Within 0.1, or one product: a near tie of this tiny random model may flip under int8.
        assert abs(accuracy - written["fp32"][aspect][0]) <= max(0.1, 1 / count + 1e-9)


def test_quality_is_measured_at_the_runs_precision_when_given_its_settings(
    dataset: DatasetLayout, tuned: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """With the run's model settings the report encodes as the run does (int8 here, the nightly's
    precision): it scores what int8 shards hold, up to one product per aspect (int8 scales its
    activations per batch, and the report's batches are not the run's)."""
    output = tmp_path / "int8"
    flags = ["embed", "--products", dataset.products, "--model", tuned, "--output", str(output)]
    assert main([*flags, "--precision", "int8"]) == 0
    args = (tuned, dataset.products, dataset.queries, dataset.judgments, "test")
    written = written_annotation_accuracy(tuned, str(output), *args[1:])
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="model.text_encoder"):
        at_int8 = measure_annotation_quality(*args, settings=ModelSettings(model=tuned, precision="int8"))
    assert at_int8 is not None and at_int8.queries is not None
    # The model is loaded once, for both sides (it was loaded three times).
    assert caplog.text.count("encoding with onnxruntime, int8") == 1, caplog.text
    for aspect, (accuracy, count) in written.items():
        assert abs(at_int8.products.accuracy[aspect] - accuracy) <= 1 / count + 1e-9
        assert at_int8.products.counts[aspect] == count


def test_products_that_calibrated_the_confidences_are_not_scored(
    dataset: DatasetLayout, tuned: str, tmp_path: Path
) -> None:
    """`madr train` of a model pre-trained with 20 % held out fits its temperatures on half of them (10 %);
    evaluation scores the rest. The same model without that record would score all of them."""
    manifest = json.loads((Path(tuned) / "manifest.json").read_text())
    assert manifest["calibrated_on_products"] == HeldOutProducts(0.1).to_dict()
    assert set(manifest["aspect_temperatures"]) <= {"category", "brand", "color"}
    config = json.loads((Path(tuned) / "config.json").read_text())
    assert config["aspect_temperatures"] == manifest["aspect_temperatures"]
    uncalibrated = tmp_path / "uncalibrated"
    shutil.copytree(tuned, uncalibrated)
    del manifest["calibrated_on_products"]
    (uncalibrated / "manifest.json").write_text(json.dumps(manifest))
    args = (dataset.products, dataset.queries, dataset.judgments)
    rest = measure_annotation_quality(tuned, *args)
    everything = measure_annotation_quality(str(uncalibrated), *args)
    assert everything is not None and rest is not None
    assert 0 < rest.products_measured < everything.products_measured
    assert "less the 10.0% that calibrated the confidences" in rest.held_out


def test_a_near_duplicate_of_a_product_tuned_on_is_not_held_out(tmp_path) -> None:
    """Issue 48: the evaluation scored the same item under another id as unseen, the experiment did not;
    both now leave out a held-out product whose title words are those of a product training read."""
    from schemas.splits import title_key
    from tests.test_embed_pipeline import catalog, write_catalog

    # Titles that differ in words: title_key drops numbers ("Size 42"), so catalog()'s differ in none.
    products = [
        {**p, "title": f"Nike crew sock {chr(97 + i % 26)}{chr(97 + i // 26)}"}
        for i, p in enumerate(catalog(40))
    ]
    twin = {**products[0], "product_id": "twin-of-p0", "title": products[0]["title"].upper() + "!"}
    path = write_catalog(tmp_path / "products.parquet", [*products, twin])
    everything = held_out_products(path, None, set(), sample=None)
    assert "twin-of-p0" in {p["product_id"] for p in everything}
    chosen = held_out_products(path, None, {products[0]["product_id"]}, sample=None)
    ids = {p["product_id"] for p in chosen}
    assert products[0]["product_id"] not in ids and "twin-of-p0" not in ids
    assert len(ids) == len(everything) - 2
    assert title_key(twin["title"]) == title_key(products[0]["title"])
