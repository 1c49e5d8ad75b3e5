"""Which cut-offs an evaluation may report, given how deep it searched and how big the corpus is.

A ranking of the top ``depth`` products says nothing about ranks below ``depth``: recall@1000 of a
100-deep search is recall@100 under a false name. So a cut-off deeper than the search is *dropped*,
with a warning naming it and the depth, and written down in metrics.json and the manifest; the search is
never widened behind the user's back (it costs time and memory in proportion to the depth). Asking for a
deeper --depth is how to get the metric.

The corpus is different: a search as deep as the corpus ranks every product, so recall@10000 over 3,000
products is exactly recall@3000, and it is reported under that name (`cap_cutoffs`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from evaluation.metrics import MetricSpec

POLICY = "drop"  # what happens to a cut-off deeper than --depth; written next to the numbers


def cap_cutoffs(metrics: Sequence[MetricSpec], corpus_size: int) -> tuple[MetricSpec, ...]:
    """Cutoffs deeper than the corpus become its size: recall@10000 over 3,000 products is recall@3000."""
    return tuple(dict.fromkeys(_cap(spec, corpus_size) for spec in metrics))


def _cap(spec: MetricSpec, corpus_size: int) -> MetricSpec:
    return spec if spec.k is None or spec.k <= corpus_size else MetricSpec(spec.name, corpus_size)


@dataclass(frozen=True)
class CutoffPlan:
    """The metrics to report and the depth to search, and what happened to the other requested metrics."""

    requested_depth: int
    corpus_size: int
    metrics: tuple[MetricSpec, ...]
    dropped: tuple[str, ...] = ()  # requested keys deeper than the search
    capped: dict[str, str] = field(default_factory=dict)  # requested key -> reported key (corpus cap)

    @property
    def depth(self) -> int:
        return min(self.requested_depth, self.corpus_size)

    def warning(self) -> str | None:
        """One line naming the dropped metrics, the depth searched and the flag that would report them."""
        if not self.dropped:
            return None
        deepest = max(int(key.split("@")[1]) for key in self.dropped)
        return (
            f"not reported: {', '.join(self.dropped)}: deeper than --depth {self.requested_depth}, "
            f"the depth searched (a metric at k > depth would be computed on {self.depth} results); "
            f"pass --depth {min(deepest, self.corpus_size)} to report them"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "policy": POLICY,
            "depth": self.depth,
            "requested_depth": self.requested_depth,
            "corpus_size": self.corpus_size,
            "dropped": list(self.dropped),
            "capped_to_corpus": dict(self.capped),
        }


def plan_cutoffs(metrics: Sequence[MetricSpec], depth: int, corpus_size: int) -> CutoffPlan:
    """Cap cut-offs at the corpus size, then drop those still deeper than the search (see module doc).

    Nothing is dropped when ``depth`` reaches the corpus: the whole corpus is ranked. Raises ValueError
    when nothing would be left to report.
    """
    if isinstance(depth, bool) or not isinstance(depth, int) or depth < 1:
        raise ValueError(f"--depth must be a positive integer, got {depth!r}")
    if corpus_size < 1:
        raise ValueError("the corpus is empty: there is nothing to search")
    searched = min(depth, corpus_size)
    kept: list[MetricSpec] = []
    dropped: list[str] = []
    capped: dict[str, str] = {}
    for spec in metrics:
        reported = _cap(spec, corpus_size)
        if reported.k is not None and reported.k > searched:
            dropped.append(spec.key)
            continue
        if reported != spec:
            capped[spec.key] = reported.key
        if reported not in kept:
            kept.append(reported)
    if not kept:
        raise ValueError(
            f"every requested metric ({', '.join(dropped)}) is deeper than --depth {depth}; "
            f"pass a larger --depth or ask for smaller cut-offs"
        )
    return CutoffPlan(depth, corpus_size, tuple(kept), tuple(dropped), capped)


__all__ = ["POLICY", "CutoffPlan", "cap_cutoffs", "plan_cutoffs"]
