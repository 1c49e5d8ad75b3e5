"""Two-sided paired t-test over per-query metric values (§8.3, madral-kdd22), with numpy and math only.

The Student t CDF comes from the regularized incomplete beta function, evaluated by its continued
fraction with the modified Lentz method (Numerical Recipes §6.4):
``P(|T| > |t|) = I_{df / (df + t²)}(df / 2, 1 / 2)`` for ``df`` degrees of freedom.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import NamedTuple, TypeVar

import numpy as np

K = TypeVar("K")
# A difference is significant at p < 0.01 (madral-kdd22 §8.3): the experiment's table marks and the
# nightly's quality guard both use it.
SIGNIFICANCE = 0.01
_TINY = 1e-300
_EPSILON = 1e-15
_MAX_ITERATIONS = 1000


def _beta_continued_fraction(x: float, a: float, b: float) -> float:
    """The continued fraction of I_x(a, b), modified Lentz; converges fast for x < (a + 1) / (a + b + 2)."""
    c = 1.0
    d = 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > _TINY else _TINY)
    fraction = d
    for m in range(1, _MAX_ITERATIONS + 1):
        # Even step: d_{2m} = m (b − m) x / ((a + 2m − 1)(a + 2m)).
        numerator = m * (b - m) * x / ((a + 2 * m - 1.0) * (a + 2 * m))
        d = 1.0 + numerator * d
        d = 1.0 / (d if abs(d) > _TINY else _TINY)
        c = 1.0 + numerator / c
        c = c if abs(c) > _TINY else _TINY
        fraction *= d * c
        # Odd step: d_{2m+1} = −(a + m)(a + b + m) x / ((a + 2m)(a + 2m + 1)).
        numerator = -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1.0))
        d = 1.0 + numerator * d
        d = 1.0 / (d if abs(d) > _TINY else _TINY)
        c = 1.0 + numerator / c
        c = c if abs(c) > _TINY else _TINY
        step = d * c
        fraction *= step
        if abs(step - 1.0) < _EPSILON:
            return fraction
    raise ArithmeticError(f"incomplete beta continued fraction did not converge for x={x}, a={a}, b={b}")


def _incomplete_beta(x: float, y: float, a: float, b: float) -> float:
    """I_x(a, b) given x and y = 1 − x, each computed without cancellation by the caller."""
    if x == 0.0 or y == 0.0:
        return 0.0 if x == 0.0 else 1.0
    log_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log(y)
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _beta_continued_fraction(x, a, b) / a
    # Symmetry I_x(a, b) = 1 − I_{1−x}(b, a) keeps the fraction in its fast-converging region.
    return 1.0 - math.exp(log_front) * _beta_continued_fraction(y, b, a) / b


def regularized_incomplete_beta(x: float, a: float, b: float) -> float:
    """I_x(a, b) = B(x; a, b) / B(a, b) for 0 <= x <= 1 and a, b > 0."""
    if not (a > 0.0 and b > 0.0):
        raise ValueError(f"a and b must be > 0, got a={a}, b={b}")
    if not 0.0 <= x <= 1.0:
        raise ValueError(f"x must lie in [0, 1], got {x}")
    return _incomplete_beta(x, 1.0 - x, a, b)


def student_t_two_sided_p(t: float, df: float) -> float:
    """P(|T| >= |t|) for Student's t with ``df`` degrees of freedom (no 1 − x cancellation for small p)."""
    if df <= 0:
        raise ValueError(f"degrees of freedom must be > 0, got {df}")
    if math.isnan(t):
        return math.nan
    if math.isinf(t):
        return 0.0
    # x = df / (df + t²) and 1 − x = t² / (df + t²), both exact enough for |t| tiny or huge.
    return _incomplete_beta(df / (df + t * t), t * t / (df + t * t), df / 2.0, 0.5)


def student_t_cdf(t: float, df: float) -> float:
    """P(T <= t) for Student's t with ``df`` degrees of freedom."""
    tail = 0.5 * student_t_two_sided_p(t, df)
    return 1.0 - tail if t > 0 else tail


class TTestResult(NamedTuple):
    statistic: float
    pvalue: float


def paired_t_test(a: Sequence[float], b: Sequence[float]) -> TTestResult:
    """Two-sided paired t-test of mean(a − b) = 0, as ``scipy.stats.ttest_rel(a, b)``.

    ``a[i]`` and ``b[i]`` must be the same query's values of one metric for two systems (pair queries
    where both are defined before calling). When every difference is 0 the statistic is undefined:
    ``(nan, nan)`` like scipy; a constant non-zero difference gives ``(±inf, 0.0)``.
    """
    first = np.asarray(a, dtype=np.float64)
    second = np.asarray(b, dtype=np.float64)
    if first.ndim != 1 or first.shape != second.shape:
        raise ValueError(f"paired samples need equal 1-d shapes, got {first.shape} and {second.shape}")
    if first.size < 2:
        raise ValueError(f"a paired t-test needs at least 2 pairs, got {first.size}")
    if not (np.isfinite(first).all() and np.isfinite(second).all()):
        raise ValueError("paired samples hold nan or inf; drop queries where a metric is undefined first")
    differences = first - second
    mean = float(differences.mean())
    deviation = float(differences.std(ddof=1))
    if deviation == 0.0:
        if mean == 0.0:
            return TTestResult(math.nan, math.nan)
        return TTestResult(math.copysign(math.inf, mean), 0.0)
    statistic = mean / (deviation / math.sqrt(differences.size))
    return TTestResult(statistic, student_t_two_sided_p(statistic, differences.size - 1))


def holm_adjusted(pvalues: Mapping[K, float]) -> dict[K, float]:
    """Holm's step-down adjustment of a family of p-values (Holm 1979), as the p-values to compare with α.

    Sorted ascending, the i-th of m (from 0) becomes max over j ≤ i of min(1, (m − j)·p_j): rejecting where
    the adjusted value is below α controls the family-wise error rate at α. nan (an undefined test) stays
    nan and does not count towards m.
    """
    defined = sorted(((p, key) for key, p in pvalues.items() if not math.isnan(p)), key=lambda pair: pair[0])
    adjusted: dict[K, float] = {key: math.nan for key, p in pvalues.items() if math.isnan(p)}
    running = 0.0
    for rank, (pvalue, key) in enumerate(defined):
        running = max(running, min(1.0, (len(defined) - rank) * pvalue))
        adjusted[key] = running
    return {key: adjusted[key] for key in pvalues}


__all__ = [
    "TTestResult",
    "holm_adjusted",
    "paired_t_test",
    "regularized_incomplete_beta",
    "student_t_cdf",
    "student_t_two_sided_p",
]
