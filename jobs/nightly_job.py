"""`madr nightly`'s configuration: the job's inputs and settings, and the config of each stage it runs
(`NightlyJob.embed_config`, `index_config`, `evaluate_config`), built from the job's flags and each
stage's own (`--embed_flags`, `--index_flags`, `--evaluate_flags`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import PipelineOptions

from pipelines.beam_flags import flag_names, refused_flags
from pipelines.depth import OLD_FLAG_NAMES
from pipelines.embed.stage import EmbedConfig
from pipelines.evaluate.stage import EvaluateConfig
from pipelines.index.config import IndexBuildConfig
from pipelines.nightly.latest import LATEST
from pipelines.nightly.publish_guard import DEFAULT_MAX_SHRINK
from pipelines.nightly.quality_guard import GUARD_MODES
from pipelines.options import (
    EmbedSettings,
    EvaluateSettings,
    IndexSettings,
    ModelSettings,
    PredictionThreshold,
)
from pipelines.stage_config import StageOutput, config_from_values, config_values


@dataclass(frozen=True)
class NightlyJob:
    catalog: str
    model: str
    out: str
    run_id: str
    queries: str | None = None
    judgments: str | None = None
    # Every index flag of `madr nightly` (--num_leaves, --soar_lambda, ...): the parser consumes them, so
    # they reach the index stage here and not through `beam_args`.
    index: IndexSettings = field(default_factory=IndexSettings)
    beam_args: tuple[str, ...] = ()
    # Beam and stage flags for one stage only, after `beam_args` (a flag given in both takes the stage's):
    # embed on GPU workers or in int8 while index and evaluate do not, say.
    embed_flags: tuple[str, ...] = ()
    index_flags: tuple[str, ...] = ()
    evaluate_flags: tuple[str, ...] = ()
    max_shrink: float = DEFAULT_MAX_SHRINK
    allow_shrink: bool = False
    enrich: bool = False
    export_vertex: bool = False
    # Discard the run folder of `run_id` when it was started, and not published, for another catalog.
    restart_run: bool = False
    # Tonight against last night and zero-shot before publishing: warn, refuse or off
    # (`pipelines.nightly.quality_guard`).
    quality_guard: str = "warn"
    # The morning report (`madr report`) written into the run folder at the end, also of a run that stops.
    report: bool = True

    def __post_init__(self) -> None:
        if not self.run_id or "/" in self.run_id or self.run_id == LATEST:
            raise ValueError(f"run id {self.run_id!r} must be a non-empty name without '/' and not {LATEST}")
        if not 0 <= self.max_shrink <= 1:
            raise ValueError(f"--max_shrink must be in [0, 1], got {self.max_shrink}")
        if (self.queries is None) != (self.judgments is None):
            raise ValueError("give both --queries and --judgments to evaluate, or neither")
        if self.quality_guard not in GUARD_MODES:
            raise ValueError(
                f"--quality_guard must be one of {', '.join(GUARD_MODES)}, got {self.quality_guard!r}"
            )
        for name, flags in (
            ("embed", self.embed_flags),
            ("index", self.index_flags),
            ("evaluate", self.evaluate_flags),
        ):
            _refuse_unknown_flags(name, flags)

    @property
    def run_folder(self) -> str:
        return FileSystems.join(self.out, self.run_id)

    def stage(self, name: str) -> str:
        return FileSystems.join(self.run_folder, name)

    def embed_config(self, previous_embeddings: str | None = None) -> EmbedConfig:
        """`madr embed` into this run's embeddings/, reusing ``previous_embeddings`` when given.

        Embed settings among the job's Beam arguments (--precision int8, --batch_size, ...) apply;
        the catalog, model and folders are the job's own. An unfinished folder is replaced.
        """
        values = self._stage_values(
            "embeddings", products=self.catalog, model=self.model, previous=previous_embeddings
        )
        return EmbedConfig(
            model=config_from_values(ModelSettings, values),
            embed=config_from_values(EmbedSettings, values),
            threshold=config_from_values(PredictionThreshold, values),
            **StageOutput.values_from(values),
        )

    def index_config(self, previous_index: str | None = None) -> IndexBuildConfig:
        """The partitioned index build over this run's embeddings, into its index/, with the job's index
        settings (--num_leaves, --soar_lambda, ...); `previous_index` (last night's) lets it update that
        index's tree in place when little changed (`index_builder.update`), or ship exact scoring again
        where that index timed it faster, without timing a tree (`index_builder.tuned`)."""
        return IndexBuildConfig(
            embeddings=self.stage("embeddings"),
            index=self.index_settings,
            previous_index=previous_index,
            **StageOutput.values_from(self._stage_values("index")),
        )

    @property
    def index_settings(self) -> IndexSettings:
        """The job's index settings (--num_leaves, --depth, ...), then those that --index_flags names (the
        stage's other fields there are only its defaults)."""
        given = config_values(IndexSettings, self._stage_values("index"), only=given_flags(self.index_flags))
        return replace(self.index, **given)

    def evaluate_config(self, zero_shot_previous: str | None = None) -> EvaluateConfig:
        """The evaluation of this run's index against --queries and --judgments, into its eval/, beside the
        backbone used zero-shot, whose unchanged products reuse `zero_shot_previous` (last night's)."""
        if not self.queries or not self.judgments:
            raise ValueError("this nightly job evaluates nothing: it has no --queries and --judgments")
        values = self._stage_values(
            "eval",
            model=self.model,
            queries=self.queries,
            judgments=self.judgments,
            index=self.stage("index"),
            embeddings=self.stage("embeddings"),
        )
        given = given_flags(self.stage_args("eval"))
        # By default the depth the index was built for, searched the faster of the index and exact scoring
        # by measurement (both reported); the evaluate stage's own --depth or --searcher, when given.
        defaults = {"depth": self.index_settings.depth, "searcher": "auto"}
        values.update({name: value for name, value in defaults.items() if name not in given})
        # The zero-shot row every night (the quality guard compares with it), embedding only the products
        # that changed since last night's zero-shot run; --evaluate_flags '--zero_shot false' skips it.
        # BM25 would index the whole catalog every night: only when asked (--lexical true).
        values["zero_shot_previous"] = values.get("zero_shot_previous") or zero_shot_previous
        values["lexical"] = values.get("lexical") or "false"
        # One searcher per worker process (issue 26): the calibrated choice alone, not both it and the other
        # (each a full copy of the corpus: 1.5 GB at 1M x 384; the index's recall against exact search is
        # in the manifest's searcher_choice anyway). --evaluate_flags '--compare_exact true' asks for both.
        values["compare_exact"] = values.get("compare_exact") or "false"
        return EvaluateConfig(
            model=config_from_values(ModelSettings, values),
            evaluate=config_from_values(EvaluateSettings, values),
            # Tonight's catalog: the annotations are scored on the products the model held out.
            products=self.catalog,
            threshold=config_from_values(PredictionThreshold, values),
            **StageOutput.values_from(values),
        )

    def stage_options(self) -> PipelineOptions:
        """The job's Beam arguments for a stage that takes `PipelineOptions` (enrich, export), replacing
        what an interrupted attempt left."""
        return PipelineOptions([*self.beam_args, "--overwrite"])

    def stage_args(self, stage: str) -> list[str]:
        """The Beam arguments of one stage (its folder name): the job's, then that stage's own."""
        own = {"embeddings": self.embed_flags, "index": self.index_flags, "eval": self.evaluate_flags}
        return [*self.beam_args, *own.get(stage, ())]

    def _stage_values(self, stage: str, **own: Any) -> dict[str, Any]:
        """Stage settings among the stage's Beam arguments (--precision, --batch_size, ...), under the job's
        own; the stage writes into this run's `stage` folder, replacing what an interrupted attempt left."""
        given = PipelineOptions(self.stage_args(stage)).get_all_options(drop_default=False)
        return {**given, **own, "output": self.stage(stage), "overwrite": True}


def given_flags(flags: Sequence[str]) -> set[str]:
    """The option names written in a stage's flags (`--depth 100` and `--depth=100` alike; an old name,
    `--max_k`, as the option it now sets)."""
    return {OLD_FLAG_NAMES.get(name, name) for name in flag_names(flags)}


def _refuse_unknown_flags(stage: str, flags: Sequence[str]) -> None:
    """A flag in --<stage>_flags that no stage or Beam option declares is an error naming it, not dropped."""
    refused = refused_flags(flags, f"the {stage} stage", stage_flags_allowed=True)
    if refused:
        command = {"index": "build-index"}.get(stage, stage)
        raise ValueError(
            f"--{stage}_flags: {'; '.join(refused)} (`madr {command} --help` lists the {stage} stage's)"
        )


__all__ = ["NightlyJob", "given_flags"]
