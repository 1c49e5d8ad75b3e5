"""Every `madr` command, called wrongly, ends with one line naming the problem, exit code 2, no traceback.

A case per way a user goes wrong (a missing flag, a path that is not there, a bad value, a damaged
artifact, too many bad records, a refused publish), at least one per subcommand of the parser: a new
subcommand without a case fails `test_every_subcommand_has_a_bad_input_case`. With --debug the
traceback is shown; a bug (any other exception) keeps its traceback and says how to report it.
"""

from __future__ import annotations

import argparse
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from apache_beam.options.pipeline_options import PipelineOptions

from jobs import cli
from jobs.cli import main
from jobs.command_table import BEAM_COMMANDS, load_command
from jobs.commands import reports as commands
from pipelines.nightly.publish_guard import PublishRefused
from schemas import ArtifactError
from tests.test_embed_pipeline import catalog, write_catalog

NOWHERE = "/nonexistent/madr"

# (command line, words the last line of stderr must hold); {tmp} and {model} are filled in per test.
N = NOWHERE
CASES: dict[str, list[tuple[str, str]]] = {
    "generate": [
        ("generate", "the following arguments are required: --output"),
        ("generate --out {tmp}/g --num_products 0", "num_products must be >= 1"),
        ("generate --out {tmp}/g --seed many", "invalid int value: 'many'"),
    ],
    "ingest": [
        (f"ingest esci --products {N} --examples {N} --locale fr --out {{tmp}}/i", "locale must be one of"),
        (f"ingest generic --products {N}/p.jsonl --out {{tmp}}/i", f"{N}/p.jsonl"),
        ("ingest wands", "required"),
        (f"ingest folder {N} --out {{tmp}}/i", "has no products file"),
    ],
    "adapt": [
        (f"adapt --data {N} --out {{tmp}}/a", "is not a dataset folder"),
        ("adapt --out {tmp}/a", "the following arguments are required: --data"),
        (f"adapt --data {N} --out {{tmp}}/a --wise_ft_alpha 2", "wise_ft_alpha must be in [0, 1]"),
    ],
    "pretrain": [(f"pretrain --data {N} --out {{tmp}}/p", "is not a dataset folder")],
    "train": [
        (f"train --data {N} --out {{tmp}}/t --variant bibert", "is not a dataset folder"),
        (f"train --data {N} --out {{tmp}}/t --epochs x", "invalid int value"),
    ],
    "embed": [
        ("embed --model {model}", "arguments are required: --output/--out, --products"),
        (f"embed --products '{N}/*.parquet' --model {{model}} --output {{tmp}}/e", "no files match"),
        (
            f"embed --products '{N}/*.parquet' --model {{model}} --output {{tmp}}/e --device gpu",
            "--device must be cpu, cuda, cuda:N, mps or auto, got 'gpu'",
        ),
    ],
    "build-index": [
        (f"build-index --embeddings {N} --out {{tmp}}/x", "has no manifest.json"),
        ("build-index --out {tmp}/x", "required: --embeddings"),
    ],
    "build-sparse-index": [
        (f"build-sparse-index --model {N} --products {N} --out {{tmp}}/s", "not a madr-model artifact"),
    ],
    "evaluate": [
        (
            f"evaluate --queries {N} --judgments {N} --model {{model}} --index {N} --output {{tmp}}/v",
            f"--queries {N} matches no Parquet file",
        ),
    ],
    "enrich": [(f"enrich --products {N} --embeddings {N} --output {{tmp}}/n", "has no manifest.json")],
    "export-vertex": [
        (f"export-vertex --products {N}", "arguments are required: --output/--out, --embeddings")
    ],
    "experiment": [("experiment --out {tmp}/x --variants nosuch", "must be one of the variants")],
    "explain": [
        (f"explain --model {N} --query juicer --product Juicer", "not a madr-model artifact"),
        ("explain --model {model} --query '' --product Juicer", "missing required flag(s): --query"),
        ("explain --model {model} --query juicer", "give one of --product and --product_id"),
        ("explain --model {model} --query juicer --product \u200b", "'title' has no visible character"),
    ],
    "neighbours": [
        ("neighbours --model {model} --aspect category --value x", "has no aspect value tables"),
        ("neighbours --model {model} --aspect category --value x --top many", "invalid int value"),
    ],
    "nightly": [
        (f"nightly --catalog '{N}/*.parquet' --model {{model}} --out {{tmp}}/n", "matches no Parquet file")
    ],
    "extend-vocabulary": [
        ("extend-vocabulary --model {model} --output {tmp}/x", "give --products"),
        ("extend-vocabulary --model {model} --values {tmp}/v.json --output {tmp}/x", "No such file"),
    ],
    "compare": [(f"compare {N} {N}", "holds per_query.parquet"), ("compare", "required")],
    "search": [
        (f"search --index {N} --model {{model}} --query shoes", f"--index {N} has no manifest.json"),
        ("search --index {tmp} --model {model}", "nothing to search: give --query TEXT or --queries FILE"),
        ("search --index {tmp} --model {model} --query x --k 0", "--k must be >= 1"),
        ("search --index {tmp} --model {model} --query x --filter brand", "--filter takes ASPECT=VALUE"),
    ],
    "export-serving": [
        (
            f"export-serving --index {N} --model {{model}} --output {{tmp}}/b",
            f"--index {N} has no manifest.json",
        ),
        ("export-serving --index {tmp} --model {model}", "--output"),
        ("export-serving --index {tmp} --model {model} --output {model}", "already holds files"),
    ],
    "serve": [
        (f"serve --bundle {N}", "not a madr-serving-bundle artifact"),
        ("serve --bundle {tmp} --port 70000", "--port must be in [0, 65535]"),
    ],
    "demo": [("demo --out {tmp}/d --num_products 0", "num_products must be >= 1")],
    "report": [
        (f"report --root {N}", "holds no nightly run"),
        ("report", "--root"),
    ],
}


