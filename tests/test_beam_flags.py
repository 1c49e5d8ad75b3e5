"""Flags a Beam command leaves to Beam are Beam's own: a typo or another stage's flag stops the command
instead of being dropped (Beam logs a typo as unparseable and parses another stage's flag unread)."""

from __future__ import annotations

import pytest

from jobs.cli import main
from pipelines.beam_flags import flag_names, madr_option_flags, refused_flags

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
    assert "--depth is another stage's flag (DepthOptions): embed never reads it" in last, last


def test_beams_own_options_pass_in_either_spelling() -> None:
    flags = ["--runner", "DirectRunner", "--direct_num_workers=2", "--direct_running_mode", "in_memory"]
    assert refused_flags(flags, "embed") == []
    assert flag_names(flags) == ["runner", "direct_num_workers", "direct_running_mode"]


def test_the_nightly_passes_stage_flags_on_but_not_typos() -> None:
    assert refused_flags(["--precision", "int8"], "embed") != []
    assert refused_flags(["--precision", "int8"], "nightly", stage_flags_allowed=True) == []
    assert refused_flags(["--precison", "int8"], "nightly", stage_flags_allowed=True) == [
        "--precison is not a flag of nightly or of Beam"
    ]


def test_madr_flags_are_those_of_madrs_own_option_classes() -> None:
    declared = madr_option_flags()
    assert declared["depth"] == "DepthOptions" and declared["precision"] == "ModelOptions"
    assert "runner" not in declared and "project" not in declared  # Beam's
