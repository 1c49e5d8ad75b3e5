"""Flags a Beam command leaves to Beam are Beam's own: a typo or another command's flag stops the command
instead of being dropped (Beam logs either as unparseable and runs on), and none of madr's flags is a
Beam option."""

from __future__ import annotations

import pytest
from apache_beam.options.pipeline_options import PipelineOptions

from jobs.cli import main, parse_command
from pipelines.settings.beam_flags import beam_unknown, flag_names, refused_flags

EMBED = ["embed", "--products", "p.parquet", "--model", "m", "--output", "o"]


def _error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    return capsys.readouterr().err.strip().splitlines()[-1]


def test_a_typo_stops_the_command_naming_the_flag(capsys) -> None:
    last = _error([*EMBED, "--precison", "int8"], capsys)
    assert "--precison is not a flag of embed or of Beam" in last, last
    assert "`madr embed --help` lists its flags" in last, last


def test_another_stages_flag_stops_the_command_naming_its_owner(capsys) -> None:
    last = _error([*EMBED, "--depth", "100"], capsys)
    assert "--depth is a flag of build-index, evaluate, nightly, demo: embed never reads it" in last, last
    last = _error([*EMBED, "--epochs", "3"], capsys)  # a flag of a command that is not Beam's
    assert "--epochs is a flag of " in last and "train" in last, last


def test_beams_own_options_pass_in_either_spelling() -> None:
    flags = ["--runner", "DirectRunner", "--direct_num_workers=2", "--direct_running_mode", "in_memory"]
    assert refused_flags(flags, "embed") == []
    assert flag_names(flags) == ["runner", "direct_num_workers", "direct_running_mode"]


def test_the_nightly_passes_stage_flags_on_but_not_typos(capsys) -> None:
    assert refused_flags(["--precision", "int8"], "embed") != []
    assert refused_flags(["--precision", "int8"], "nightly", passed_on={"precision"}) == []
    nightly = ["nightly", "--products", "p", "--model", "m", "--output", "o"]
    job, _ = parse_command("nightly", [*nightly[1:], "--precision", "int8", "--aspects", "brand"])
    assert job.stages.embed.model.precision == "int8" and job.stages.evaluate is None
    last = _error([*nightly, "--precison", "int8"], capsys)
    assert "--precison is not a flag of nightly or of Beam" in last, last


def test_no_madr_flag_is_a_beam_option() -> None:
    """Beam's options are global: a madr flag registered there would parse in every command, unread."""
    from jobs.command_table import load_all

    load_all()  # every command's module imported, so every options class it could register is known
    assert beam_unknown(["--precision", "int8", "--depth", "5", "--no_verify", "--output", "o"]) == {
        "precision",
        "depth",
        "no_verify",
        "output",
    }
    assert beam_unknown(["--runner", "DirectRunner", "--project", "p"]) == set()
    assert PipelineOptions(["--runner", "DirectRunner"]).get_all_options()["runner"] == "DirectRunner"
