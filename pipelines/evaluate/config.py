"""`madr evaluate`'s config: the query model, what to retrieve and score, where it writes, and its flags."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field

from pipelines.dead_letter_limit import DeadLetterOptions
from pipelines.depth import DepthOptions
from pipelines.options import (
    EvaluateOptions,
    EvaluateSettings,
    ModelOptions,
    ModelSettings,
    OutputOptions,
    OverwriteOptions,
    PredictionThreshold,
    ThresholdOptions,
    VerifyOptions,
    add_stage_arguments,
)
from pipelines.stage_config import ParsedFlags, StageOutput, config_from_values, parsed_flags, require_flags


@dataclass(frozen=True, kw_only=True)
class EvaluateConfig(StageOutput):
    """One evaluation: the query model, what to retrieve and score, and where it writes (`StageOutput`).

    Drivers build it and call `evaluate_retrieval`; `madr evaluate` builds it from its flags
    (`from_options`). `products` (with `threshold`) adds the annotation quality on the
    products the model held out.
    """

    model: ModelSettings
    evaluate: EvaluateSettings
    products: str | None = None
    threshold: PredictionThreshold = field(default_factory=PredictionThreshold)
    # Set by code, not flags. The index artifact whose BM25 is fused with this evaluation's dense ranking
    # (None: --index's, when it carries BM25): the zero-shot row's exact search fuses with the model's.
    lexical_index: str | None = None
    # The ranking reported as this evaluation's own (metrics.json, the quality guard): None is the served
    # one (fused with BM25 when there is BM25, else dense); "dense" keeps the dense one there and writes
    # the fused one to fused/ (the zero-shot row, whose fused ranking is the BM25 + zero-shot hybrid).
    primary_system: str | None = None

    @classmethod
    def from_options(cls, options: ParsedFlags) -> EvaluateConfig:
        """The config the flags of `madr evaluate` describe; names the required flags that are missing."""
        values = parsed_flags(options)
        require_flags(values, "queries", "judgments", "model", "output")
        return cls(
            model=config_from_values(ModelSettings, values),
            evaluate=config_from_values(EvaluateSettings, values),
            products=values.get("products"),
            threshold=config_from_values(PredictionThreshold, values),
            **StageOutput.values_from(values),
        )

    @staticmethod
    def add_arguments(parser: argparse.ArgumentParser) -> None:
        """The flags of `madr evaluate` (and of the nightly's evaluate stage)."""
        add_stage_arguments(
            parser,
            ModelOptions,
            OutputOptions,
            EvaluateOptions,
            DepthOptions,
            ThresholdOptions,
            VerifyOptions,
            OverwriteOptions,
            DeadLetterOptions,
        )
        parser.add_argument(
            "--products",
            help="Catalog Parquet file or glob: also report the model's aspect Accuracy@1/@3 on held-out "
            "products, query Accuracy@1, and the coverage and accuracy of predictions at --min_confidence",
        )


__all__ = ["EvaluateConfig"]
