"""`madr experiment --profile paper`: each variant trained as its paper says (issue 27, item 1)."""

from __future__ import annotations

import dataclasses

import pytest

from jobs.cli import parse_command
from jobs.experiment import PROFILES, ExperimentConfig
from model.aspects.extraction import FirstTokens
from model.madral import MadralEnV2Config
from model.training import TrainingConfig
from pipelines.experiment.variant import variant_training
from pipelines.train.finetune import TrainJob
from pipelines.train.pretrain import PretrainJob
from tests.conftest import tiny_backbone


def _profile(name: str) -> ExperimentConfig:
    return parse_command("experiment", ["--profile", name])[0].experiment


BUDGET = ExperimentConfig()
PAPER = _profile("paper")


def test_the_paper_profile_turns_the_paper_settings_on_and_gives_new_layers_their_own_rate() -> None:
    assert PAPER.paper_settings and not BUDGET.paper_settings
    assert PAPER.head_learning_rate == PROFILES["paper"]["head_learning_rate"] != BUDGET.head_learning_rate


def test_the_budget_profile_trains_every_variant_alike_with_one_shared_encoder() -> None:
    training = variant_training(BUDGET, "madral")
    assert training.preset is None and training.pretraining == {}
    assert training.model == {
        "max_document_length": BUDGET.max_document_length,
        "aspects": ("category", "brand", "color"),
        "variant_options": (("drop_last_layer", False),),
    }
    assert training.loop == TrainingConfig(
        epochs=BUDGET.epochs,
        patience=BUDGET.patience,
        batch_size=BUDGET.batch_size,
        seed=BUDGET.seed,
        aspect_loss_weight=BUDGET.aspect_loss_weight,
        pointwise_loss_weight=1.0,
    )
    assert (training.pretrained_from, training.pretrained_name) == ("madral", "madral")
    assert variant_training(BUDGET, "mpbert").pretrained_from is None  # the budget skips it
    assert variant_training(BUDGET, "dssm").embeddings_from == "bibert/model"


def test_madral_in_the_paper_profile_has_separate_towers_and_eq8() -> None:
    training = variant_training(PAPER, "madral")
    assert training.preset == "madral-kdd22"
    assert training.model["separate_towers"] and training.model["max_document_length"] == 128
    loop = training.loop
    assert (loop.pointwise_loss_weight, loop.aspect_loss_weight, loop.hard_negatives) == (1.0, 0.1, 1)
    assert loop.head_learning_rate == PROFILES["paper"]["head_learning_rate"]
    assert training.pretraining == {"aspect_weight": 1.0, "mask_probability": 0.15}
    assert training.pretrained_name == "madral-madral-kdd22"


def test_the_repro_variants_share_towers_and_their_own_pretrained_model() -> None:
    en_v1 = variant_training(PAPER, "madral-en-v1")
    assert en_v1.preset == "repro-ecir24" and not en_v1.model["separate_towers"]
    # The same source as MADRAL, but pre-trained with repro's settings, so not MADRAL's model.
    assert en_v1.pretrained_name == "madral-repro-ecir24" != variant_training(PAPER, "madral").pretrained_name
    assert (en_v1.loop.learning_rate, en_v1.loop.batch_size, en_v1.loop.aspect_loss_weight) == (5e-6, 64, 0.0)


@pytest.mark.parametrize("variant", ["mpbert", "madr"])
def test_variants_the_paper_pretrains_are_pretrained(variant: str) -> None:
    training = variant_training(PAPER, variant)
    assert training.pretrained_from == variant
    PretrainJob(dataset="d", output="o", variant=variant, **training.model)  # the settings build a job


def test_uhd_runs_at_the_papers_size_with_its_loss_alone() -> None:
    training = variant_training(PAPER, "uhd")
    assert dict(training.model["variant_options"]) == {
        "dimensions": 81920,
        "winners": 80,
        "weight_sparsity": 0.7,
    }
    loop = training.loop
    assert (loop.hard_negatives, loop.pointwise_loss_weight, loop.learning_rate) == (0, 0.0, 5e-6)
    assert dict(variant_training(BUDGET, "uhd").model["variant_options"])["dimensions"] == 8192


def test_dssm_starts_from_the_pretrained_bibert_and_bibert_learns_no_aspects() -> None:
    assert variant_training(PAPER, "dssm").embeddings_from == "pretrained/bibert-madral-kdd22"
    assert variant_training(PAPER, "bibert").loop.aspect_loss_weight == 0.0


def test_the_paper_pretraining_keeps_the_papers_model_settings(tmp_path) -> None:
    """One pre-training step through the experiment's own function: the model it writes has the preset's
    towers and truncation, so the variants fine-tuned from it keep them."""
    from model import load_config
    from pipelines.experiment.pretraining import PretrainingPlan, pretrained_model
    from pipelines.layout import DatasetLayout
    from product_data.synthetic import SyntheticConfig, generate_benchmark

    data = DatasetLayout(str(tmp_path / "data"))
    generate_benchmark(SyntheticConfig(num_products=300, num_queries=20), data.root)
    training = variant_training(PAPER, "madral")
    plan = PretrainingPlan(steps=1, batch_size=4)
    folder = pretrained_model(training, plan, data, tmp_path, seed=13)
    assert folder == tmp_path / "pretrained" / "madral-madral-kdd22"
    config = load_config(folder)
    assert (config.shared_towers, config.max_document_length) == (False, 128)
    assert pretrained_model(training, plan, data, tmp_path, seed=13) == folder  # kept, not redone