def subcommands() -> list[str]:
    actions = cli._parser()._actions
    return sorted(next(a for a in actions if isinstance(a, argparse._SubParsersAction)).choices)


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """main()'s exit code, as the console script would exit with it, and its stderr."""
    try:
        code = main(argv)
    except SystemExit as exited:  # argparse's own errors
        code = exited.code if isinstance(exited.code, int) else 1
    return code, capsys.readouterr().err


def known_flags(command: str) -> set[str]:
    """The flags `madr <command>` accepts: its parser's, and for a Beam command Beam's own (a runner's;
    the nightly passes every stage's flags on, so any of those)."""
    actions = cli._parser(load_command(command))._actions
    parser = next(a for a in actions if isinstance(a, argparse._SubParsersAction)).choices[command]
    beam = argparse.ArgumentParser(add_help=False)
    if command in BEAM_COMMANDS:
        for options in _subclasses(PipelineOptions):
            if command == "nightly" or options.__module__.startswith("apache_beam"):
                options._add_argparse_args(beam)
    return _option_strings(parser) | set(beam._option_string_actions)


def _option_strings(parser: argparse.ArgumentParser) -> set[str]:
    """A parser's flags, with those of its subcommands' (`madr ingest wands`)."""
    found = set(parser._option_string_actions)
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                found |= _option_strings(sub)
    return found


def _subclasses(cls: type) -> list[type]:
    return [sub for direct in cls.__subclasses__() for sub in (direct, *_subclasses(direct))]


def assert_one_line_error(code: int, err: str, command: str, words: str) -> None:
    assert code == 2, err
    assert "Traceback" not in err, err
    last = err.strip().splitlines()[-1]
    assert last.startswith(f"madr {command}") and ": error: " in last, last
    assert words in last, last
    # Every flag the line names (the way out it advises, or the one that was wrong) is one the command has.
    # (A command quoted in backticks, `madr evaluate --output`, is another command's.)
    named = set(re.findall(r"(?<![\w-])--[a-z][a-z0-9_]*", re.sub(r"`madr [^`]*`", "", last)))
    assert named <= known_flags(command), (
        f"{last}: names flags madr {command} lacks: {named - known_flags(command)}"
    )


def test_every_subcommand_has_a_bad_input_case() -> None:
    assert sorted(CASES) == subcommands()


