"""Search settings per depth: what one index artifact does for a search of k neighbours.

A search server asks for 10 or 100 neighbours thousands of times a second; the nightly evaluation asks
for 10,000 once a night. One ScaNN setting cannot serve both: settings that reach the recall target at
k = 10,000 open most of the leaves and re-rank tens of thousands of candidates, and at 1M products they
made the tree slower than exact scoring at that depth, so the whole tree was thrown away even though it
answered k = 10 6.5 times faster than exact scoring (bench/results/nightly_scale.json, 27 Nov).

A `SearchSchedule` holds one `DepthEntry` per listed depth (10, 100, 1,000 and depth by default):
whether the tree or exact scoring serves it, the tree's cheapest `leaves_to_search` /
`pre_reorder_num_neighbors` that reached the target recall there, the recall measured, and both speeds.
`ScannIndex.search(queries, k)` uses the entry of the smallest listed depth >= k (`entry_for`). It is
written into the manifest's ``recall`` entry as ``schedule``; `index_builder.depth_tuning` makes it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

# The depths a build tunes for besides depth: a server's first page, a re-ranker's candidate list, and
# a deep candidate set. `IndexSettings.serving_depths` is the flag that changes them.
DEFAULT_SERVING_DEPTHS = (10, 100, 1_000)
TREE = "tree"
EXACT = "exact"


def schedule_depths(serving_depths: Iterable[int], depth: int, num_vectors: int) -> tuple[int, ...]:
    """The depths a schedule lists: each serving depth up to depth, and depth, each capped at n - 1."""
    cap = max(1, num_vectors - 1)
    depths = {min(int(d), cap) for d in serving_depths if 1 <= int(d) <= depth}
    depths.add(min(depth, cap))
    return tuple(sorted(depths))


def parse_depths(text: str | Sequence[int]) -> tuple[int, ...]:
    """`--serving_depths 10,100,1000` as a sorted tuple of positive ints; ValueError names a bad one."""
    parts = text.split(",") if isinstance(text, str) else list(text)
    depths = []
    for part in parts:
        try:
            depth = int(str(part).strip())
        except ValueError:
            raise ValueError(f"--serving_depths takes comma-separated ints, got {part!r}") from None
        if depth < 1:
            raise ValueError(f"--serving_depths must be >= 1, got {depth}")
        depths.append(depth)
    if not depths:
        raise ValueError("--serving_depths needs at least one depth, e.g. 10,100,1000")
    return tuple(sorted(set(depths)))


@dataclass(frozen=True)
class DepthEntry:
    """How searches of up to ``depth`` neighbours are answered, and what the build measured there.

    ``searcher`` is "tree" or "exact". The tree's settings and ``tree_recall`` are those of its cheapest
    search that reached the target (None where none did); ``tree_qps`` / ``exact_qps`` are queries/s
    of both at this depth on the same held-out corpus vectors (None where not timed).
    """

    depth: int
    searcher: str
    leaves_to_search: int | None
    pre_reorder_num_neighbors: int | None
    tree_recall: float | None
    tree_qps: float | None
    exact_qps: float | None
    reason: str

    def __post_init__(self) -> None:
        if self.searcher not in (TREE, EXACT):
            raise ValueError(f"a schedule entry's searcher is {TREE!r} or {EXACT!r}, got {self.searcher!r}")
        if self.depth < 1:
            raise ValueError(f"a schedule entry's depth must be >= 1, got {self.depth}")
        if self.searcher == TREE and self.pre_reorder_num_neighbors is None and self.leaves_to_search is None:
            raise ValueError(f"depth {self.depth} is served by the tree but names no search settings")

    @property
    def recall(self) -> float | None:
        """recall@depth of what serves this depth: 1.0 for exact scoring."""
        return 1.0 if self.searcher == EXACT else self.tree_recall

    @property
    def speedup(self) -> float | None:
        """How many times exact scoring's queries/s the serving searcher answers."""
        if not self.tree_qps or not self.exact_qps:
            return None
        return (self.tree_qps if self.searcher == TREE else self.exact_qps) / self.exact_qps

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DepthEntry:
        return cls(**{name: data.get(name) for name in cls.__dataclass_fields__})


@dataclass(frozen=True)
class SearchSchedule:
    """Depth entries sorted by depth; `entry_for(k)` is the one a search of k neighbours uses."""

    entries: tuple[DepthEntry, ...]

    def __post_init__(self) -> None:
        depths = [entry.depth for entry in self.entries]
        if not depths or depths != sorted(set(depths)):
            raise ValueError(f"a schedule needs distinct depths in increasing order, got {depths}")

    def entry_for(self, k: int) -> DepthEntry:
        """The entry of the smallest listed depth >= k; the deepest entry beyond it."""
        for entry in self.entries:
            if entry.depth >= k:
                return entry
        return self.entries[-1]

    @property
    def uses_tree(self) -> bool:
        return any(entry.searcher == TREE for entry in self.entries)

    @property
    def uses_exact(self) -> bool:
        return any(entry.searcher == EXACT for entry in self.entries)

    @property
    def serving_default(self) -> DepthEntry | None:
        """The tree settings a plain ScaNN caller gets: the shallowest entry with tree settings."""
        return next((e for e in self.entries if e.tree_recall is not None), None)

    def to_list(self) -> list[dict[str, Any]]:
        return [entry.to_dict() for entry in self.entries]

    @classmethod
    def from_list(cls, rows: Sequence[dict[str, Any]] | None) -> SearchSchedule | None:
        if not rows:
            return None
        return cls(tuple(DepthEntry.from_dict(dict(row)) for row in rows))

    def summary(self) -> str:
        """One line per depth, for a log or the CLI."""
        lines = []
        for e in self.entries:
            tree = "tree cannot reach the target"
            if e.tree_recall is not None:
                tree = (
                    f"tree {e.leaves_to_search} leaves, re-rank {e.pre_reorder_num_neighbors}: "
                    f"recall {e.tree_recall:.3f}"
                )
            speeds = ""
            if e.tree_qps and e.exact_qps:
                speeds = f", {e.tree_qps:,.0f} vs exact {e.exact_qps:,.0f} queries/s"
            lines.append(f"k<={e.depth:,}: {e.searcher} ({tree}{speeds})")
        return "; ".join(lines)


__all__ = [
    "DEFAULT_SERVING_DEPTHS",
    "EXACT",
    "TREE",
    "DepthEntry",
    "SearchSchedule",
    "parse_depths",
    "schedule_depths",
]
