"""Every benchmark under bench/ imports: a name a refactor removed from the project breaks a benchmark that
no test runs (bench/fusion_ablation.py imported `catalog_text`, gone with issue 62's BM25 rework)."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"


@pytest.mark.parametrize("module", sorted(p.stem for p in BENCH.glob("*.py") if p.stem != "__init__"))
def test_the_benchmark_module_imports(module: str) -> None:
    importlib.import_module(f"bench.{module}")
