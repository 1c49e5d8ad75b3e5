"""Every command of the README's command table runs as a user types it: `madr ...` argv, exit code 0.

Most commands have such a run beside their own checks (tests/test_search.py types embed, build-index
and search, tests/test_nightly.py the nightly, ...); the first test reads the README's table and fails
when a command in it has no test calling `main(["command", ...])`, so a flag that cannot reach its job
(the `madr adapt` crash of issue 47) fails a test. The second types the ones nothing else typed:
generate, evaluate, compare, export-vertex and experiment, on small data with a tiny model.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from jobs.cli import main
from jobs.command_table import INDEX

ROOT = Path(__file__).resolve().parents[1]
TABLE_ROW = re.compile(r"^\| `madr ([a-z-]+)(?: ([a-z|\\]+))?")


def readme_commands() -> list[str]:
    """`generate`, `ingest esci`, `ingest folder`, ... as the README's command table lists them."""
    found = []
    for line in (ROOT / "README.md").read_text().splitlines():
        match = TABLE_ROW.match(line)
        if not match:
            continue
        command, sub = match.groups()
        subs = (
            [part for part in (sub or "").replace("\\", "").split("|") if part] if command == "ingest" else []
        )
        found += [f"{command} {part}" for part in subs] or [command]
    return found


def _typed_in_tests(command: str) -> list[str]:
    """Test files that call the CLI's `main` and build an argv list starting with the command's words."""
    words = command.split()
    argv = re.compile(r"\[\s*" + r",\s*".join(f'"{word}"' for word in words) + r"\s*,")
    return [
        path.name
        for path in sorted((ROOT / "tests").glob("test_*.py"))
        if "main(" in (text := path.read_text()) and argv.search(text)
    ]


def test_the_readme_names_the_beam_commands_the_cli_passes_beam_options_to() -> None:
    """Issue 48: the README's list left out enrich."""
    from jobs.command_table import BEAM_COMMANDS

    text = " ".join((ROOT / "README.md").read_text().split())
    listed = re.search(r"The Beam stages \((.*?)\) accept any Beam pipeline option", text)
    assert listed, "README: the sentence listing the Beam stages is gone"
    named = set(re.findall(r"`([a-z-]+)`", listed.group(1)))
    assert named == set(BEAM_COMMANDS), named ^ set(BEAM_COMMANDS)


def test_the_readme_table_lists_every_command_and_each_is_typed_in_a_test() -> None:
    listed = readme_commands()
    names = {entry.name for entry in INDEX}
    assert {command.split()[0] for command in listed} == names, "README table vs `madr --help`"
    untyped = [command for command in listed if not _typed_in_tests(command)]
    assert not untyped, f"README commands no test runs as typed (main([...])): {untyped}"


def test_ingest_esci_and_a_store_export_folder_as_typed(tmp_path: Path) -> None:
    esci = ROOT / "tests" / "fixtures" / "ingest" / "esci"
    argv = ["ingest", "esci", "--products", str(esci / "shopping_queries_dataset_products.parquet")]
    argv += ["--examples", str(esci / "shopping_queries_dataset_examples.parquet")]
    assert main([*argv, "--output", str(tmp_path / "esci")]) == 0
    assert json.loads((tmp_path / "esci" / "manifest.json").read_text())["source"] == "esci"
    folder = [
        "ingest",
        "folder",
        str(ROOT / "examples" / "store_export"),
        "--output",
        str(tmp_path / "store"),
    ]
    assert main(folder) == 0
    assert (tmp_path / "store" / "judgments.parquet").is_file()


@pytest.mark.e2e
def test_generate_evaluate_compare_export_and_experiment_as_typed(
    tiny_model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "data"
    assert main(["generate", "--output", str(data), "--num_products", "300", "--num_queries", "30"]) == 0
    products = str(data / "products")
    model = str(tiny_model_dir)
    embed = ["embed", "--products", products, "--model", model, "--output", str(tmp_path / "embeddings")]
    assert main(embed) == 0
    index = ["build-index", "--embeddings", str(tmp_path / "embeddings"), "--output", str(tmp_path / "index")]
    assert main(index) == 0
    evaluate = ["evaluate", "--queries", str(data / "queries.parquet"), "--judgments"]
    evaluate += [str(data / "judgments.parquet"), "--model", model, "--index", str(tmp_path / "index")]
    evaluate += ["--embeddings", str(tmp_path / "embeddings"), "--zero_shot", "false"]
    assert main([*evaluate, "--output", str(tmp_path / "eval")]) == 0
    assert "recall@100" in capsys.readouterr().out
    assert main([*evaluate, "--output", str(tmp_path / "eval2"), "--metrics", "recall@100,ndcg@10"]) == 0
    assert main(["compare", str(tmp_path / "eval"), str(tmp_path / "eval2")]) == 0
    assert "recall@100" in capsys.readouterr().out
    export = ["export-vertex", "--products", products, "--embeddings", str(tmp_path / "embeddings")]
    assert main([*export, "--output", str(tmp_path / "vertex")]) == 0
    assert list((tmp_path / "vertex").glob("*.json*"))
    # The experiment's cheapest run: the backbone used zero-shot, with BM25 beside it, on its own data.
    experiment = ["experiment", "--output", str(tmp_path / "experiment"), "--variants", "zero-shot"]
    experiment += ["--baseline", "zero-shot", "--num_products", "300", "--num_queries", "30"]
    experiment += ["--held_out_products", "30", "--test_queries", "0"]
    assert main(experiment) == 0
    results = json.loads((tmp_path / "experiment" / "results.json").read_text())
    assert {"zero-shot", "bm25", "bm25+zero-shot"} <= set(results["summary"])
