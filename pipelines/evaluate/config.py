"""`madr evaluate`'s config: the query model, what to retrieve and score, where it writes, and its flags."""

from __future__ import annotations

from dataclasses import dataclass

from pipelines.settings.options import EvaluateSettings, ModelSettings, PredictionThreshold
from pipelines.settings.stage_config import StageOutput, nested, output_setting, setting


@dataclass(frozen=True, kw_only=True)
class EvaluateConfig(StageOutput):
    """One evaluation: the query model, what to retrieve and score, and where it writes (`StageOutput`).

    Drivers build it and call `evaluate_retrieval`; `madr evaluate` generates its flags from it (its own
    fields and its `nested` settings'). `products` (with `threshold`) adds the annotation quality on the
    products the model held out.
    """

    output: str = output_setting("Folder for metrics.json, the run file and the manifest, local or gs://")
    model: ModelSettings = nested()
    evaluate: EvaluateSettings = nested()
    products: str | None = setting(
        None,
        "Catalog Parquet file or glob: also report the model's aspect Accuracy@1/@3 on held-out products, "
        "query Accuracy@1, and the coverage and accuracy of predictions at --min_confidence",
    )
    threshold: PredictionThreshold = nested(PredictionThreshold)
    # Set by code, not flags. The index artifact whose BM25 is fused with this evaluation's dense ranking
    # (None: --index's, when it carries BM25): the zero-shot row's exact search fuses with the model's.
    lexical_index: str | None = None
    # The ranking reported as this evaluation's own (metrics.json, the quality guard): None is the served
    # one (fused with BM25 when there is BM25, else dense); "dense" keeps the dense one there and writes
    # the fused one to fused/ (the zero-shot row, whose fused ranking is the BM25 + zero-shot hybrid).
    primary_system: str | None = None


__all__ = ["EvaluateConfig"]
