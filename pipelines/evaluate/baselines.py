"""The rows a trained model is measured against: the backbone used zero-shot, BM25, and their fusion.

Each is what a team could ship without madr (`pipelines.evaluate.zero_shot`,
`pipelines.evaluate.lexical`); the evaluation stage runs the ones its flags ask for after scoring the
model, and compares the model's per-query rows with each (paired t-tests).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import PipelineOptions

from evaluation import MetricSpec, RelevanceRule
from pipelines.evaluate.lexical import LexicalComparison, compare_with_lexical, wants_lexical
from pipelines.evaluate.systems import bm25_index
from pipelines.evaluate.zero_shot import ZeroShotComparison, compare_with_zero_shot, wants_zero_shot

if TYPE_CHECKING:
    from pipelines.evaluate.config import EvaluateConfig


@dataclass(frozen=True)
class BaselineComparisons:
    """What ran beside the model; None where the flags left a baseline out."""

    zero_shot: ZeroShotComparison | None = None
    lexical: LexicalComparison | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "zero_shot": self.zero_shot.to_dict() if self.zero_shot else None,
            "lexical": self.lexical.to_dict() if self.lexical else None,
        }

    def against(self) -> dict[str, Any]:
        """Each baseline's paired comparison with the model, metric by metric (A = the baseline)."""
        found = {"zero-shot": self.zero_shot.report} if self.zero_shot else {}
        found.update(self.lexical.reports if self.lexical else {})
        return {name: report.to_dict()["metrics"] for name, report in found.items()}

    def tables(self) -> str:
        """The printed comparisons, each after a blank line ("" when none ran)."""
        found = [part.table() for part in (self.zero_shot, self.lexical) if part is not None]
        return "".join(f"\n\n{table}" for table in found)


def compare_with_baselines(
    config: EvaluateConfig,
    folder: str,
    model_rows: Sequence[Mapping[str, Any]],
    model_searcher: str,
    scoring: tuple[Sequence[MetricSpec], int, RelevanceRule],
    beam_options: PipelineOptions | None,
    evaluate: Callable[[EvaluateConfig], object],
) -> BaselineComparisons:
    """Zero-shot (its own embed + evaluation through `evaluate`), then BM25 and the hybrid, as flagged.

    ``scoring`` is the model's (metrics, depth, relevance rule), so every row is scored the same way.
    """
    zero_shot = None
    with_zero_shot = wants_zero_shot(config)
    if with_zero_shot:
        zero_shot = compare_with_zero_shot(config, folder, model_rows, model_searcher, beam_options, evaluate)
    lexical = None
    bm25 = bm25_index(config)
    if wants_lexical(config, with_zero_shot, served=bool(bm25)):
        zero_shot_run = FileSystems.join(folder, zero_shot.folder, "eval") if zero_shot else None
        lexical = compare_with_lexical(config, folder, model_rows, scoring, zero_shot_run, bm25)
    return BaselineComparisons(zero_shot, lexical)


__all__ = ["BaselineComparisons", "compare_with_baselines"]
