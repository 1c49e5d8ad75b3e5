"""Which judged grades are relevant, and how much gain each grade is worth for NDCG.

madral-kdd22 (§8.1, §8.3) grades 0–4, calls grade ≤ 1 negative and uses gain 2^grade − 1; the ESCI
reproduction (madral-reproducibility-ecir24, evaluation section) calls only Exact positive and uses
float gains 1.0/0.1/0.01/0.0 for E/S/C/I. Both are a `RelevanceRule`; float gains stay floats.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


@dataclass(frozen=True)
class RelevanceRule:
    """Which judged grades are relevant, and the gain of each grade for NDCG.

    ``gains=None`` means gain = 2^grade − 1 (§8.3, madral-kdd22); an explicit grade → gain table (see
    `RelevanceRule.with_gains`) keeps float gains as floats, and a grade missing from it is an error.
    """

    positive_min_grade: int = 2  # §8.1, madral-kdd22: rel ≤ 1 is negative, the rest positive
    gains: tuple[tuple[int, float], ...] | None = None

    def __post_init__(self) -> None:
        if isinstance(self.positive_min_grade, bool) or not isinstance(self.positive_min_grade, int):
            raise ValueError(f"positive_min_grade must be an int, got {self.positive_min_grade!r}")
        if self.positive_min_grade < 1:
            raise ValueError(
                f"positive_min_grade must be >= 1 (grade 0 is never relevant), got {self.positive_min_grade}"
            )
        if self.gains is None:
            return
        pairs = tuple(self.gains.items() if isinstance(self.gains, Mapping) else self.gains)
        grades = [grade for grade, _ in pairs]
        if len(set(grades)) != len(grades):
            raise ValueError(f"gain table repeats a grade: {grades}")
        for grade, gain in pairs:
            if isinstance(grade, bool) or not isinstance(grade, int) or grade < 0:
                raise ValueError(f"gain table grades must be integers >= 0, got {grade!r}")
            if not _is_number(gain) or not math.isfinite(gain) or gain < 0:
                raise ValueError(f"gain of grade {grade} must be a finite number >= 0, got {gain!r}")
        object.__setattr__(self, "gains", tuple(sorted((grade, float(gain)) for grade, gain in pairs)))

    @classmethod
    def with_gains(cls, gains: Mapping[int, float], positive_min_grade: int = 2) -> RelevanceRule:
        return cls(positive_min_grade=positive_min_grade, gains=tuple(gains.items()))

    def is_positive(self, grade: int) -> bool:
        return grade >= self.positive_min_grade

    def gain(self, grade: int) -> float:
        if grade < 0:
            raise ValueError(f"grades must be >= 0, got {grade}")
        if self.gains is None:
            return float(2**grade - 1)  # §8.3, madral-kdd22: gain before discounting is 2^rel − 1
        table = dict(self.gains)
        if grade not in table:
            raise ValueError(f"grade {grade} has no gain in {table}")
        return table[grade]

    def to_dict(self) -> dict[str, object]:
        gains: object = "2^grade - 1" if self.gains is None else {str(grade): g for grade, g in self.gains}
        return {"positive_min_grade": self.positive_min_grade, "gains": gains}

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> RelevanceRule:
        gains = data.get("gains", "2^grade - 1")
        positive_min_grade = data.get("positive_min_grade", 2)
        if not isinstance(positive_min_grade, int):
            raise ValueError(f"positive_min_grade must be an int, got {positive_min_grade!r}")
        if gains == "2^grade - 1":
            return cls(positive_min_grade=positive_min_grade)
        if not isinstance(gains, Mapping):
            raise ValueError(f"gains must be '2^grade - 1' or a grade -> gain table, got {gains!r}")
        return cls.with_gains({int(grade): float(g) for grade, g in gains.items()}, positive_min_grade)


# Evaluation section, madral-reproducibility-ecir24: on ESCI only Exact is positive (grade 3 here), and the
# gains of E/S/C/I are 1.0/0.1/0.01/0.0.
ESCI_RELEVANCE = RelevanceRule.with_gains({3: 1.0, 2: 0.1, 1: 0.01, 0: 0.0}, positive_min_grade=3)

__all__ = ["ESCI_RELEVANCE", "RelevanceRule"]
