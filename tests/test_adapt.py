"""`madr adapt`: pseudo-queries from a catalog's fields, and the adapt job on a real (tiny) model."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import torch
from transformers import BertModel

from model import load_encoder
from model.training import TrainingConfig
from pipelines.layout import DatasetLayout
from pipelines.train.adapt import AdaptJob, run_adapt
from pipelines.train.pseudo_queries import CatalogProduct, pseudo_queries_of, pseudo_query_examples
from product_data.synthetic import SyntheticConfig, generate_benchmark
from schemas.splits import HeldOutProducts


def _product(pid: str, title: str, **aspects: str) -> CatalogProduct:
    return CatalogProduct(pid, title, f"{title} . text", {k: [v] for k, v in aspects.items()} or None)


PANS = [
    _product(
        "a", "Fissler Original-Profi Collection Frying Pan 28 cm", category="Frying Pans", brand="Fissler"
    ),
    _product("b", "WMF Devil Frying Pan, 24 cm", category="Frying Pans", brand="WMF", color="Black"),
    _product("c", "Le Creuset Signature Cast Iron Casserole", category="Casseroles", brand="Le Creuset"),
    _product("d", "Thing", category="Frying Pans"),
    _product("e", "Two words"),
]


def test_pseudo_queries_name_the_fields_a_product_has() -> None:
    kinds = {p.product_id: [(q.kind, q.text) for q in pseudo_queries_of(p)] for p in PANS}
    assert kinds["b"] == [
        ("brand+category", "WMF Frying Pans"),
        ("color+category", "Black Frying Pans"),
        ("category", "Frying Pans"),
        ("title", "WMF Devil Frying Pan 24 cm"),
    ]
    assert kinds["d"] == [("category", "Frying Pans")]  # one word: no title fragment
    assert kinds["e"] == []  # no fields, and a title too short to cut


def test_hard_negatives_share_the_category_but_not_the_aspect_the_query_names() -> None:
    examples = pseudo_query_examples(PANS, per_product=4, seed=3)
    by_query = {ex.query: ex for ex in examples}
    brand_query = by_query["fissler frying pans"]
    # The only other frying pan with a brand is WMF's: it is the hard negative, with its annotations.
    assert brand_query.hard_negatives == ("WMF Devil Frying Pan, 24 cm . text",)
    assert brand_query.negative_aspects == (
        {"category": ["Frying Pans"], "brand": ["WMF"], "color": ["Black"]},
    )
    assert brand_query.query_aspects == {"brand": ["Fissler"], "category": ["Frying Pans"]}
    # No other casserole: no hard negative, in-batch negatives only.
    assert by_query["le creuset casseroles"].hard_negatives == ()
    # A colour query needs a sibling with another known colour: none here.
    assert by_query["black frying pans"].hard_negatives == ()


def test_title_fragments_are_two_to_four_consecutive_words_and_seeded() -> None:
    first = pseudo_query_examples(PANS, per_product=4, seed=7)
    assert first == pseudo_query_examples(PANS, per_product=4, seed=7)
    fragments = [ex for ex in first if ex.query_aspects is None]
    assert fragments
    for example in fragments:
        title = next(p.title for p in PANS if example.positives[0].startswith(p.title)).lower()
        words = example.query.split()
        assert 2 <= len(words) <= 4 and example.query in title.replace(",", "").replace("-", "-")
        assert example.query != title


@pytest.fixture(scope="module")
def catalog(tmp_path_factory: pytest.TempPathFactory) -> DatasetLayout:
    data = DatasetLayout(str(tmp_path_factory.mktemp("adapt-data")))
    generate_benchmark(SyntheticConfig(num_products=300, num_queries=30, seed=5), data.root)
    return data


def test_adapt_learns_this_catalogs_vocabulary_and_holds_products_out(
    catalog, tiny_backbone_dir, tmp_path
) -> None:
    job = AdaptJob(
        dataset=catalog.root,
        output=str(tmp_path / "adapted"),
        backbone=str(tiny_backbone_dir),
        held_out=HeldOutProducts(0.2),
        max_document_length=32,
    )
    loop = TrainingConfig(max_steps=3, batch_size=8, show_progress=False, learning_rate=1e-4)
    report = run_adapt(job, loop)
    assert report.steps == 3 and report.train_queries > 200 and report.held_out_products > 30
    encoder, _ = load_encoder(report.model_dir)
    assert encoder.config.variant == "mtbert" and encoder.config.pooling.value == "mean"
    # The heads are sized by the catalog's products (not by any other dataset's vocabulary).
    products = pq.read_table(str(Path(catalog.root) / "products"), columns=["aspects"]).to_pylist()
    brands = {
        v.casefold() for row in products for k, vs in (row["aspects"] or []) if k == "brand" for v in vs
    }
    assert 0 < report.vocabulary_sizes["brand"] <= len(brands)
    assert encoder.vocabulary.sizes()["brand"] == report.vocabulary_sizes["brand"]
    manifest = json.loads((Path(report.model_dir) / "manifest.json").read_text())
    assert manifest["held_out_products"] == {"rule": HeldOutProducts(0.2).to_dict()["rule"], "fraction": 0.2}
    assert manifest["vocabulary_source"] == "the catalog's products"
    accuracy = report.held_out_accuracy
    assert accuracy is not None and set(accuracy.accuracy) == {"category", "brand", "color"}
    assert sum(accuracy.counts.values()) > 0
    assert "held-out products" in report.format()


def test_adapt_from_a_trained_model_keeps_its_transformer(catalog, tiny_backbone_dir, tmp_path) -> None:
    first = AdaptJob(dataset=catalog.root, output=str(tmp_path / "a"), backbone=str(tiny_backbone_dir))
    loop = TrainingConfig(max_steps=2, batch_size=8, show_progress=False)
    source = run_adapt(first, loop).model_dir
    second = AdaptJob(
        dataset=catalog.root,
        output=str(tmp_path / "b"),
        backbone=str(tiny_backbone_dir),
        from_model=str(source),
    )
    # Zero steps of training are not allowed; one step at a negligible rate leaves the transformer as it was.
    adapted = run_adapt(
        second, TrainingConfig(max_steps=1, batch_size=8, show_progress=False, learning_rate=1e-12)
    )
    before, _ = load_encoder(source)
    after, _ = load_encoder(adapted.model_dir)
    name = "transformers.shared.embeddings.word_embeddings.weight"
    torch.testing.assert_close(after.state_dict()[name], before.state_dict()[name], atol=1e-6, rtol=0)
    manifest = json.loads((Path(adapted.model_dir) / "manifest.json").read_text())
    assert manifest["adapted_from"] == str(source)


def test_wise_ft_alpha_averages_the_saved_model_with_the_backbone(
    catalog, tiny_backbone_dir, tmp_path
) -> None:
    """α = 0 after training leaves exactly the backbone's transformer and the identity projection."""
    job = AdaptJob(dataset=catalog.root, output=str(tmp_path / "a"), backbone=str(tiny_backbone_dir))
    loop = TrainingConfig(
        max_steps=2, batch_size=8, show_progress=False, learning_rate=1e-3, wise_ft_alpha=0.0
    )
    report = run_adapt(job, loop)
    adapted, _ = load_encoder(report.model_dir)
    backbone = BertModel.from_pretrained(str(tiny_backbone_dir), add_pooling_layer=False).state_dict()
    state = adapted.state_dict()
    for name, tensor in backbone.items():
        torch.testing.assert_close(state[f"transformers.shared.{name}"], tensor)
    torch.testing.assert_close(state["towers.shared.projection.weight"], torch.eye(32))
    manifest = json.loads((Path(report.model_dir) / "manifest.json").read_text())
    assert manifest["wise_ft_alpha"] == 0.0


