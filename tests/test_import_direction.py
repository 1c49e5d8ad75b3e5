"""Imports flow one way (issue 11): schemas <- model and the other libraries <- pipelines <- jobs.

`schemas` imports nothing of ours; `model`, `index_builder`, `product_data` and `evaluation` (the Beam-free
metrics) only `schemas`; `pipelines` (the Beam stages) all of these but `product_data` (the generator and
the loaders write dataset folders, which stages read as files); `jobs` (the commands and the jobs that
chain stages) everything, and nothing imports `jobs`. docs/ARCHITECTURE.md draws the same arrows, and a
test below holds the two together.

Every .py file of the library packages is parsed with `ast` (nothing is imported) and each of its
imports, relative ones and those inside functions included, is checked against `ALLOWED`: the
first-party packages a package may import besides itself. `bench` and `tests` may import anything
and are not checked. Third-party imports are not this test's business.
"""

from __future__ import annotations

import ast
import itertools
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIRST_PARTY = frozenset(
    {
        "schemas",
        "model",
        "index_builder",
        "serving",
        "product_data",
        "evaluation",
        "pipelines",
        "jobs",
        "bench",
        "tests",
    }
)
ALLOWED: dict[str, frozenset[str]] = {
    "schemas": frozenset(),
    "model": frozenset({"schemas"}),
    "index_builder": frozenset({"schemas"}),
    "product_data": frozenset({"schemas"}),
    "evaluation": frozenset({"schemas"}),
    # A search server's runtime: the index and a bundle's files, no torch, no Beam (`madr serve`).
    "serving": frozenset({"schemas", "index_builder"}),
    "pipelines": frozenset({"schemas", "model", "index_builder", "serving", "evaluation"}),
    "jobs": frozenset(
        {"schemas", "model", "index_builder", "serving", "product_data", "evaluation", "pipelines"}
    ),
}

# Known violations, to be moved (issue 11), as (file, imported module). Each entry is a debt: fix the
# import and delete the entry; a new violation is never added here.
KNOWN_VIOLATIONS: frozenset[tuple[str, str]] = frozenset()


@dataclass(frozen=True)
class Violation:
    path: str  # relative to the repository root, with forward slashes
    line: int
    statement: str  # the import as written
    target: str  # the absolute module imported

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.statement}  ({self.target})"


def _package_parts(path: str) -> list[str]:
    """The package a module lives in, as parts: model/aspects/tower.py -> [model, aspects]."""
    parts = path.removesuffix(".py").split("/")
    return parts[:-1]  # an __init__.py's package is its own folder, which is parts[:-1] as well


