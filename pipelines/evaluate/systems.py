"""Which rankings an evaluation scores: the dense one, and with an index that carries BM25 the one a server
gets from it (dense fused with BM25 by reciprocal rank, `index_builder.lexical.hybrid_search`) and BM25's.

Every searcher of the evaluation (`--searcher`, and exact search beside it with --compare_exact) is
searched part by part (`pipelines.evaluate.sharded`); the primary searcher also ranks by BM25 and fuses
when there is BM25 to fuse. Each (searcher, system) pair is a branch of the report: the dense ranking
keeps the searcher's name ("ann", "exact"), the others are "bm25" and "fused". The primary branch goes
to metrics.json and per_query.parquet (what the quality guard and the morning report read); each other
system of the primary searcher goes to its own folder beside them (dense/, bm25/, fused/).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from apache_beam.io.filesystems import FileSystems

from evaluation import RelevanceRule, aggregate, write_metrics
from pipelines.evaluate.corpus_parts import CorpusPart, embedding_parts, index_carries_bm25, index_parts
from pipelines.evaluate.searchers import SearcherSpec
from pipelines.evaluate.sharded import BM25, DENSE, FUSED
from pipelines.storage.local_copies import local_output

if TYPE_CHECKING:
    from pipelines.evaluate.config import EvaluateConfig

# What servers get from an index with BM25 (`madr search`, `index_builder.lexical.hybrid_search`).
SERVED_RANKING = "the dense ranking fused with the index's BM25 by reciprocal rank (k 60)"


def bm25_index(config: EvaluateConfig) -> str | None:
    """The index whose BM25 this evaluation fuses with: the config's `lexical_index`, else --index when it
    carries BM25; None with --lexical false."""
    if config.evaluate.lexical == "false":
        return None
    index = config.lexical_index or config.evaluate.index
    return index if index and index_carries_bm25(index) else None


def corpus_parts(spec: SearcherSpec) -> list[CorpusPart]:
    """A searcher's parts: the index's shards, or the embed output's files."""
    return index_parts(spec.path) if spec.kind == "ann" else embedding_parts(spec.path)


@dataclass(frozen=True)
class SearcherSystems:
    """What one searcher of the evaluation scores: its systems and the one its counters and run are for."""

    searcher: str
    systems: tuple[str, ...]
    primary: str

    def branch(self, system: str) -> str:
        """The report's name for a system of this searcher."""
        return self.searcher if system == DENSE else system


def searcher_systems(config: EvaluateConfig, searcher: str, is_primary: bool, fused: bool) -> SearcherSystems:
    """The primary searcher scores dense, BM25 and fused when there is BM25 (`fused`), reporting the fused
    ranking unless the config keeps the dense one primary; any other searcher its dense ranking only."""
    if not (is_primary and fused):
        return SearcherSystems(searcher, (DENSE,), DENSE)
    primary = config.primary_system or FUSED
    if primary not in (DENSE, FUSED):
        raise ValueError(f"primary_system must be {DENSE!r} or {FUSED!r}, got {primary!r}")
    return SearcherSystems(searcher, (DENSE, BM25, FUSED), primary)


def ranking_record(chosen: SearcherSystems, bm25: str | None, beside: Mapping[str, str]) -> dict[str, Any]:
    """What the evaluation's manifest and metrics say of the ranking they report."""
    fused = chosen.primary == "fused"
    return {
        "reported": chosen.branch(chosen.primary),
        "served": SERVED_RANKING if fused else f"the {chosen.searcher} search's dense ranking",
        "bm25_index": bm25,
        "beside": dict(beside),
    }


def write_beside(
    folder: str, chosen: SearcherSystems, rows: Mapping[str, list[dict[str, Any]]], rule: RelevanceRule
) -> dict[str, str]:
    """Each system of the primary searcher but its primary one into FOLDER/<system>/ (metrics.json and
    per_query.parquet); returns where each went."""
    written = {}
    for system in chosen.systems:
        if system == chosen.primary:
            continue
        target = FileSystems.join(folder, system)
        found = rows[chosen.branch(system)]
        with local_output(target) as local:
            write_metrics(local, aggregate(found), found, rule)
        written[system] = system
    return written


__all__ = [
    "SERVED_RANKING",
    "SearcherSystems",
    "bm25_index",
    "corpus_parts",
    "ranking_record",
    "searcher_systems",
    "write_beside",
]
