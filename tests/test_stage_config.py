"""Flags generated from a stage's settings dataclass, and the dataclass built back from them."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

import pytest

from jobs.cli import parse_command
from jobs.experiment import PROFILES, ExperimentConfig
from model.training import TrainingConfig
from pipelines.settings.options import EmbedSettings, EvaluateSettings, IndexSettings, ModelSettings
from pipelines.settings.stage_config import (
    add_config_arguments,
    config_from_values,
    nested,
    setting,
    subcommands,
)
from pipelines.train.finetune import TrainJob, TrainRun


@dataclass(frozen=True)
class Settings:
    source: str = setting("", "Where to read", required=True)
    size: int = setting(4, "How many")
    rate: float | None = setting(None, "How fast")
    mode: str = setting("fast", "Which way", choices=("fast", "slow"))
    compare: str | None = setting(None, "Also compare", choices=("true", "false"), bare="true")
    dry_run: bool = setting(False, "Do nothing")
    internal: int = 7  # not a flag

    def __post_init__(self) -> None:
        if self.size < 1:
            raise ValueError("--size must be >= 1")


def parse(*argv: str) -> Settings:
    parser = argparse.ArgumentParser()
    add_config_arguments(parser, Settings)
    return config_from_values(Settings, parser.parse_args(list(argv)))


def test_flags_carry_the_fields_types_defaults_choices_and_help() -> None:
    assert parse("--source", "a") == Settings(source="a")
    given = parse("--source", "a", "--size", "9", "--rate", "0.5", "--mode", "slow", "--compare", "--dry_run")
    assert given == Settings("a", 9, 0.5, "slow", "true", True)
    parser = argparse.ArgumentParser()
    add_config_arguments(parser, Settings)
    text = parser.format_help()
    assert "(required) Where to read" in text and "--internal" not in text
    with pytest.raises(SystemExit):
        parser.parse_args(["--mode", "sideways"])


def test_missing_required_flags_are_named_and_the_dataclass_validates() -> None:
    with pytest.raises(ValueError, match=r"missing required flag\(s\): --source"):
        parse("--size", "3")
    with pytest.raises(ValueError, match="--size must be >= 1"):
        parse("--source", "a", "--size", "0")


def test_a_flag_of_an_unsupported_type_is_refused() -> None:
    @dataclass(frozen=True)
    class Bad:
        names: list = setting(None, "A list")  # noqa: RUF009 - the point of the test

    with pytest.raises(TypeError, match="a flag must be str, int, float, bool"):
        add_config_arguments(argparse.ArgumentParser(), Bad)


def test_a_stage_config_is_built_whole_from_its_flags_and_beam_gets_only_the_rest() -> None:
    embed, beam = parse_command(
        "embed", ["--model", "m", "--products", "p", "--out", "o", "--runner", "Direct"]
    )
    assert (embed.model, embed.embed, embed.output) == (
        ModelSettings(model="m"),
        EmbedSettings(products="p"),
        "o",
    )
    assert embed.verify and not embed.overwrite and beam.get_all_options()["runner"] == "Direct"
    typed = ["--embeddings", "e", "--output", "o", "--num_leaves", "64", "--no_verify", "--overwrite"]
    index, beam = parse_command("build-index", typed)
    assert index.index == IndexSettings(num_leaves=64)
    assert index.index.scann_settings() == {"num_leaves": 64}
    assert (index.verify, index.overwrite, beam.get_all_options()["runner"]) == (False, True, None)


def test_one_flag_sets_every_nested_field_of_its_name_and_an_old_name_still_parses() -> None:
    """--depth is the evaluation's and the index's: in a config holding both, declared once, set in both."""

    @dataclass(frozen=True, kw_only=True)
    class Both:
        index: IndexSettings = nested(IndexSettings)
        evaluate: EvaluateSettings = nested()

    parser = argparse.ArgumentParser()
    add_config_arguments(parser, Both)
    both = config_from_values(
        Both, parser.parse_args(["--depth", "50", "--queries", "q", "--judgments", "j"])
    )
    assert both.index.depth == both.evaluate.depth == 50
    with pytest.warns(FutureWarning, match="--max_k is deprecated: it is now --depth"):
        old = config_from_values(
            Both, parser.parse_args(["--max_k", "7", "--queries", "q", "--judgments", "j"])
        )
    assert old.index.depth == old.evaluate.depth == 7
    with pytest.raises(ValueError, match=r"missing required flag\(s\): --queries, --judgments"):
        config_from_values(Both, parser.parse_args([]))


def test_madr_experiment_flags_come_from_its_config_and_a_profile_yields_to_explicit_flags() -> None:
    argv = ["--profile", "full", "--epochs", "3", "--variants", "bibert, mtbert"]
    config = parse_command("experiment", argv)[0].experiment
    assert config.variants == ("bibert", "mtbert") and config.epochs == 3  # given: kept
    assert (config.pretrain_steps, config.patience) == (PROFILES["full"]["pretrain_steps"], 2)  # the profile
    assert parse_command("experiment", [])[0].experiment == ExperimentConfig()


def test_madr_train_flags_are_the_training_configs_fields(tmp_path) -> None:
    _dataset(tmp_path)
    argv = ["--data", str(tmp_path), "--output", "m"]
    loop = _train_run([*argv, "--epochs", "3", "--gradient_accumulation", "2", "--validate_every", "5"]).loop
    assert loop == TrainingConfig(epochs=3, gradient_accumulation=2, validate_every=5)
    assert _train_run(argv).loop == TrainingConfig()


def _dataset(folder) -> None:
    """`folder` as a dataset folder: building a train config checks that it has products."""
    (folder / "products").mkdir()
    (folder / "products" / "products-00000.parquet").write_bytes(b"")


def _train_run(argv: list[str]) -> TrainRun:
    return parse_command("train", argv)[0]


@dataclass(frozen=True)
class Renamed:
    dataset: str = setting("", "Dataset folder", required=True, flag="data")


def test_a_field_named_otherwise_keeps_its_flag_and_a_missing_one_is_named_by_its_flag() -> None:
    parser = argparse.ArgumentParser()
    add_config_arguments(parser, Renamed)
    assert config_from_values(Renamed, parser.parse_args(["--data", "d"])) == Renamed(dataset="d")
    with pytest.raises(ValueError, match="--data"):
        config_from_values(Renamed, parser.parse_args([]))


def test_every_encoder_flag_of_madr_train_reaches_the_job(tmp_path) -> None:
    """Each flag set away from its default arrives in `TrainJob` (the flags are its fields)."""
    _dataset(tmp_path)
    argv = [
        *("--data", str(tmp_path), "--output", "m", "--variant", "madral", "--backbone", "b"),
        *("--model_version", "7", "--projection_dim", "64", "--separate_towers", "--aspects", "brand,color"),
        *("--max_query_length", "16", "--max_document_length", "48", "--min_aspect_count", "3"),
        *("--variant_option", "fusion=cls_gating", "--random_aspect_init", "--max_train_queries", "9"),
        *("--init_from", "p", "--no_verify", "--overwrite"),
    ]
    job = _train_run(argv).job
    assert job == TrainJob(
        dataset=str(tmp_path),
        output="m",
        variant="madral",
        backbone="b",
        model_version="7",
        projection_dim=64,
        separate_towers=True,
        aspects=("brand", "color"),
        max_query_length=16,
        max_document_length=48,
        min_aspect_count=3,
        variant_options=(("fusion", "cls_gating"),),
        random_aspect_init=True,
        overwrite=True,
        max_train_queries=9,
        init_from="p",
        verify=False,
    )
    settings = job.encoder_settings()
    assert (settings["shared_towers"], settings["aspects"]) == (False, ("brand", "color"))
    assert settings["fusion"] == "cls_gating"
    assert not job.initialise_aspects


def test_a_dataset_folder_without_products_is_named_by_its_flag(tmp_path) -> None:
    with pytest.raises(FileNotFoundError, match=f"--data {tmp_path} is not a dataset folder"):
        _train_run(["--data", str(tmp_path), "--output", "m"])


def test_madr_adapt_has_the_recipes_loop_defaults_and_only_its_own_job_flags(tmp_path) -> None:
    """`nested(only=, **defaults)`: adapt's flags are some of `AdaptJob`'s, its loop the shipped recipe's."""
    from jobs.adapt import AdaptRun
    from pipelines.train.shipped_recipe import ADAPT_TRAINING_DEFAULTS

    _dataset(tmp_path)
    argv = ["--data", str(tmp_path), "--output", "m", "--held_out_fraction", "0.2", "--learning_rate", "1e-5"]
    run: AdaptRun = parse_command("adapt", argv)[0]
    assert run.job.held_out.fraction == 0.2 and run.loop.learning_rate == 1e-5
    assert run.loop.epochs == ADAPT_TRAINING_DEFAULTS["epochs"]
    recipe_alpha = ADAPT_TRAINING_DEFAULTS["wise_ft_alpha"]
    assert run.loop.wise_ft_alpha == recipe_alpha != TrainingConfig().wise_ft_alpha
    assert parse_command("adapt", argv[:4])[0].job.held_out.fraction == 0.05  # AdaptJob's own default
    with pytest.raises(SystemExit):  # the shipped recipe's variant: no flag of adapt
        parse_command("adapt", [*argv, "--variant", "bibert"])


