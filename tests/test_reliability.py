"""bench/reliability.py (`make reliability`) as a test: every case as expected, no record lost."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.reliability import CASES, format_table, run_suite


@pytest.mark.reliability
def test_every_reliability_case_is_as_expected_and_loses_nothing(tmp_path: Path) -> None:
    outcomes = run_suite(tmp_path, progress=lambda _: None, quick=True)
    assert len(outcomes) == len(CASES)
    failed = [outcome for outcome in outcomes if not outcome.passed]
    assert not failed, "\n" + format_table(outcomes)