@pytest.mark.e2e
def test_madr_adapt_runs_as_the_readme_types_it(catalog, tmp_path, capsys) -> None:
    """`madr adapt --data DIR --output MODEL` through the console's argv (it crashed on a doubled
    `dataset` keyword while every test called the Python API), on the bundled backbone."""
    from jobs.cli import main

    output = tmp_path / "adapted"
    argv = ["adapt", "--data", catalog.root, "--output", str(output), "--evaluation", "none"]
    argv += ["--max_steps", "2", "--min_steps", "0", "--batch_size", "8", "--max_products", "60"]
    assert main(argv) == 0, capsys.readouterr().err
    assert (output / "manifest.json").is_file()
    assert "held-out products" in capsys.readouterr().out


def _budget_job(catalog, backbone, tmp_path, step_budget: int) -> AdaptJob:
    return AdaptJob(
        dataset=catalog.root,
        output=str(tmp_path / "adapted"),
        backbone=str(backbone),
        max_document_length=32,
        step_budget=step_budget,
        min_steps=0,
    )


def test_a_catalog_over_the_step_budget_adapts_on_a_sample_and_says_so(
    catalog, tiny_backbone_dir, tmp_path, caplog
) -> None:
    job = _budget_job(catalog, tiny_backbone_dir, tmp_path, step_budget=5)
    loop = TrainingConfig(batch_size=8, show_progress=False, learning_rate=1e-4)
    with caplog.at_level("INFO"):
        report = run_adapt(job, loop)
    assert report.train_queries == 40 and report.steps == 5  # 5 steps of 8, one epoch
    assert "the 5-step budget takes 40 of them, drawn across its" in caplog.text
    assert "the first step took" in caplog.text and "minutes for the 5 steps" in caplog.text


