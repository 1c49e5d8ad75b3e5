"""Paired t-test and the incomplete beta behind it: closed forms first, scipy second (when installed)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from evaluation.metrics import paired_t_test
from evaluation.significance import (
    holm_adjusted,
    regularized_incomplete_beta,
    student_t_cdf,
    student_t_two_sided_p,
)


@pytest.mark.parametrize("x", [0.0, 1e-9, 0.01, 0.3, 0.5, 0.77, 0.999, 1.0])
@pytest.mark.parametrize("b", [0.5, 1.0, 3.0, 40.0])
def test_incomplete_beta_closed_forms(x: float, b: float) -> None:
    # I_x(1, b) = 1 − (1 − x)^b and I_x(a, 1) = x^a.
    assert regularized_incomplete_beta(x, 1.0, b) == pytest.approx(1.0 - (1.0 - x) ** b, abs=1e-13)
    assert regularized_incomplete_beta(x, b, 1.0) == pytest.approx(x**b, abs=1e-13)
    # Symmetry: I_x(a, b) = 1 − I_{1−x}(b, a); and I_{1/2}(a, a) = 1/2.
    assert regularized_incomplete_beta(x, 2.5, b) == pytest.approx(
        1.0 - regularized_incomplete_beta(1.0 - x, b, 2.5), abs=1e-13
    )
    assert regularized_incomplete_beta(0.5, b, b) == pytest.approx(0.5, abs=1e-14)


@pytest.mark.parametrize("t", [-50.0, -3.0, -0.4, 0.0, 1e-7, 0.8, 2.0, 12.0])
def test_student_t_cdf_closed_forms(t: float) -> None:
    # df = 1 is the Cauchy distribution; df = 2 has F(t) = 1/2 + t / (2 sqrt(2 + t²)).
    assert student_t_cdf(t, 1) == pytest.approx(0.5 + math.atan(t) / math.pi, abs=1e-14)
    assert student_t_cdf(t, 2) == pytest.approx(0.5 + t / (2.0 * math.sqrt(2.0 + t * t)), abs=1e-14)


def test_small_p_values_keep_their_precision() -> None:
    # Two-sided Cauchy tail: 1 − 2 atan(t) / π = 2 atan(1 / t) / π, without cancellation.
    assert student_t_two_sided_p(1e6, 1) == pytest.approx(2.0 * math.atan(1e-6) / math.pi, rel=1e-10)
    assert student_t_two_sided_p(math.inf, 5) == 0.0


def test_paired_t_test_hand_derived_values() -> None:
    # Differences [1, 3]: mean 2, sd √2, t = 2 / (√2 / √2) = 2, df 1: p = 1 − 2 atan(2) / π.
    t, p = paired_t_test([1.0, 3.0], [0.0, 0.0])
    assert t == pytest.approx(2.0, abs=1e-12)
    assert p == pytest.approx(1.0 - 2.0 * math.atan(2.0) / math.pi, abs=1e-12)
    # Differences [1, 2, 4]: mean 7/3, variance 7/3, t = √7, df 2: p = 1 − √7 / 3.
    t, p = paired_t_test([2.0, 2.5, 4.0], [1.0, 0.5, 0.0])
    assert t == pytest.approx(math.sqrt(7.0), abs=1e-12)
    assert p == pytest.approx(1.0 - math.sqrt(7.0) / 3.0, abs=1e-12)
    t, _ = paired_t_test([0.0, 0.0, 0.0], [1.0, 2.0, 4.0])
    assert t == pytest.approx(-math.sqrt(7.0), abs=1e-12)  # the sign follows a − b


def test_paired_t_test_matches_scipy() -> None:
    stats = pytest.importorskip("scipy.stats")
    special = pytest.importorskip("scipy.special")
    rng = np.random.default_rng(3)
    for size in (2, 3, 8, 30, 400, 1900):
        a = rng.uniform(0, 1, size)
        b = np.clip(a + rng.normal(0.02, 0.1, size), 0, 1)
        expected = stats.ttest_rel(a, b)
        t, p = paired_t_test(a.tolist(), b.tolist())
        assert t == pytest.approx(float(expected.statistic), rel=1e-10)
        assert p == pytest.approx(float(expected.pvalue), rel=1e-8, abs=1e-300)
    for x, a_, b_ in rng.uniform(0.001, 1, (200, 3)) * [1, 300, 300]:
        assert regularized_incomplete_beta(x, a_, b_) == pytest.approx(special.betainc(a_, b_, x), abs=1e-12)


def test_paired_t_test_degenerate_and_invalid_input() -> None:
    assert all(math.isnan(value) for value in paired_t_test([0.5, 0.2], [0.5, 0.2]))
    assert paired_t_test([1.0, 2.0], [0.0, 1.0]) == (math.inf, 0.0)
    with pytest.raises(ValueError, match="at least 2"):
        paired_t_test([1.0], [0.0])
    with pytest.raises(ValueError, match="equal"):
        paired_t_test([1.0, 2.0], [0.0])
    with pytest.raises(ValueError, match="undefined"):
        paired_t_test([1.0, math.nan], [0.0, 1.0])
    with pytest.raises(ValueError):
        regularized_incomplete_beta(1.5, 1.0, 1.0)


def test_holm_adjustment_by_hand() -> None:
    """m = 4 defined p-values (the nan is not a test): sorted 0.005, 0.01, 0.03, 0.04 become 4·0.005, 3·0.01,
    2·0.03 and max(0.06, 1·0.04), each at least its predecessor."""
    adjusted = holm_adjusted({"a": 0.01, "b": 0.04, "c": 0.03, "d": 0.005, "e": math.nan})
    assert list(adjusted) == ["a", "b", "c", "d", "e"]
    assert [adjusted[k] for k in "abcd"] == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert math.isnan(adjusted["e"])
    assert holm_adjusted({"x": 0.5, "y": 0.6}) == {"x": 1.0, "y": 1.0}
    assert holm_adjusted({}) == {}
