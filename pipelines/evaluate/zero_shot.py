"""The zero-shot row: the bundled backbone, untrained, on the same queries as the model evaluated.

A team can skip madr and embed its catalog with sentence-transformers and the same MiniLM, so that
is the figure a trained model has to beat. With `--zero_shot` (the default whenever `--products` is
given) the evaluation embeds the catalog a second time with the zero-shot model
(`pipelines.zero_shot`), searches it exactly, scores it the same way, and compares the two query by
query (`evaluation.comparison`: mean difference and paired t-test). With `--zero_shot_previous` (the
nightly passes last night's) only new and changed products are embedded again. The model's side is its exact
search when the run has one, so the index's recall loss is not counted against the model.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import PipelineOptions

from evaluation.comparison import ComparisonReport, by_query, compare_query_rows
from model import load_config
from model.registry import ZERO_SHOT
from pipelines.embed.stage import EmbedConfig, embed_catalog
from pipelines.evaluate.report import read_per_query
from pipelines.evaluate.systems import bm25_index
from pipelines.layout import ZERO_SHOT_FILE, ZERO_SHOT_FOLDER
from pipelines.settings.options import EmbedSettings
from pipelines.zero_shot import zero_shot_model

if TYPE_CHECKING:
    from pipelines.evaluate.config import EvaluateConfig

LOGGER = logging.getLogger(__name__)


def wants_zero_shot(config: EvaluateConfig) -> bool:
    """--zero_shot as given, else on whenever --products names the catalog to embed."""
    flag = config.evaluate.zero_shot
    if flag == "true" and not config.products:
        raise ValueError("--zero_shot needs --products: the zero-shot model embeds the catalog itself")
    if flag is None:
        return bool(config.products) and load_config(config.model.model).variant != ZERO_SHOT
    return flag == "true"


@dataclass(frozen=True)
class ZeroShotComparison:
    """The model against the zero-shot backbone: A is zero-shot, B the model (delta = model − zero-shot)."""

    report: ComparisonReport
    model_searcher: str
    folder: str = ZERO_SHOT_FOLDER  # inside the evaluation folder: its embeddings/ and eval/

    def to_dict(self) -> dict[str, Any]:
        return {"model_searcher": self.model_searcher, "folder": self.folder, **self.report.to_dict()}

    def table(self) -> str:
        lines = self.report.format().splitlines()
        intro = (
            f"Against the backbone used zero-shot (mean pooling, untrained; A = zero-shot, B = this model's "
            f"{self.model_searcher} search; its run in {self.folder}/)"
        )
        return "\n".join([intro, *lines[2:]])


def compare_with_zero_shot(
    config: EvaluateConfig,
    folder: str,
    model_rows: Sequence[Mapping[str, Any]],
    model_searcher: str,
    beam_options: PipelineOptions | None,
    evaluate: Callable[[EvaluateConfig], object],
) -> ZeroShotComparison:
    """Embed --products with the zero-shot model into FOLDER/zero_shot/, evaluate it exactly with the
    same queries, judgments, metrics and depth (`evaluate` runs the stage with the caller's relevance
    rule), and compare it with `model_rows`."""
    trained = load_config(config.model.model)
    settings = dataclasses.replace(
        config.model,
        model=zero_shot_model(trained.max_query_length, trained.max_document_length),
        precision="fp32",
    )
    base = FileSystems.join(folder, ZERO_SHOT_FOLDER)
    embeddings = FileSystems.join(base, "embeddings")
    previous = config.evaluate.zero_shot_previous
    LOGGER.info(
        "zero-shot baseline: embedding %s with %s%s",
        config.products,
        settings.model,
        f", reusing the unchanged products' rows of {previous}" if previous else "",
    )
    # The catalog's bad records were judged by the embed run that made the model's vectors (its
    # --max_dead_letter_fraction); the baseline dead-letters the same ones and is not the place to fail.
    embed = EmbedSettings(str(config.products), previous=previous, max_dead_letter_fraction=1.0)
    embed_catalog(EmbedConfig(model=settings, embed=embed, output=embeddings), beam_options)
    evaluation = FileSystems.join(base, "eval")
    # With an index that carries BM25, the zero-shot search is fused with that BM25 too (into eval/fused/):
    # the BM25 + zero-shot hybrid, without indexing the catalog again.
    bm25 = bm25_index(config)
    evaluate(
        dataclasses.replace(
            config,
            model=settings,
            evaluate=dataclasses.replace(
                config.evaluate,
                searcher="exact",
                index=None,
                embeddings=embeddings,
                compare_exact="false",
                zero_shot="false",
                lexical=None if bm25 else "false",
            ),
            output=evaluation,
            products=None,
            lexical_index=bm25,
            primary_system="dense",
        )
    )
    zero_rows, zero_names = read_per_query(evaluation)
    rows = by_query(model_rows)
    names = [name for name in zero_names if any(name in row for row in rows.values())]
    report = compare_query_rows("zero-shot backbone", zero_rows, zero_names, "model", rows, names)
    comparison = ZeroShotComparison(report, model_searcher)
    with FileSystems.create(FileSystems.join(folder, ZERO_SHOT_FILE)) as handle:
        handle.write(json.dumps(comparison.to_dict(), indent=2).encode("utf-8"))
    return comparison
