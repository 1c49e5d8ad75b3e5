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
