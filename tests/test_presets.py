"""`--preset` fills what a paper fixes; any flag given explicitly wins (issue 10)."""

from __future__ import annotations

import pytest

from jobs.cli import parser_for
from jobs.command_table import CommandLine, load_command
from model.registry import VARIANTS, ZERO_SHOT, experiment_role
from model.training import TrainingConfig
from pipelines.train.encoder_job import EncoderJob
from pipelines.train.finetune import TrainJob, TrainRun
from pipelines.train.presets import PRESETS
from pipelines.train.pretrain import PretrainRun


@pytest.fixture(autouse=True)
def _dataset_folder(tmp_path, monkeypatch) -> None:
    """`--data d`: building the config checks that d is a dataset folder (it has products)."""
    (tmp_path / "d" / "products").mkdir(parents=True)
    (tmp_path / "d" / "products" / "products-00000-of-00001.parquet").write_bytes(b"")
    monkeypatch.chdir(tmp_path)


def _config(argv: list[str]):
    """The config `madr ARGV` runs with, built as the CLI builds it."""
    args = parser_for(argv).parse_args(argv)
    return load_command(argv[0]).config(CommandLine(args, (), tuple(argv[1:])))


class _Flat:
    """A train run's job and loop fields read as one set of flags, as a user wrote them."""

    def __init__(self, run: TrainRun | PretrainRun) -> None:
        self.run = run

    def __getattr__(self, name: str):
        for part in (self.run.job, self.run.loop):
            if hasattr(part, name):
                return getattr(part, name)
        raise AttributeError(name)


def _train_args(*flags: str) -> _Flat:
    return _Flat(_config(["train", "--data", "d", "--out", "o", *flags]))


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
    run = _train_args().run
    assert (run.job, run.loop) == (TrainJob(dataset="d", output="o"), TrainingConfig())


def test_uhd_preset_variant_options_come_before_the_users() -> None:
    args = _train_args("--preset", "uhd", "--variant", "uhd", "--variant_option", "dimensions=1024")
    # The preset's first, so that the user's dimensions=1024 is the one the config reads.
    assert args.variant_options == (
        ("dimensions", 81920),
        ("winners", 80),
        ("weight_sparsity", 0.7),
        ("dimensions", 1024),
    )
    assert dict(args.variant_options) == {"dimensions": 1024, "winners": 80, "weight_sparsity": 0.7}
    assert (args.hard_negatives, args.pointwise_loss_weight) == (0, 0.0)


def test_pretrain_reads_its_own_part_of_the_preset() -> None:
    run = _config(["pretrain", "--data", "d", "--out", "o", "--preset", "repro-ecir24"])
    assert isinstance(run, PretrainRun)
    assert (run.loop.aspect_weight, run.loop.learning_rate, run.loop.epochs) == (0.1, 1e-4, 20)
    assert (run.job.separate_towers, run.job.max_document_length) == (False, 156)
    assert not hasattr(run.loop, "aspect_loss_weight")


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
    from pipelines.settings.stage_config import flag_fields
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