@pytest.mark.parametrize("variant", ["madr", "madral", "madral-en-v1", "no-fusion"])
def test_the_budget_keeps_every_layer_and_the_papers_drop_is_an_ablation(variant: str) -> None:
    # Issue 27 item 2: madral-kdd22 §7.2's drop collapses CLS on MiniLM-L6; the main table keeps all layers.
    kept = variant_training(BUDGET, variant)
    dropped = variant_training(dataclasses.replace(BUDGET, paper_layer_drop=True), variant)
    assert dict(kept.model["variant_options"])["drop_last_layer"] is False
    assert dict(dropped.model["variant_options"])["drop_last_layer"] is True
    if kept.pretrained_name:  # the ablation never fine-tunes from the other setting's pre-trained model
        assert dropped.pretrained_name == f"{kept.pretrained_name}-paper-layers"
    # The paper profile is the paper's: its presets leave the variant's default (the drop) alone.
    assert "drop_last_layer" not in dict(variant_training(PAPER, variant).model["variant_options"])


@pytest.mark.parametrize("variant", ["bibert", "mtbert", "madral-en-v2", "mural", "uhd"])
def test_variants_that_never_drop_a_layer_get_no_layer_option(variant: str) -> None:
    assert "drop_last_layer" not in dict(variant_training(BUDGET, variant).model["variant_options"])


def test_the_layer_option_reaches_the_model_config(tmp_path) -> None:
    for drop in (False, True):
        training = variant_training(dataclasses.replace(BUDGET, paper_layer_drop=drop), "madral")
        job = TrainJob(dataset=str(tmp_path), output=str(tmp_path / "m"), variant="madral", **training.model)
        assert job.encoder_settings()["drop_last_layer"] is drop


def test_en_v2_reads_the_first_tokens_in_the_studys_order_under_the_paper_profile() -> None:
    # repro-ecir24 Table 3: (category, color, brand) is its best first-k order; the budget: `aspects` order.
    paper = variant_training(PAPER, "madral-en-v2")
    assert dict(paper.model["variant_options"])["first_token_order"] == ("category", "color", "brand")
    assert "first_token_order" not in dict(variant_training(BUDGET, "madral-en-v2").model["variant_options"])
    assert "first_token_order" not in dict(variant_training(PAPER, "madral-en-v1").model["variant_options"])
    job = PretrainJob(dataset="d", output="o", variant="madral-en-v2", **paper.model)
    sizes = {"category": 3, "brand": 3, "color": 3}
    config = MadralEnV2Config(
        **{**job.encoder_settings(), "backbone": tiny_backbone(), "aspect_vocabulary_sizes": sizes}
    )
    assert config.first_token_order == ("category", "color", "brand")
    assert FirstTokens(config.aspects, config.first_token_order).positions == (
        1,
        3,
        2,
    )  # category, brand, color


@pytest.mark.parametrize("config", [BUDGET, PAPER])
def test_an_aspect_left_out_is_left_out_of_training_and_of_the_pretrained_model(
    config: ExperimentConfig,
) -> None:
    # madral-kdd22's ablation removing one aspect: no head, no label, no pre-trained model that learnt it.
    ablation = dataclasses.replace(config, aspects=("category", "brand"))
    full, without = variant_training(config, "madral"), variant_training(ablation, "madral")
    assert without.model["aspects"] == ("category", "brand")
    assert without.pretrained_name == f"{full.pretrained_name}-category-brand"
    job = TrainJob(dataset="d", output="o", variant="madral", **without.model)
    assert job.encoder_settings()["aspects"] == ("category", "brand")
    with pytest.raises(ValueError, match="aspects must be distinct names"):
        dataclasses.replace(config, aspects=("category", "material"))
    with pytest.raises(ValueError, match="aspects must be distinct names"):
        dataclasses.replace(config, aspects=())


def test_test_queries_grow_the_test_split_alone() -> None:
    # Issue 27 item 4: power for 2 points of Recall@100 needs more test queries, not more training.
    default = BUDGET.benchmark().split_sizes()
    assert default == {"train": 360, "valid": 90, "test": 150}
    grown = dataclasses.replace(BUDGET, test_queries=1500, num_products=60_000).benchmark()
    assert grown.split_sizes() == {"train": 360, "valid": 90, "test": 1500}
    assert grown.max_judged_per_query == 20 and grown.num_products == 60_000
    with pytest.raises(ValueError, match="test_queries"):
        dataclasses.replace(BUDGET, test_queries=-1)


def test_aspect_learning_on_one_side_reaches_the_loop_and_keeps_its_own_pretrained_model() -> None:
    one_side = dataclasses.replace(BUDGET, aspect_sides=("query",))
    training = variant_training(one_side, "madral")
    assert training.loop.aspect_sides == ("query",)
    assert training.pretrained_name == "madral-query-side"
    assert variant_training(BUDGET, "madral").loop.aspect_sides == ("query", "document")


def test_a_share_of_annotations_keeps_its_own_pretrained_model() -> None:
    third = dataclasses.replace(BUDGET, annotated_share=1 / 3)
    assert variant_training(third, "madral").pretrained_name == "madral-annotated-0.333333"
    with pytest.raises(ValueError, match="annotated_share"):
        dataclasses.replace(BUDGET, annotated_share=-0.1)
