"""`--preset` fills what a paper fixes; any flag given explicitly wins (issue 10)."""

from __future__ import annotations

import pytest

from jobs.cli import parser_for
from model.registry import VARIANTS, ZERO_SHOT, experiment_role
from model.training import TrainingConfig
from pipelines.train.encoder_job import EncoderJob, parse_variant_options
from pipelines.train.finetune import add_train_arguments
from pipelines.train.presets import PRESETS, apply_preset, explicit_flags
from pipelines.train.pretrain import add_pretrain_arguments


def _train_args(*flags: str):
    argv = ["train", "--data", "d", "--out", "o", *flags]
    args = parser_for(argv).parse_args(argv)
    return apply_preset(args, "train", explicit_flags(add_train_arguments, argv[1:]))


def test_repro_preset_sets_the_papers_fine_tuning_and_an_explicit_flag_wins() -> None:
    args = _train_args("--preset", "repro-ecir24", "--learning_rate", "1e-5")
    assert args.learning_rate == 1e-5  # explicit
    assert (args.batch_size, args.epochs, args.aspect_loss_weight, args.pointwise_loss_weight) == (
        64,
        20,
        0.0,
        0.0,
    )
    assert (args.separate_towers, args.max_document_length, args.hard_negatives) == (False, 156, 1)


def test_an_explicit_value_equal_to_the_default_still_beats_the_preset() -> None:
    args = _train_args("--preset", "repro-ecir24", "--batch_size", "32")
    assert args.batch_size == 32  # 32 is also the default, but it was given


@pytest.mark.parametrize("preset", ["madral-kdd22", "paper"])
def test_a_variant_without_aspects_gets_no_aspect_loss_from_its_papers_preset(preset: str) -> None:
    # madral-kdd22 sets λf = 0.1 for its aspect variants; the trainer refuses one for BiBERT.
    assert _train_args("--preset", preset, "--variant", "bibert").aspect_loss_weight == 0.0
    assert _train_args("--preset", preset, "--variant", "madral").aspect_loss_weight == 0.1


def test_without_a_preset_nothing_changes() -> None:
    argv = ["train", "--data", "d", "--out", "o"]
    assert vars(_train_args()) == vars(parser_for(argv).parse_args(argv))


def test_uhd_preset_variant_options_come_before_the_users() -> None:
    args = _train_args("--preset", "uhd", "--variant", "uhd", "--variant_option", "dimensions=1024")
    options = dict(parse_variant_options(args.variant_option))
    assert options == {"dimensions": 1024, "winners": 80, "weight_sparsity": 0.7}
    assert (args.hard_negatives, args.pointwise_loss_weight) == (0, 0.0)


def test_pretrain_reads_its_own_part_of_the_preset() -> None:
    argv = ["pretrain", "--data", "d", "--out", "o", "--preset", "repro-ecir24"]
    args = parser_for(argv).parse_args(argv)
    apply_preset(args, "pretrain", explicit_flags(add_pretrain_arguments, argv[1:]))
    assert (args.aspect_weight, args.learning_rate, args.epochs) == (0.1, 1e-4, 20)
    assert not hasattr(args, "aspect_loss_weight")


@pytest.mark.parametrize("command", ["train", "pretrain"])
def test_help_lists_every_preset_and_what_it_sets(command: str, capsys) -> None:
    with pytest.raises(SystemExit):
        parser_for([command]).parse_args([command, "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for name in PRESETS:
        assert name in text
    assert "aspect_weight=0.1" in text and "separate_towers=True" in text


def test_every_preset_key_is_a_flag_field_of_the_command_it_sets() -> None:
    """Presets are keyed by config field names: a misspelt key would be skipped without a word."""
    from model.training.pretrain import PretrainingConfig
    from pipelines.stage_config import flag_fields
    from pipelines.train.finetune import TrainJob
    from pipelines.train.pretrain import PretrainJob

    def names(*classes: type) -> set[str]:
        return {f.name for cls in classes for f in flag_fields(cls)}

    for preset in PRESETS.values():
        assert set(preset.model) <= names(EncoderJob), preset.name
        assert set(preset.train) <= names(TrainJob, TrainingConfig), preset.name
        assert set(preset.pretrain) <= names(PretrainJob, PretrainingConfig), preset.name


def test_every_variants_paper_preset_exists() -> None:
    roles = {variant: experiment_role(variant) for variant in VARIANTS}
    assert {role.paper_preset for role in roles.values()} - {None} <= set(PRESETS)
    assert roles[ZERO_SHOT].paper_preset is None  # used as it is: nothing to train


@pytest.mark.parametrize(
    ("variant", "towers_separate", "document_length"),
    [("madral", True, 128), ("mural", False, 156), ("madral-en-v2", False, 156), ("uhd", False, 180)],
)
def test_preset_paper_applies_the_variants_own_paper(
    variant: str, towers_separate: bool, document_length: int
) -> None:
    args = _train_args("--preset", "paper", "--variant", variant)
    assert (args.separate_towers, args.max_document_length) == (towers_separate, document_length)
    expected = PRESETS[experiment_role(variant).paper_preset]
    assert args.learning_rate == expected.train.get("learning_rate", TrainingConfig().learning_rate)