def test_an_invalid_aspect_name_is_refused_when_the_job_is_built() -> None:
    with pytest.raises(ValueError, match="snake_case"):
        TrainJob(dataset="d", output="m", aspects=("Brand",))


def test_a_repeated_flag_takes_one_value_per_flag_and_must_be_a_tuple() -> None:
    """`madr search --query 'socks, wool' --query mug`: two queries, commas kept (not a comma list)."""

    @dataclass(frozen=True)
    class Repeated:
        query: tuple[str, ...] = setting((), "Query text (repeatable)", repeated=True, metavar="TEXT")

    parser = argparse.ArgumentParser()
    add_config_arguments(parser, Repeated)
    given = config_from_values(Repeated, parser.parse_args(["--query", "socks, wool", "--query", "mug"]))
    assert (
        given.query == ("socks, wool", "mug")
        and config_from_values(Repeated, parser.parse_args([])).query == ()
    )
    assert "--query TEXT" in parser.format_help()

    @dataclass(frozen=True)
    class Wrong:
        query: str = setting("", "Query text", repeated=True)

    with pytest.raises(TypeError, match="a repeated flag is a tuple"):
        add_config_arguments(argparse.ArgumentParser(), Wrong)


@dataclass(frozen=True)
class Apples:
    """Apples."""

    kind: str = setting("", "Which apples", required=True)


@dataclass(frozen=True)
class Pears:
    """Pears."""

    ripe: bool = setting(False, "Only ripe ones")


@dataclass(frozen=True)
class Basket:
    fruit: Apples | Pears = subcommands({"apples": Apples, "pears": Pears}, metavar="FRUIT")
    size: int = setting(3, "How many")


def test_a_subcommand_field_is_the_chosen_class_built_from_its_flags_and_the_configs_own() -> None:
    """`madr ingest esci --products p --output o`: the word picks the class, the config's flags follow it."""
    parser = argparse.ArgumentParser()
    add_config_arguments(parser, Basket, enforce_required=True)
    assert config_from_values(
        Basket, parser.parse_args(["apples", "--kind", "gala", "--size", "5"])
    ) == Basket(Apples("gala"), 5)
    assert config_from_values(Basket, parser.parse_args(["pears", "--ripe"])) == Basket(Pears(True))
    for wrong in (["apples"], ["pears", "--kind", "gala"], []):  # required, another's flag, no choice
        with pytest.raises(SystemExit):
            parser.parse_args(wrong)
