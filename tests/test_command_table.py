"""`madr --help` comes from one command table (issue 11): each command once, with its one-line purpose;
`madr --help` imports no command and `madr NAME` only NAME's module (issue 49: start-up)."""

from __future__ import annotations

import argparse
import re
import subprocess
import sys

import pytest

from jobs import cli, command_table
from jobs.command_table import BEAM_COMMANDS, INDEX, load_all, load_command
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
    commands = load_all()
    assert listed == list(commands), out
    assert len(listed) == len(set(listed)), out
    for name, command in commands.items():
        (line,) = (line for line in out.splitlines() if line.startswith(f"    {name} "))
        assert line.split(None, 1)[1] == command.purpose, f"{name}: purpose not on its line:\n{out}"


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices


def test_every_subparser_runs_its_table_entry() -> None:
    assert list(_subparsers(cli._parser())) == [entry.name for entry in INDEX]
    for entry in INDEX:
        chosen = load_command(entry.name)
        assert chosen.run.__module__ == f"jobs.commands.{entry.module}"
        assert (chosen.purpose, chosen.beam) == (entry.purpose, entry.beam)
        assert _subparsers(cli._parser(chosen))[entry.name].get_default("run") is chosen.run


def test_help_imports_no_command_and_a_command_only_its_module() -> None:
    probe = (
        "import sys\n"
        "from jobs import cli\n"
        "try:\n"
        "    cli.main(sys.argv[1:])\n"
        "except SystemExit:\n"
        "    pass\n"
        "watched = ('torch', 'transformers')\n"
        "print(sorted(m for m in sys.modules if m.startswith('jobs.commands.') or m in watched))\n"
    )

    def imported(*argv: str) -> str:
        done = subprocess.run(
            [sys.executable, "-c", probe, *argv], capture_output=True, text=True, check=True
        )
        return done.stdout.strip().splitlines()[-1]

    assert imported("--help") == "[]"
    # generate reads no model: its module alone, without torch.
    assert imported("generate", "--help") == "['jobs.commands.data']"


def test_a_command_outside_the_index_or_its_module_is_refused() -> None:
    def run(args: argparse.Namespace, beam_args: list[str], stage_argv: list[str]) -> None:
        """A run."""

    with pytest.raises(ValueError, match="is not in INDEX"):
        command_table.command("no-such-command", lambda parser: None)(run)
    with pytest.raises(ValueError, match=r"belongs in jobs\.commands\.data"):
        command_table.command("generate", lambda parser: None)(run)  # registered from this test module


def test_a_config_that_is_not_a_frozen_dataclass_is_refused(monkeypatch) -> None:
    """A command's settings are a frozen dataclass whose fields are its flags: a mutable config is refused
    when the command registers, not found out when a driver changes it under a running stage."""
    import dataclasses

    @dataclasses.dataclass
    class Mutable:
        output: str = ""

    def run(config: Mutable, beam_options: object) -> None:
        """A run."""

    run.__module__ = "jobs.commands.data"
    monkeypatch.setattr(command_table, "COMMANDS", {})  # as if `generate` were not registered yet
    with pytest.raises(TypeError, match="not a frozen dataclass"):
        command_table.command("generate", Mutable)(run)
    frozen = dataclasses.dataclass(frozen=True)(type("Frozen", (), {"__annotations__": {}}))
    command_table.command("generate", frozen)(run)
    assert command_table.COMMANDS["generate"].config_class is frozen


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


def test_nightly_help_says_where_stage_flags_go(capsys, monkeypatch) -> None:
    # The nightly accepts any stage's flag at its top level (issue 48): its help must say so.
    out = " ".join(_help(["nightly"], capsys, monkeypatch).split())
    assert "given here applies to every stage that reads it" in out, out
    assert "a flag neither a stage nor Beam knows is an error" in out, out


def _accepted(parser: argparse.ArgumentParser) -> set[str]:
    return {option for action in parser._actions for option in action.option_strings if option != "-h"}


def _undocumented(flags: set[str], help_text: str) -> set[str]:
    """The flags of `flags` that `help_text` (a --help output) never names."""
    named = set(re.findall(r"--[A-Za-z0-9_]+", help_text))
    return {flag for flag in flags if flag.startswith("--") and flag not in named}


@pytest.mark.parametrize("name", [entry.name for entry in INDEX])
def test_every_flag_a_command_accepts_is_in_its_help(name: str, capsys, monkeypatch) -> None:
    """Issue 48: `madr nightly --help` named neither --zero_shot nor --restricts, which it passes on."""
    parser = _subparsers(cli._parser(load_command(name)))[name]
    parsers = {name: parser}
    for source, sub in next(
        (a.choices for a in parser._actions if isinstance(a, argparse._SubParsersAction)), {}
    ).items():
        parsers[f"{name} {source}"] = sub  # madr ingest SOURCE
    for argv, each in parsers.items():
        accepted = _accepted(each)
        if name == "nightly":
            from pipelines.nightly.job import passed_on_flags

            accepted |= {flag for flags in passed_on_flags().values() for flag in flags}
        assert not _undocumented(accepted, _help(argv.split(), capsys, monkeypatch)), argv


def test_the_help_check_sees_a_flag_the_help_leaves_out() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--shown", help="listed")
    parser.add_argument("--hidden", help=argparse.SUPPRESS)
    assert _undocumented(_accepted(parser), parser.format_help()) == {"--hidden"}
