"""The package as a Dataflow worker gets it: `setup.py sdist`, pip-installed into a fresh environment.

With ``--setup_file ./setup.py`` Beam runs ``python setup.py sdist`` on the launching machine, stages the
tarball, and every worker ``pip install``s it; the workers never see this checkout. A module left out
by ``find_packages`` (a subpackage without ``__init__.py``), a data file read from next to the code, or an
import that only works from the repository root breaks every worker, and no other test notices: they
all import the checkout. So this test builds the sdist, installs it into a new virtual environment and
imports every module of it from a directory outside the repository, then runs the installed ``madr``.

Offline and fast: the new environment is made ``--without-pip``, and a ``.pth`` file puts this
environment's site-packages (torch, Beam, ScaNN, pip, setuptools, ...) on its path, after its own.
Lines of a ``.pth`` file only add directories: the ``.pth`` files inside them (among them the
editable-install hook that maps ``madr`` to this checkout) are not run, so the only ``madr`` the new
environment can import is the installed one, which the test asserts. pip runs with ``--no-index
--no-deps`` (nothing to download), ``--no-build-isolation`` (build with the setuptools it can see) and
``--ignore-installed``, so it never tries to uninstall the editable ``madr`` it sees on the ``.pth`` path.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("schemas", "model", "index_builder", "evaluation", "pipelines", "jobs")
# Not part of a checkout's sources: environments, outputs, caches, build leftovers.
NOT_SOURCES = shutil.ignore_patterns(
    ".venv", "runs", ".git", "build", "dist", "*.egg-info", "__pycache__", ".pytest_cache", ".ruff_cache"
)

# Run by the new environment's python: import every module of the packages, then run the installed
# `madr` console script (the wrapper pip generated) in the same process, so the heavy imports (torch,
# Beam, ScaNN) are paid once. Its shebang is checked separately.
IMPORT_EVERYTHING_THEN_MADR_HELP = textwrap.dedent(
    """
    import contextlib, importlib, io, json, pkgutil, runpy, sys
    site, script, packages = sys.argv[1], sys.argv[2], sys.argv[3:]
    imported = {}
    for name in packages:
        package = importlib.import_module(name)
        imported[name] = package.__file__
        for module in pkgutil.walk_packages(package.__path__, prefix=name + "."):
            imported[module.name] = importlib.import_module(module.name).__file__
    outside = {name: path for name, path in imported.items() if not path.startswith(site)}
    sys.argv, help_text, code = [script, "--help"], io.StringIO(), None
    with contextlib.redirect_stdout(help_text):
        try:
            runpy.run_path(script, run_name="__main__")
        except SystemExit as exit:
            code = exit.code
    report = {"imported": sorted(imported), "outside": outside, "help": help_text.getvalue(), "exit": code}
    print(json.dumps(report))
    """
)


def _run(command: list[str], cwd: Path, env: dict[str, str], timeout: float = 120) -> str:
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    failure = f"{' '.join(command)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
    assert done.returncode == 0, failure
    return done.stdout


def _source_modules() -> set[str]:
    """Every module of the packages in the checkout, as dotted names."""
    modules = set()
    for package in PACKAGES:
        for path in (REPO / package).rglob("*.py"):
            parts = path.relative_to(REPO).with_suffix("").parts
            modules.add(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return modules


def test_the_sdist_installs_and_imports_outside_the_checkout(tmp_path: Path) -> None:
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "PYTHONHOME")}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    checkout = tmp_path / "checkout"  # a copy, so building leaves no egg-info or build tree in the repo
    shutil.copytree(REPO, checkout, ignore=NOT_SOURCES)
    _run([sys.executable, "setup.py", "-q", "sdist", "--dist-dir", str(tmp_path / "dist")], checkout, env)
    (sdist,) = (tmp_path / "dist").glob("madr-*.tar.gz")

    venv = tmp_path / "worker-venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], tmp_path, env)
    python = venv / "bin" / "python"
    where = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    site = Path(_run([str(python), "-c", where], tmp_path, env).strip())
    ours = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (site / "_madr_test_dependencies.pth").write_text("".join(f"{path}\n" for path in sorted(ours)))
    _run(
        [str(python), "-m", "pip", "install", "--quiet", "--no-index", "--no-deps", "--no-build-isolation",
         "--ignore-installed", "--no-cache-dir", str(sdist)],
        tmp_path,
        env,
        timeout=180,
    )  # fmt: skip

    madr = venv / "bin" / "madr"
    # The console script runs the new environment's python (on line 1, or line 2 of pip's /bin/sh
    # trampoline for long paths).
    assert str(python) in "\n".join(madr.read_text().splitlines()[:3])
    elsewhere = tmp_path / "elsewhere"  # not the checkout: nothing may be imported from the current folder
    elsewhere.mkdir()
    report = _run(
        [str(python), "-c", IMPORT_EVERYTHING_THEN_MADR_HELP, str(site), str(madr), *PACKAGES], elsewhere, env
    )
    result = json.loads(report.strip().splitlines()[-1])
    assert result["outside"] == {}, "imported from outside the installed package"
    missing = _source_modules() - set(result["imported"])
    assert not missing, f"in the checkout but not in the installed sdist (no __init__.py?): {sorted(missing)}"
    assert result["exit"] == 0, result["help"]
    for command in ("generate", "train", "embed", "build-index", "evaluate", "demo"):
        assert command in result["help"]
