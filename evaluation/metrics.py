"""Per-query retrieval and ranking metrics and their means (§8.3, madral-kdd22).

Pure functions on one query's ranking and judgments (numpy only, no Beam); an evaluation stage maps
`evaluate_query` over queries and combines the rows with `aggregate`.

Conventions (each checked against trec_eval through ir_measures in tests/test_metrics.py):

* The ranking is the order of ``ranked_product_ids`` (rank 1 first); a product may appear once, so there
  are no ties inside a ranking. Unjudged retrieved products have gain 0 and are not relevant (trec_eval).
* A metric is *undefined* for a query exactly when its denominator is 0: recall@k and mrr@k when no
  judged product is relevant (grade >= ``positive_min_grade``), ndcg@k when the ideal DCG is 0, auc
  when the judged products lack positives or negatives. Undefined values are ``nan`` (`UNDEFINED`);
  `aggregate` skips them and reports how many queries each mean is over. trec_eval instead scores a
  judged query without relevant products 0 and averages it in (while dropping queries with no judgments
  at all), so its mean depends on how many unanswerable queries a split holds; ours does not.
* Gains are floats and stay floats (trec_eval only takes integer relevance, so ESCI gains 0.1/0.01 would
  be truncated; we keep them).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from numbers import Integral, Real

import numpy as np

from evaluation.relevance import ESCI_RELEVANCE, RelevanceRule
from evaluation.significance import paired_t_test

UNDEFINED = math.nan

# What each metric family means; written next to the numbers in metrics.json.
DEFINITIONS: dict[str, str] = {
    "recall": "|relevant ∩ top-k| / |relevant| over judged relevant products (not a hit rate)",
    "ndcg": "DCG@k / ideal DCG@k; discount log2(rank + 1); ideal from all judged products of the query",
    "mrr": "1 / rank of the first relevant product within the top k, 0 if none",
    "auc": "P(random judged positive ranked above random judged negative); unretrieved judged products "
    "rank below all retrieved ones and tie with each other (0.5)",
}
_CUTOFF_FAMILIES = ("recall", "ndcg", "mrr")
_METRIC_PATTERN = re.compile(r"^([a-z]+)(?:@(\d+))?$")

DEFAULT_METRICS: tuple[str, ...] = (
    "recall@10",
    "recall@100",
    "recall@1000",
    "recall@10000",  # §8.3, madral-kdd22: the retrieval task's Recall@10k
    "ndcg@5",  # §8.3, madral-kdd22: the ranking task's NDCG@5
    "ndcg@10",
    "mrr@10",
)


def _known_metrics() -> str:
    return ", ".join(f"{family}@k" for family in _CUTOFF_FAMILIES) + ", auc"


@dataclass(frozen=True)
class MetricSpec:
    """A metric family (recall, ndcg, mrr, auc) and its cutoff k; ``key`` reads e.g. ``recall@100``."""

    name: str
    k: int | None = None

    def __post_init__(self) -> None:
        if self.name not in DEFINITIONS:
            raise ValueError(f"unknown metric {self.name!r}; known metrics: {_known_metrics()}")
        if self.name in _CUTOFF_FAMILIES:
            if isinstance(self.k, bool) or not isinstance(self.k, int) or self.k <= 0:
                raise ValueError(
                    f"{self.name} needs a positive integer cutoff (e.g. {self.name}@10), got {self.k!r}"
                )
        elif self.k is not None:
            raise ValueError(f"{self.name} takes no cutoff, got {self.name}@{self.k}")

    @property
    def key(self) -> str:
        return self.name if self.k is None else f"{self.name}@{self.k}"

    @property
    def definition(self) -> str:
        return DEFINITIONS[self.name]

    def __str__(self) -> str:
        return self.key


def parse_metric(text: str) -> MetricSpec:
    """``"recall@100"`` -> ``MetricSpec("recall", 100)``; ``"auc"`` -> ``MetricSpec("auc", None)``."""
    match = _METRIC_PATTERN.match(text.strip().lower())
    if match is None:
        raise ValueError(f"cannot parse metric {text!r}; known metrics: {_known_metrics()}")
    family, cutoff = match.groups()
    return MetricSpec(family, None if cutoff is None else int(cutoff))


def parse_metrics(texts: Iterable[str]) -> tuple[MetricSpec, ...]:
    specs = tuple(parse_metric(text) for text in texts)
    keys = [spec.key for spec in specs]
    if len(set(keys)) != len(keys):
        raise ValueError(f"metrics repeat: {keys}")
    return specs


@dataclass(frozen=True)
class _JudgedRanking:
    """The judged products of one query: 1-based rank (inf when not retrieved), gain, positive flag."""

    ranks: np.ndarray
    gains: np.ndarray
    positive: np.ndarray


def _recall(judged: _JudgedRanking, k: int | None) -> float:
    assert k is not None
    relevant = int(judged.positive.sum())
    if relevant == 0:
        return UNDEFINED
    return float(np.count_nonzero(judged.ranks[judged.positive] <= k)) / relevant


def _mrr(judged: _JudgedRanking, k: int | None) -> float:
    assert k is not None
    if not judged.positive.any():
        return UNDEFINED
    first = float(judged.ranks[judged.positive].min())
    return 1.0 / first if first <= k else 0.0


def _ndcg(judged: _JudgedRanking, k: int | None) -> float:
    assert k is not None
    ideal = np.sort(judged.gains)[::-1][:k]
    ideal_dcg = float(np.sum(ideal / np.log2(np.arange(2, ideal.size + 2))))
    if ideal_dcg <= 0.0:
        return UNDEFINED
    in_top = judged.ranks <= k  # unjudged retrieved products add gain 0, so only judged ones are summed
    dcg = float(np.sum(judged.gains[in_top] / np.log2(judged.ranks[in_top] + 1.0)))
    return dcg / ideal_dcg


def _auc(judged: _JudgedRanking, k: int | None) -> float:
    # §8.3, madral-kdd22: AUC is calculated per query before averaging.
    positive_ranks = judged.ranks[judged.positive]
    negative_ranks = np.sort(judged.ranks[~judged.positive])
    if positive_ranks.size == 0 or negative_ranks.size == 0:
        return UNDEFINED
    # A smaller rank is better; unretrieved products all have rank inf and so tie with each other.
    below = negative_ranks.size - np.searchsorted(negative_ranks, positive_ranks, side="right")
    tied = np.searchsorted(negative_ranks, positive_ranks, side="right") - np.searchsorted(
        negative_ranks, positive_ranks, side="left"
    )
    wins = float(below.sum()) + 0.5 * float(tied.sum())
    return wins / (positive_ranks.size * negative_ranks.size)


_METRIC_FUNCTIONS: dict[str, Callable[[_JudgedRanking, int | None], float]] = {
    "recall": _recall,
    "ndcg": _ndcg,
    "mrr": _mrr,
    "auc": _auc,
}


def check_depth(metrics: Sequence[MetricSpec], depth: int | None) -> None:
    """Refuse cutoffs deeper than the retrieval depth: recall@10000 of a 1000-deep run is recall@1000."""
    if depth is None:
        return
    too_deep = [spec.key for spec in metrics if spec.k is not None and spec.k > depth]
    if too_deep:
        raise ValueError(f"{too_deep} exceed the retrieval depth ({depth})")


def evaluate_query(
    ranked_product_ids: Sequence[str],
    judgments: Mapping[str, int],
    metrics: Sequence[MetricSpec],
    rule: RelevanceRule,
    depth: int | None = None,
) -> dict[str, float]:
    """Every metric of one query, keyed by ``spec.key``; ``nan`` where the metric is undefined.

    ``depth`` is the depth the retriever was asked for (e.g. 10000, §8.3, madral-kdd22); when
    given, a deeper cutoff or a longer ranking is an error. Leave it None for re-ranking judged products.
    """
    check_depth(metrics, depth)
    if depth is not None and len(ranked_product_ids) > depth:
        raise ValueError(f"ranking holds {len(ranked_product_ids)} products, more than depth={depth}")
    position = {product_id: rank for rank, product_id in enumerate(ranked_product_ids, start=1)}
    if len(position) != len(ranked_product_ids):
        raise ValueError("ranked_product_ids repeats a product")
    ranks = [position.get(product_id, math.inf) for product_id in judgments]
    return evaluate_ranks(judgments, ranks, metrics, rule)


def evaluate_ranks(
    judgments: Mapping[str, int],
    ranks: Sequence[float] | np.ndarray,
    metrics: Sequence[MetricSpec],
    rule: RelevanceRule,
) -> dict[str, float]:
    """Every metric of one query from the 1-based rank of each judged product (inf: not retrieved).

    ``ranks`` follows the iteration order of ``judgments``. This is `evaluate_query` for callers that
    already know where the judged products are (the evaluation stage finds them by corpus row), so a
    10,000-deep ranking never has to become a list of product ids.
    """
    grades = []
    for product_id, grade in judgments.items():
        if isinstance(grade, bool) or not isinstance(grade, Integral):
            raise ValueError(f"grade of {product_id!r} must be an integer, got {grade!r}")
        grades.append(int(grade))
    judged = _JudgedRanking(
        ranks=np.asarray(ranks, dtype=np.float64),
        gains=np.array([rule.gain(grade) for grade in grades], dtype=np.float64),
        positive=np.array([rule.is_positive(grade) for grade in grades], dtype=bool),
    )
    if judged.ranks.shape != judged.gains.shape:
        raise ValueError(f"{judged.ranks.size} ranks for {judged.gains.size} judged products")
    return {spec.key: _METRIC_FUNCTIONS[spec.name](judged, spec.k) for spec in metrics}


@dataclass(frozen=True)
class MetricMean:
    """The mean of one metric over the ``count`` queries where it is defined; ``undefined`` were skipped."""

    mean: float
    count: int
    undefined: int = 0

    def __post_init__(self) -> None:
        if self.count < 0 or self.undefined < 0:
            raise ValueError(f"counts must be >= 0, got count={self.count}, undefined={self.undefined}")
        if (self.count == 0) != math.isnan(self.mean):
            raise ValueError(
                f"mean must be nan exactly when count is 0, got mean={self.mean}, count={self.count}"
            )


def aggregate(per_query: Iterable[Mapping[str, object]]) -> dict[str, MetricMean]:
    """Mean of each metric over the queries where it is defined (a ``query_id`` key is ignored)."""
    values: dict[str, list[float]] = {}
    undefined: dict[str, int] = {}
    for row in per_query:
        for key, value in row.items():
            if key == "query_id":
                continue
            if isinstance(value, bool) or not isinstance(value, Real):
                raise ValueError(f"{key} must be a number (nan when undefined), got {value!r}")
            values.setdefault(key, [])
            undefined.setdefault(key, 0)
            if math.isnan(value):
                undefined[key] += 1
            else:
                values[key].append(float(value))
    return {
        key: MetricMean(
            mean=math.fsum(found) / len(found) if found else UNDEFINED,
            count=len(found),
            undefined=undefined[key],
        )
        for key, found in values.items()
    }


__all__ = [
    "DEFAULT_METRICS",
    "DEFINITIONS",
    "ESCI_RELEVANCE",
    "UNDEFINED",
    "MetricMean",
    "MetricSpec",
    "RelevanceRule",
    "aggregate",
    "check_depth",
    "evaluate_query",
    "evaluate_ranks",
    "paired_t_test",
    "parse_metric",
    "parse_metrics",
]
