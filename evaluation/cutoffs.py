"""Which cut-offs an evaluation may report, given how deep it searched and how big the corpus is.

A ranking of the top ``depth`` products says nothing about ranks below ``depth``: recall@1000 of a
100-deep search is recall@100 under a false name. So a cut-off deeper than the search is *dropped*,
with a warning naming it and the depth, and written down in metrics.json and the manifest; the search is
never widened behind the user's back (it costs time and memory in proportion to the depth). Asking for a
deeper --depth is how to get the metric.

The corpus is different: a search as deep as the corpus ranks every product, so recall@10000 over 3,000
products is computed on the whole ranking, as its definition says. It keeps its name, so nights whose
catalogs differ in size report the same metrics and can be compared; the plan records the corpus size and
which cut-offs reach past it (`ranks_whole_corpus`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from evaluation.metrics import MetricSpec

POLICY = "drop"  # what happens to a cut-off deeper than --depth; written next to the numbers


@dataclass(frozen=True)
class CutoffPlan:
    """The metrics to report and the depth to search, and what happened to the other requested metrics."""

    requested_depth: int
    corpus_size: int
    metrics: tuple[MetricSpec, ...]
    dropped: tuple[str, ...] = ()  # requested keys deeper than the search
    whole_corpus: tuple[str, ...] = ()  # reported keys deeper than the corpus: all of it is ranked

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
            "ranks_whole_corpus": list(self.whole_corpus),
        }


def plan_cutoffs(metrics: Sequence[MetricSpec], depth: int, corpus_size: int) -> CutoffPlan:
    """Drop the cut-offs deeper than the search, unless the search ranks the whole corpus (module doc).

    Nothing is dropped when ``depth`` reaches the corpus. Raises ValueError when nothing would be left.
    """
    if isinstance(depth, bool) or not isinstance(depth, int) or depth < 1:
        raise ValueError(f"--depth must be a positive integer, got {depth!r}")
    if corpus_size < 1:
        raise ValueError("the corpus is empty: there is nothing to search")
    searched = min(depth, corpus_size)
    kept: list[MetricSpec] = []
    dropped: list[str] = []
    for spec in metrics:
        if spec.k is not None and spec.k > searched and searched < corpus_size:
            dropped.append(spec.key)
        elif spec not in kept:
            kept.append(spec)
    if not kept:
        raise ValueError(
            f"every requested metric ({', '.join(dropped)}) is deeper than --depth {depth}; "
            f"pass a larger --depth or ask for smaller cut-offs"
        )
    whole = tuple(spec.key for spec in kept if spec.k is not None and spec.k > corpus_size)
    return CutoffPlan(depth, corpus_size, tuple(kept), tuple(dropped), whole)


__all__ = ["POLICY", "CutoffPlan", "plan_cutoffs"]
