"""docs/ARCHITECTURE.md lists the modules of the folders it maps: the list and the folders agree."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "ARCHITECTURE.md"
FOLDER_LINE = re.compile(r"^(?P<folder>[a-z_]+(?:/[a-z_]+)*/)\s+(?P<modules>.*)$")


def listed_modules(text: str) -> dict[str, set[str]]:
    """Per folder of the module map (the fenced block whose lines start with `folder/`), its modules."""
    listed: dict[str, set[str]] = {}
    for block in re.findall(r"```\n(.*?)```", text, flags=re.S):
        folder = None
        for line in block.splitlines():
            match = FOLDER_LINE.match(line)
            if match:
                folder = match["folder"]
                modules = match["modules"]
            elif folder and line.startswith(" "):
                modules = line
            else:
                folder = None
                continue
            listed.setdefault(folder, set()).update(modules.split())
    return listed


def test_the_module_map_names_exactly_the_modules_of_each_folder() -> None:
    listed = listed_modules(DOC.read_text())
    assert {"evaluation/", "jobs/", "pipelines/"} <= set(listed)
    for folder, names in listed.items():
        present = {path.name for path in (ROOT / folder).glob("*.py") if path.name != "__init__.py"}
        assert names == present, (
            f"docs/ARCHITECTURE.md's map of {folder}: missing {sorted(present - names)}, "
            f"gone {sorted(names - present)}"
        )


def test_the_check_reads_a_map_and_sees_a_missing_module() -> None:
    text = "```\nevaluation/   a.py b.py\n              c.py\njobs/  d.py\n```\n"
    assert listed_modules(text) == {"evaluation/": {"a.py", "b.py", "c.py"}, "jobs/": {"d.py"}}


def test_every_package_of_pipelines_is_mapped_and_its_top_level_stays_small() -> None:
    """A new room must appear in the map; pipelines/ itself holds only what every stage shares (issue 67:
    28 top-level modules were moved into settings/, storage/, io/ and serve/)."""
    listed = listed_modules(DOC.read_text())
    packages = {f"pipelines/{p.parent.name}/" for p in (ROOT / "pipelines").glob("*/__init__.py")}
    assert packages <= set(listed), f"not in docs/ARCHITECTURE.md's map: {sorted(packages - set(listed))}"
    top_level = [p.name for p in (ROOT / "pipelines").glob("*.py") if p.name != "__init__.py"]
    assert len(top_level) <= 15, sorted(top_level)


def _command_rows(text: str) -> dict[str, str]:
    """The command table's rows: its first cell (`madr embed`, ...) -> its "implemented in" cell."""
    rows = re.findall(r"^\| (`madr [^|]+) \| ([^|]+) \|", text, flags=re.M)
    return {commands: implemented for commands, implemented in rows}


def test_every_entry_point_the_command_table_names_is_defined_where_it_says() -> None:
    """`path.py` (`name`, `other`): each name is a function, class or constant of the file named last before
    it; every command of `madr --help` has a row."""
    from jobs.command_table import INDEX

    rows = _command_rows(DOC.read_text())
    covered = {word.strip("`, ") for cell in rows for word in cell.replace("`madr ", "`").split()}
    assert {entry.name for entry in INDEX} <= covered, {entry.name for entry in INDEX} - covered
    missing = []
    for cell in rows.values():
        path = None  # each name belongs to the file named last before it
        for token in re.findall(r"`([^`]+)`", cell):
            if token.endswith(".py"):
                path = token if "/" in token else f"{Path(path or '').parent}/{token}"
                assert (ROOT / path).is_file(), f"the command table names {path}, which is gone"
            elif path and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", token):
                pattern = rf"^\s*(?:def|class)\s+{token}\b|^{token}\s*[:=]"
                if not re.search(pattern, (ROOT / path).read_text(), flags=re.M):
                    missing.append(f"{path}: {token}")
    assert not missing, f"docs/ARCHITECTURE.md's command table names what is not there: {missing}"


def test_every_flag_the_document_names_is_a_flag_of_a_command_or_of_beam() -> None:
    import argparse

    from apache_beam.options.pipeline_options import PipelineOptions

    import pipelines.cluster.options  # noqa: F401  (registers --dask_address, --dask_workers)
    from jobs.command_table import load_all

    named = set(re.findall(r"(?<![\w-])--[a-z][a-z0-9_]*", DOC.read_text()))
    known = {"--" + name for name in PipelineOptions([]).get_all_options(retain_unknown_options=False)}

    def add(parser: argparse.ArgumentParser) -> None:
        for action in parser._actions:
            known.update(action.option_strings)
            if isinstance(action, argparse._SubParsersAction):
                for sub in action.choices.values():
                    add(sub)

    for command in load_all().values():
        parser = argparse.ArgumentParser()
        command.add_arguments(parser)
        add(parser)
    assert not named - known, f"docs/ARCHITECTURE.md names flags no command has: {sorted(named - known)}"