def _imported_modules(node: ast.Import | ast.ImportFrom, path: str) -> list[str]:
    """The absolute module names one import statement reads."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level == 0:
        return [node.module or ""]
    package = _package_parts(path)
    up = node.level - 1
    if up > len(package):
        raise ValueError(f"{path}:{node.lineno}: relative import beyond the top-level package")
    base = package[: len(package) - up]
    if node.module:
        return [".".join([*base, node.module])]
    # `from . import x` (or `from .. import x`) imports the submodules or names x of base.
    return [".".join([*base, alias.name]) for alias in node.names]


def import_violations(source: str, path: str) -> list[Violation]:
    """The imports of `source` (the file at `path`, relative to the root) against the allowed direction."""
    package = path.split("/", 1)[0]
    allowed = ALLOWED.get(package)
    if allowed is None:
        return []
    found = []
    for node in ast.walk(ast.parse(source, filename=path)):
        if not isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        for target in _imported_modules(node, path):
            top = target.split(".", 1)[0]
            if top in FIRST_PARTY and top != package and top not in allowed:
                statement = ast.get_source_segment(source, node) or ast.unparse(node)
                found.append(Violation(path, node.lineno, " ".join(statement.split()), target))
    return found


def library_files() -> list[Path]:
    return sorted(p for package in ALLOWED for p in (ROOT / package).rglob("*.py"))


def all_violations() -> list[Violation]:
    return [
        violation
        for file in library_files()
        for violation in import_violations(file.read_text(), file.relative_to(ROOT).as_posix())
    ]


def test_no_import_goes_against_the_direction() -> None:
    assert library_files(), "found no library files to check"
    new = [v for v in all_violations() if (v.path, v.target) not in KNOWN_VIOLATIONS]
    assert not new, "imports against the direction of ALLOWED:\n" + "\n".join(map(str, new))


def test_the_allow_list_is_empty_and_every_entry_still_exists() -> None:
    """No import is allowed against the direction: an entry added to KNOWN_VIOLATIONS fails here until
    this test says why it is needed; and a fixed violation leaves the list, so it cannot come back."""
    current = {(v.path, v.target) for v in all_violations()}
    stale = sorted(KNOWN_VIOLATIONS - current)
    assert not stale, f"fixed, remove from KNOWN_VIOLATIONS: {stale}"
    assert not KNOWN_VIOLATIONS, f"imports allowed against the direction: {sorted(KNOWN_VIOLATIONS)}"


# The checker itself, on made-up sources.


@pytest.mark.parametrize(
    ("path", "source", "target"),
    [
        ("schemas/records.py", "import model.encoder\n", "model.encoder"),
        ("schemas/records.py", "from pipelines.embed import run_embed\n", "pipelines.embed"),
        ("model/encoder.py", "from jobs import cli\n", "jobs"),
        ("evaluation/metrics.py", "from pipelines.settings.options import x\n", "pipelines.settings.options"),
        ("evaluation/report.py", "from model import new_encoder\n", "model"),
        ("pipelines/embed/stage.py", "from jobs.nightly import run_nightly\n", "jobs.nightly"),
        ("pipelines/evaluate/stage.py", "from ...jobs import cli\n", "jobs"),
        ("model/encoder.py", "from index_builder.searcher import Searcher\n", "index_builder.searcher"),
        ("model/aspects/tower.py", "from ...pipelines.embed import x\n", "pipelines.embed"),
        ("model/aspects/tower.py", "from ... import bench\n", "bench"),
        ("index_builder/builder.py", "def f():\n    import model\n", "model"),
        ("pipelines/embed/stage.py", "from bench.common import timer\n", "bench.common"),
        ("jobs/nightly.py", "import tests.conftest\n", "tests.conftest"),
    ],
)
def test_the_checker_finds_an_import_against_the_direction(path: str, source: str, target: str) -> None:
    (violation,) = import_violations(source, path)
    assert (violation.path, violation.target) == (path, target)
    assert violation.line == source.count("\n", 0, source.index("import")) + 1
    assert path in str(violation) and target in str(violation)


@pytest.mark.parametrize(
    ("path", "source"),
    [
        ("model/encoder.py", "from schemas import AspectSchema\nimport torch\nimport model.config\n"),
        ("model/aspects/tower.py", "from ..config import EncoderConfig\nfrom . import vocabulary\n"),
        ("pipelines/embed/stage.py", "from model import new_encoder\nfrom index_builder import searcher\n"),
        ("pipelines/evaluate/stage.py", "from evaluation import parse_metrics\nfrom ..options import x\n"),
        ("evaluation/ranked.py", "from schemas import RUN_SCHEMA\nfrom .metrics import MetricSpec\n"),
        ("jobs/nightly.py", "from pipelines.embed import run_embed\nfrom evaluation import aggregate\n"),
        ("bench/common.py", "from jobs.cli import main\nimport tests.conftest\n"),
        ("tests/test_x.py", "from bench.common import timer\n"),
    ],
)
def test_the_checker_allows_imports_along_the_direction(path: str, source: str) -> None:
    assert import_violations(source, path) == []


def _drawn_arrows() -> dict[str, frozenset[str]]:
    """What docs/ARCHITECTURE.md's diagram lets each package import: its lines read "a  <-  b  <-  c"
    (b imports a, c imports b), and the arrows compose."""
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    section = text[text.index("## Packages and import direction") :]
    diagram = section[section.index("```") + 3 : section.index("```", section.index("```") + 3)]
    imports: dict[str, set[str]] = {}
    for line in diagram.strip().splitlines():
        chain = [name.strip() for name in line.split("<-")]
        for imported, importer in itertools.pairwise(chain):
            imports.setdefault(importer, set()).add(imported)
            imports.setdefault(imported, set())
    closed = {package: set(direct) for package, direct in imports.items()}
    changed = True
    while changed:  # the transitive closure: whatever an import may import
        changed = False
        for package, reach in closed.items():
            wider = reach.union(*(closed[other] for other in reach))
            if wider != reach:
                closed[package], changed = wider, True
    return {package: frozenset(reach) for package, reach in closed.items()}


def test_the_architecture_diagram_draws_exactly_the_allowed_imports() -> None:
    """Issue 25: the document drew product_data <- pipelines, which no pipeline imports."""
    assert _drawn_arrows() == ALLOWED
