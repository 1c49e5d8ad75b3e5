"""`madr --help` comes from one command table (issue 11): each command once, with its one-line purpose."""

from __future__ import annotations

import argparse
import re

import pytest

from jobs import cli
from jobs.commands import BEAM_COMMANDS, COMMANDS
from model import VARIANTS
from pipelines.train.presets import PAPER, PRESETS


def _help(argv: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("COLUMNS", "80")  # argparse wraps to the terminal; fix the width
    with pytest.raises(SystemExit) as exited:
        cli.main([*argv, "--help"])
    assert exited.value.code == 0
    return capsys.readouterr().out


def test_top_level_help_lists_each_command_once_with_its_purpose(capsys, monkeypatch) -> None:
    out = _help([], capsys, monkeypatch)
    # argparse indents the subcommand lines by four spaces; options by two, wrapped lines by more.
    listed = re.findall(r"^ {4}(\S+)", out, flags=re.MULTILINE)
    assert sorted(listed) == sorted(COMMANDS), out
    assert len(listed) == len(set(listed)), out
    for name, command in COMMANDS.items():
        (line,) = (line for line in out.splitlines() if line.startswith(f"    {name} "))
        assert line.split(None, 1)[1] == command.purpose, f"{name}: purpose not on its line:\n{out}"


def test_every_subparser_runs_its_table_entry() -> None:
    actions = cli._parser()._actions
    subparsers = next(a for a in actions if isinstance(a, argparse._SubParsersAction))
    assert list(subparsers.choices) == list(COMMANDS)
    for name, parser in subparsers.choices.items():
        assert parser.get_default("run") is COMMANDS[name].run


def test_the_beam_commands_are_unchanged() -> None:
    assert set(BEAM_COMMANDS) == {"embed", "evaluate", "enrich", "export-vertex", "build-index", "nightly"}


@pytest.mark.parametrize("command", ["train", "pretrain", "demo"])
def test_variant_help_lists_its_choices(command: str, capsys, monkeypatch) -> None:
    out = _help([command], capsys, monkeypatch)
    assert f"--variant {{{','.join(sorted(VARIANTS))}}}" in out


@pytest.mark.parametrize("command", ["train", "pretrain"])
def test_preset_help_lists_its_choices(command: str, capsys, monkeypatch) -> None:
    out = _help([command], capsys, monkeypatch)
    assert f"--preset {{{','.join([PAPER, *sorted(PRESETS)])}}}" in out


def test_an_unknown_variant_is_a_one_line_error(capsys) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main(["train", "--data", "d", "--out", "o", "--variant", "nosuch"])
    assert exited.value.code == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith("madr train: error: argument --variant: invalid choice: 'nosuch'"), last