def test_max_minutes_ends_training_at_the_step_it_passes(
    catalog, tiny_backbone_dir, tmp_path, caplog
) -> None:
    job = _budget_job(catalog, tiny_backbone_dir, tmp_path, step_budget=10)
    loop = TrainingConfig(batch_size=8, show_progress=False, learning_rate=1e-4, max_minutes=1e-6)
    with caplog.at_level("INFO"):
        report = run_adapt(job, loop)
    assert report.steps == 1 and report.best_valid_mrr is not None  # the last step is validated
    assert "--max_minutes 1e-06 reached at step 1 of 10" in caplog.text


def test_max_minutes_moves_the_learning_rates_decay_to_the_step_the_deadline_allows(
    tiny_model_dir, tmp_path, monkeypatch, caplog
) -> None:
    """At one minute a step, 10 minutes allow 10 of 100 steps: the rate decays to 0 there, not at 100."""
    from model.training import loop as step_loop
    from model.training.config import LoopSettings

    encoder, tokenizer = load_encoder(tiny_model_dir)
    clock = iter(range(0, 10_000, 60))  # each call a minute later: start, then one per step
    monkeypatch.setattr(step_loop.time, "monotonic", lambda: float(next(clock)))
    settings = LoopSettings(max_minutes=10, warmup_fraction=0.0, show_progress=False)
    loop = step_loop.StepLoop(step_loop.EncoderRun(encoder, tokenizer, settings, tmp_path), "test")
    loop.start(100, lambda: {"test": 1})
    rates = []
    with caplog.at_level("INFO"):
        while loop.running:
            with loop.optimiser_step():
                pass
            rates.append(loop.scheduler.get_last_lr()[0])
    assert loop.step == 10 and loop.planned_steps == 10
    assert "allows about 10 of the 100 steps" in caplog.text
    assert rates[-1] == 0.0 and rates[3] > rates[6] > rates[8] > 0
    # Without a deadline the decay is transformers' linear schedule over every step, factor for factor.
    from transformers import get_linear_schedule_with_warmup

    theirs = get_linear_schedule_with_warmup(torch.optim.SGD([torch.zeros(1)], lr=1.0), 10, 100)
    assert [theirs.lr_lambdas[0](step) for step in range(120)] == [
        step_loop.linear_warmup_then_decay(step, 10, 100) for step in range(120)
    ]