@pytest.mark.parametrize(
    ("command", "line", "words"),
    [
        pytest.param(command, line, words, id=f"{command}-{n}")
        for command, cases in CASES.items()
        for n, (line, words) in enumerate(cases)
    ],
)
def test_bad_input_ends_in_one_line_and_exit_code_2(
    command: str,
    line: str,
    words: str,
    tmp_path: Path,
    tiny_model_dir: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = shlex.split(line.format(tmp=tmp_path, model=tiny_model_dir))
    assert_one_line_error(*run(argv, capsys), command, words)


def test_a_bad_log_level_is_an_argparse_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, err = run(["--log_level", "loud", "generate", "--out", "x"], capsys)
    assert code == 2 and "argument --log_level: invalid choice: 'LOUD'" in err and "Traceback" not in err


# The errors that only a real artifact or pipeline raises.


def test_too_many_dead_letters(tmp_path: Path, tiny_model_dir: Path, capsys) -> None:
    rows = [*catalog(2), *({**catalog(1)[0], "product_id": f"bad{i}", "title": "\x00"} for i in range(2))]
    products = write_catalog(tmp_path / "products.parquet", rows)
    argv = ["embed", "--products", products, "--model", str(tiny_model_dir), "--output", str(tmp_path / "e")]
    code, err = run([*argv, "--max_dead_letter_fraction", "0.1"], capsys)
    assert_one_line_error(code, err, "embed", "2 of 4 products are dead letters")
    assert "--max_dead_letter_fraction" in err.splitlines()[-1]


def test_a_damaged_model_is_refused(tmp_path: Path, tiny_model_dir: Path, capsys) -> None:
    model = tmp_path / "model"
    shutil.copytree(tiny_model_dir, model)
    weights = model / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0xFF
    weights.write_bytes(bytes(data))
    products = write_catalog(tmp_path / "products.parquet", catalog(2))
    code, err = run(
        ["embed", "--products", products, "--model", str(model), "--output", str(tmp_path / "e")], capsys
    )
    assert_one_line_error(code, err, "embed", "does not match the manifest")
    assert "model.safetensors" in err.splitlines()[-1]


def test_the_nightly_publish_refusal(tmp_path: Path, tiny_model_dir: Path, capsys) -> None:
    empty = write_catalog(tmp_path / "empty.parquet", [])
    argv = ["nightly", "--catalog", empty, "--model", str(tiny_model_dir), "--out", str(tmp_path / "n")]
    code, err = run([*argv, "--run_id", "mon", "--depth", "10"], capsys)
    assert_one_line_error(code, err, "nightly", "refusing to publish run mon")


# --debug, bugs, and the real process.


def test_debug_re_raises_for_the_traceback(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ArtifactError, match=r"holds per_query\.parquet"):
        main(["--debug", "compare", NOWHERE, NOWHERE])


def _raise(error: Exception) -> Callable[..., None]:
    def raising(*args: object, **kwargs: object) -> None:
        raise error

    return raising


@pytest.mark.parametrize("error", [PublishRefused("refusing to publish run x"), ArtifactError("x: changed")])
def test_user_error_types_raised_anywhere_are_one_line(error: Exception, monkeypatch, capsys) -> None:
    monkeypatch.setattr(commands, "compare_runs", _raise(error))
    assert_one_line_error(*run(["compare", "a", "b"], capsys), "compare", str(error))


def test_a_bug_keeps_its_traceback_and_says_how_to_report_it(monkeypatch, capsys) -> None:
    monkeypatch.setattr(commands, "compare_runs", _raise(KeyError("per_query")))
    code, err = run(["compare", "a", "b"], capsys)
    assert code == 1
    assert "Traceback" in err
    last = err.strip().splitlines()[-1]
    assert last.startswith("madr compare: unexpected error: KeyError") and "please report it" in last


def test_the_console_command_exits_2_without_and_shows_the_traceback_with_debug() -> None:
    def madr(*argv: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "jobs.cli", *argv, "compare", NOWHERE, NOWHERE]
        return subprocess.run(command, capture_output=True, text=True, check=False)

    plain = madr()
    assert plain.returncode == 2 and "Traceback" not in plain.stderr
    assert plain.stderr.strip().splitlines()[-1].startswith("madr compare: error: ")
    debug = madr("--debug")
    assert debug.returncode == 1 and "Traceback (most recent call last)" in debug.stderr
    assert "ArtifactError" in debug.stderr


def test_build_index_model_without_tuning_queries_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    """--model only encodes --tuning_queries: alone it would be dropped without a word."""
    code, err = run(["build-index", "--embeddings", NOWHERE, "--output", "x", "--model", "m"], capsys)
    assert code == 2 and "--tuning_queries and --model go together" in err, err
