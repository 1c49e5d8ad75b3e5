"""What a generated benchmark holds, measured from the records actually written."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from product_data.synthetic.config import PRODUCT_COVERAGE_TARGET, QUERY_COVERAGE_TARGET
from schemas import ECOMMERCE_ASPECTS


class CoverageCounter:
    """Streaming share of records annotated per aspect; O(aspects) memory."""

    def __init__(self, aspects: Iterable[str] = ECOMMERCE_ASPECTS) -> None:
        self.total = 0
        self.annotated = dict.fromkeys(aspects, 0)

    def add(self, aspects: Mapping[str, list[str]]) -> None:
        self.total += 1
        for name in self.annotated:
            if aspects.get(name):
                self.annotated[name] += 1

    def coverage(self) -> dict[str, float]:
        return {name: count / self.total if self.total else 0.0 for name, count in self.annotated.items()}


@dataclass(frozen=True)
class BenchmarkSummary:
    """Counts and coverage of one generated benchmark (also written as ``summary.json``).

    ``num_leaf_categories``, ``num_brands`` and ``num_colors`` count the distinct values that
    occur in the written catalog, as madral-kdd22 §8.1 reports vocabulary sizes from its corpus.
    """

    num_products: int
    num_queries: dict[str, int]  # per split
    num_judgments: int
    judgments_per_query: tuple[float, float, float]  # min, mean, max
    grade_histogram: dict[int, int]
    product_aspect_coverage: dict[str, float]
    query_aspect_coverage: dict[str, float]
    num_leaf_categories: int
    num_brands: int
    num_colors: int

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["judgments_per_query"] = list(self.judgments_per_query)
        data["grade_histogram"] = {str(g): n for g, n in sorted(self.grade_histogram.items())}
        return data

    def format(self) -> str:
        """A readable table for the CLI, with Table 3's coverage next to the measured one."""
        splits = " / ".join(f"{split} {n:,}" for split, n in self.num_queries.items())
        low, mean, high = self.judgments_per_query
        grades = "  ".join(f"{g}: {self.grade_histogram.get(g, 0):,}" for g in (4, 3, 2, 1, 0))
        aspects = list(self.product_aspect_coverage)

        def row(label: str, values: Mapping[str, float]) -> str:
            return f"  {label:<24}" + "".join(f"{values.get(a, 0.0):>10.1%}" for a in aspects)

        lines = [
            "Synthetic e-commerce benchmark",
            f"  {'products':<24}{self.num_products:,}",
            f"  {'queries':<24}{sum(self.num_queries.values()):,}  ({splits})",
            f"  {'judgments':<24}{self.num_judgments:,}  "
            f"(per query min {low:g} / mean {mean:.1f} / max {high:g})",
            f"  {'grades':<24}{grades}",
            f"  {'vocabulary':<24}{self.num_leaf_categories:,} leaf categories, {self.num_brands:,} brands, "
            f"{self.num_colors:,} colors",
            "  aspect coverage" + " " * 9 + "".join(f"{a:>10}" for a in aspects),
            row("products", self.product_aspect_coverage),
            row("products, Table 3", PRODUCT_COVERAGE_TARGET),
            row("queries", self.query_aspect_coverage),
            row("queries, Table 3", QUERY_COVERAGE_TARGET),
        ]
        return "\n".join(lines)
