"""The nightly's quality guard: is tonight's ranking at least as good as last night's, as the backbone
used zero-shot, and as the BM25 + zero-shot hybrid a team would build instead?

With BM25 in the index (the nightly's default) the ranking guarded is the one a server gets, the dense
ranking fused with BM25; last night's evaluation is compared like with like (a night that reported its
dense ranking is compared with tonight's dense ranking).

Every stage can succeed while retrieval got worse: a retrained or adapted model, a vocabulary extended,
another precision. A new user's nightly printed "published" while its own zero-shot file showed the
model significantly below the backbone (NDCG@10 0.874 against 0.923, issue 51). So after the evaluate
stage the nightly compares tonight's per-query metrics with last night's evaluation and with the
zero-shot row (computed every night unless `--evaluate_flags '--zero_shot false'`), by a paired
t-test over the queries both judged (`evaluation.comparison`). Tonight is *below* a baseline on a metric
of `GUARDED_METRICS` when it is lower by more than `MARGIN` with p < `MAX_PVALUE`.

`--quality_guard warn` (the default) prints the verdict in one line and publishes; `refuse` does not
publish a night that is below (the run is finished, LATEST is not moved); `off` skips the check.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from apache_beam.io.filesystems import FileSystems

from evaluation.comparison import ComparisonReport, compare_query_rows
from evaluation.significance import SIGNIFICANCE
from pipelines.evaluate.lexical import HYBRID
from pipelines.evaluate.report import PER_QUERY_FILE, read_per_query
from pipelines.layout import LEXICAL_FOLDER, ZERO_SHOT_FOLDER
from pipelines.nightly.publish_guard import PublishRefused
from schemas.manifest import MANIFEST_FILE

GUARDED_METRICS = ("ndcg@10", "recall@100")
MAX_PVALUE = SIGNIFICANCE
# A loss smaller than a point of the metric is not acted on, however many queries make it significant.
MARGIN = 0.01
GUARD_MODES = ("warn", "refuse", "off")


class QualityRefused(PublishRefused):
    """Tonight is significantly below last night's run or the zero-shot backbone (--quality_guard refuse)."""


@dataclass(frozen=True)
class QualityCheck:
    """Tonight's evaluation against each baseline found, and what the guard does about a loss."""

    mode: str
    # (what the baseline is, the comparison with A = the baseline, B = tonight)
    comparisons: tuple[tuple[str, ComparisonReport], ...] = ()

    def __post_init__(self) -> None:
        if self.mode not in GUARD_MODES:
            raise ValueError(f"--quality_guard must be one of {', '.join(GUARD_MODES)}, got {self.mode!r}")

    def losses(self) -> list[str]:
        """One phrase per guarded metric on which tonight is below a baseline."""
        found = []
        for label, report in self.comparisons:
            for m in report.metrics:
                if m.metric in GUARDED_METRICS and m.delta < -MARGIN and m.pvalue < MAX_PVALUE:
                    found.append(
                        f"{m.metric} {m.mean_b:.3f} against {m.mean_a:.3f} for {label} "
                        f"(p {m.pvalue:.2g}, {m.queries} queries)"
                    )
        return found

    def verdict(self) -> str:
        """The one line the nightly prints and the run manifest keeps."""
        if self.mode == "off":
            return "quality guard: off"
        if not self.comparisons:
            return "quality guard: nothing to compare with yet (no earlier evaluation, no zero-shot row)"
        losses = self.losses()
        if losses:
            action = "not published (--quality_guard refuse)" if self.mode == "refuse" else "published anyway"
            return f"quality guard: tonight is significantly below: {'; '.join(losses)}; {action}"
        compared = [
            f"{label} on {', '.join(names)} ({report.common_queries} queries)"
            for label, report in self.comparisons
            if (names := self._tested(report))
        ]
        if not compared:
            return "quality guard: not compared (no guarded metric testable on queries both runs judged)"
        return f"quality guard: not below {' nor '.join(compared)}"

    @staticmethod
    def _tested(report: ComparisonReport) -> list[str]:
        """The guarded metrics a comparison could test (a p-value: at least two paired queries)."""
        return [m.metric for m in report.metrics if m.metric in GUARDED_METRICS and not math.isnan(m.pvalue)]

    def to_dict(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "verdict": self.verdict(),
            "below": self.losses(),
            "comparisons": {label: report.to_dict() for label, report in self.comparisons},
        }

    def enforce(self) -> None:
        """Raise `QualityRefused` when the guard refuses tonight's run."""
        if self.mode == "refuse" and self.losses():
            raise QualityRefused(
                f"{self.verdict()}; the run is finished: rerun with --quality_guard warn to publish it"
            )


def reported_ranking(evaluation: str) -> str:
    """Which ranking an evaluation folder reports: "fused" (dense + BM25, what a server gets) or a dense
    searcher's name; evaluations made before BM25 was served reported a dense one."""
    path = FileSystems.join(evaluation, MANIFEST_FILE)
    if not FileSystems.exists(path):
        return "dense"
    with FileSystems.open(path) as handle:
        return str((json.loads(handle.read()).get("ranking") or {}).get("reported", "dense"))


def _same_ranking(evaluation: str, other: str) -> str:
    """Tonight's folder of the ranking `other` reports: its dense one (dense/) when `other` was dense and
    tonight's reported ranking is the fused one, so last night is compared like with like."""
    tonight_fused, other_fused = reported_ranking(evaluation) == "fused", reported_ranking(other) == "fused"
    dense = FileSystems.join(evaluation, "dense")
    if tonight_fused and not other_fused and FileSystems.exists(FileSystems.join(dense, PER_QUERY_FILE)):
        return dense
    return evaluation


def quality_check(mode: str, evaluation: str, previous: tuple[str, str] | None) -> QualityCheck:
    """Compare the evaluation folder `evaluation` (the ranking it reports: the served one when the index
    carries BM25) with `previous` ((run id, its evaluation folder), when it exists), with its own zero-shot
    row, and with the BM25 + zero-shot hybrid when it has them."""
    if mode == "off":
        return QualityCheck(mode)
    # (what the baseline is, its folder, tonight's folder it is compared with)
    baselines = []
    if previous is not None:
        last_night = (f"last night (run {previous[0]})", previous[1])
        baselines.append((*last_night, _same_ranking(evaluation, previous[1])))
    zero_shot = FileSystems.join(evaluation, ZERO_SHOT_FOLDER, "eval")
    baselines.append(("the backbone used zero-shot", zero_shot, evaluation))
    hybrid = FileSystems.join(evaluation, LEXICAL_FOLDER, HYBRID)
    baselines.append(("the BM25 + zero-shot hybrid", hybrid, evaluation))
    comparisons = []
    for label, folder, ours in baselines:
        if not FileSystems.exists(FileSystems.join(folder, PER_QUERY_FILE)):
            continue
        tonight, names = read_per_query(ours)
        rows, their_names = read_per_query(folder)
        comparisons.append((label, compare_query_rows(label, rows, their_names, "tonight", tonight, names)))
    return QualityCheck(mode, tuple(comparisons))


__all__ = [
    "GUARDED_METRICS",
    "GUARD_MODES",
    "MARGIN",
    "MAX_PVALUE",
    "QualityCheck",
    "QualityRefused",
    "quality_check",
]
