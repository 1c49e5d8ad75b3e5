"""Each variant's entry says what the experiment does with it (issue 25, item 4): the experiment, its
pre-training and its budget read `model.registry.EXPERIMENT_ROLES`, and nothing outside `model/` branches
on a variant's name."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from jobs.experiment import DEFAULT_VARIANTS
from model.registry import EXPERIMENT_ROLES, VARIANTS, ZERO_SHOT, experiment_role

ROOT = Path(__file__).resolve().parents[1]


def test_every_role_names_known_variants_and_the_experiment_runs_them_in_order() -> None:
    assert set(EXPERIMENT_ROLES) <= set(VARIANTS)
    for role in EXPERIMENT_ROLES.values():
        assert {role.pretrained_from, role.embeddings_from} - {None} <= set(VARIANTS)
    assert tuple(EXPERIMENT_ROLES) == DEFAULT_VARIANTS and DEFAULT_VARIANTS[0] == ZERO_SHOT
    assert not experiment_role(ZERO_SHOT).trained
    assert experiment_role("madral-en-v1").pretrained_from == "madral"  # repro-ecir24 §8.1
    assert not experiment_role("uhd").pointwise_loss  # uhd-bert Eq. 8 alone
    with pytest.raises(ValueError, match="unknown variant"):
        experiment_role("bert-nonsense")


def test_no_code_outside_model_compares_a_variant_with_a_name() -> None:
    branches = re.compile(r"variant\s*(==|!=|in)\s*[(\"']")
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for package in ("jobs", "pipelines")
        for path in sorted((ROOT / package).rglob("*.py"))
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        if branches.search(line)
    ]
    assert found == []
