"""The `madr` command line: every subcommand explains itself, bad calls fail clearly."""

from __future__ import annotations

import subprocess
import sys

import pytest

from jobs.cli import main

SUBCOMMANDS = {
    "generate": ["--num_products", "--num_queries", "--seed"],
    "train": ["--variant", "--epochs", "--batch_size", "--checkpoint_every", "--model_version"],
    "embed": ["--products", "--model", "--output", "--num_shards", "--batch_size", "--device"],
    "build-index": ["--embeddings", "--depth", "--num_index_shards"],
    "export-vertex": ["--products", "--embeddings", "--output", "--vertex_aspects"],
    "experiment": ["--variants", "--baseline", "--aspect_loss_weight", "--num_products"],
    "evaluate": ["--queries", "--judgments", "--index", "--searcher", "--depth", "--metrics"],
    "demo": ["--out", "--num_products", "--epochs"],
    "build-sparse-index": ["--model", "--products", "--out"],
    "explain": ["--model", "--query", "--product", "--product_id"],
    "neighbours": ["--aspect", "--value", "--top", "--list"],
    "extend-vocabulary": ["--model", "--products", "--values", "--output"],
    "nightly": ["--catalog", "--model", "--out", "--run_id", "--num_index_shards"],
    "ingest": ["esci", "wands", "generic"],
    "compare": ["RUN_A", "RUN_B"],
}


# That `madr --help` lists each command once, on its line with its purpose: tests/test_command_table.py.


@pytest.mark.parametrize(("command", "flags"), SUBCOMMANDS.items())
def test_each_subcommand_help_documents_its_flags(
    command: str, flags: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main([command, "--help"])
    assert exited.value.code == 0
    out = capsys.readouterr().out
    for flag in flags:
        assert flag in out, f"{command} --help does not mention {flag}"


def test_missing_required_beam_flags_are_named(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["embed", "--model", "/nowhere"])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "madr embed: error: the following arguments are required: --output/--out, --products" in err


def test_unknown_flags_of_non_beam_commands_are_rejected(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["generate", "--out", "y", "--bogus", "1"])
    assert exited.value.code == 2
    assert "unrecognised arguments for generate: --bogus 1" in capsys.readouterr().err


def test_console_entry_point_runs() -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "jobs.cli", "generate", "--help"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    assert "--num_products" in completed.stdout
