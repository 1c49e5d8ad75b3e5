"""A folder named like one of madr's packages, first on sys.path, stops madr with a clear message."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pipelines.installation import ShadowedPackageError, check_sibling_packages

REPO = Path(__file__).resolve().parents[1]


def test_madr_finds_its_own_packages() -> None:
    check_sibling_packages()  # the test session imported them from the checkout


def test_a_folder_that_does_not_hold_them_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ShadowedPackageError, match=r"madr's package 'schemas' is imported from"):
        check_sibling_packages(tmp_path)


def _import_jobs_cli_beside(tmp_path: Path, impostor: str) -> tuple[Path, subprocess.CompletedProcess]:
    """`import jobs.cli` (what the `madr` command does) run from a folder holding a fake `impostor`."""
    fake = tmp_path / impostor
    fake.mkdir()
    (fake / "__init__.py").write_text("raise SystemExit('the impostor ran')\n")
    done = subprocess.run(
        [sys.executable, "-c", "import jobs.cli"],
        cwd=tmp_path,  # the current directory comes first on sys.path
        env={"PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    return fake, done


def test_a_shadowing_model_package_is_named_with_the_fix(tmp_path: Path) -> None:
    fake, done = _import_jobs_cli_beside(tmp_path, "model")
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert "ShadowedPackageError" in last and f"from {fake}" in last and "the impostor ran" not in done.stderr


def test_a_shadowing_pipelines_package_is_refused_before_it_runs(tmp_path: Path) -> None:
    fake, done = _import_jobs_cli_beside(tmp_path, "pipelines")
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert "ImportError" in last and f"from {fake}" in last and "the impostor ran" not in done.stderr
