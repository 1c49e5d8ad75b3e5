"""`madr nightly`'s configuration: the job's inputs and settings, and the config of every stage it runs.

A `NightlyJob` holds the embed, index, evaluate, enrich and export configs (`NightlyStages`). Each is
built from the job's pass-through flags, then the stage's own (`--embed_flags`, `--index_flags`,
`--evaluate_flags`), parsed by the parser generated from the stage's config (the one `madr embed`,
`build-index`, ... use), with the inputs and folders the job fixes set as values over them. A flag in a
stage's own flags that the stage does not read, and Beam does not know, is an error naming the stage;
what no stage reads is the stage's Beam options (`stage_args`). What is known only when the night runs
(last night's embeddings, index and zero-shot vectors) is put in at run time (`with_previous`).
"""

from __future__ import annotations

import argparse
import datetime as dt
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from apache_beam.io.filesystems import FileSystems

from pipelines.embed.enrich import EnrichConfig
from pipelines.embed.export import ExportVertexConfig
from pipelines.embed.stage import EmbedConfig
from pipelines.evaluate.config import EvaluateConfig
from pipelines.index.config import IndexBuildConfig
from pipelines.nightly.latest import LATEST
from pipelines.nightly.publish_guard import DEFAULT_MAX_SHRINK
from pipelines.nightly.quality_guard import GUARD_MODES, GUARDED_METRICS, MARGIN, MAX_PVALUE
from pipelines.settings.beam_flags import flag_names, flag_owners, refused_flags
from pipelines.settings.depth import OLD_FLAG_NAMES
from pipelines.settings.options import DEFAULT_PREDICTION_THRESHOLD, IndexSettings
from pipelines.settings.stage_config import (
    add_config_arguments,
    beam_options,
    config_from_values,
    flag_fields,
    input_checks,
    nested,
    setting,
)
from schemas.names import checked_name

# A stage's folder in the run: its config (whose flags are the stage's parser, `madr embed`'s, ...), its
# name in messages, and its command.
STAGES: dict[str, tuple[type[Any], str, str]] = {
    "embeddings": (EmbedConfig, "embed", "embed"),
    "index": (IndexBuildConfig, "index", "build-index"),
    "eval": (EvaluateConfig, "evaluate", "evaluate"),
    "enriched": (EnrichConfig, "enrich", "enrich"),
    "vertex": (ExportVertexConfig, "export", "export-vertex"),
}


# The stages that take flags of their own (--embed_flags, --index_flags, --evaluate_flags).
OWN_FLAGS = ("embeddings", "index", "eval")
# The stages' flags the job sets itself (the inputs and folders), never passed on.
FIXED_FLAGS = frozenset(
    {"products", "model", "output", "out", "embeddings", "queries", "judgments", "index", "overwrite"}
    | {"previous", "previous_index", "zero_shot_previous", "no_verify"}
    | {"tuning_queries"}  # refused by the job: the index stage tunes on catalog vectors
)


@dataclass(frozen=True)
class NightlyStages:
    """The config of each stage of one night, as `madr nightly`'s flags set them."""

    embed: EmbedConfig
    index: IndexBuildConfig
    evaluate: EvaluateConfig | None = None
    enrich: EnrichConfig | None = None
    export: ExportVertexConfig | None = None


def _stage_flags(stage: str, example: str) -> Any:
    return setting(
        (),
        f"Beam and stage flags for the {stage} stage only, in one quoted string after the job's own (which "
        f"they override), e.g. '{example}'",
        parse=shlex.split,
        metavar="'FLAGS'",
    )


@dataclass(frozen=True)
class NightlyJob:
    """`madr nightly`: tonight's inputs, the published root, the job's settings, and each stage's config
    (`stages`, made from them); each `setting` field is a flag of `madr nightly`."""

    catalog: str = setting(
        "",
        "Tonight's product Parquet file, folder or glob (local or gs://)",
        required=True,
        flag="products",
        aliases=("--catalog",),  # the name of earlier releases; --products is every stage's
    )
    model: str = setting("", "Trained model directory", required=True)
    out: str = setting(
        "",
        "Root of the nightly runs; holds <run id>/ folders and LATEST",
        required=True,
        flag="output",
        aliases=("--out",),
    )
    # None: today's UTC date, YYYY-MM-DD (set when the job is made).
    run_id: str | None = setting(
        None, "Run folder name: letters, digits, '.', '_', '-' (default: today's UTC date, YYYY-MM-DD)"
    )
    # Discard the run folder of `run_id` when it was started, and not published, for another catalog.
    restart_run: bool = setting(
        False,
        "Discard what the run folder of --run_id holds when it was never published (a run started on "
        "another catalog, say an empty --products, or one that failed or was refused) and run tonight's "
        "catalog there; a run LATEST ever pointed to is never discarded",
    )
    queries: str | None = setting(None, "Query Parquet file, to evaluate the new index")
    judgments: str | None = setting(None, "Judgment Parquet file, to evaluate the new index")
    # Every index flag of `madr nightly` (--num_leaves, --soar_lambda, ...): the job's own (its index is
    # what it publishes), so they reach the index stage here and not through `beam_args`.
    index: IndexSettings = nested(IndexSettings)
    # Check the model's and the embeddings' files against their manifests (False: --no_verify); every
    # stage's.
    verify: bool = input_checks()
    max_shrink: float = setting(
        DEFAULT_MAX_SHRINK,
        "Largest fraction of the previous published run's products that may be gone tonight; a larger "
        "shrink is not published without --allow_shrink (%(default)s)",
    )
    allow_shrink: bool = setting(
        False, "Publish even when the catalog shrank by more than --max_shrink (an empty one never is)"
    )
    # Beam and stage flags for one stage only, after `beam_args` (a flag given in both takes the stage's):
    # embed on GPU workers or in int8 while index and evaluate do not, say.
    embed_flags: tuple[str, ...] = _stage_flags("embed", "--precision int8 --direct_num_workers 2")
    index_flags: tuple[str, ...] = _stage_flags("index", "--runner DataflowRunner --num_workers 8")
    evaluate_flags: tuple[str, ...] = _stage_flags("evaluate", "--worker_machine_type n1-highmem-16")
    # Tonight against last night and zero-shot before publishing (`pipelines.nightly.quality_guard`).
    quality_guard: str = setting(
        "warn",
        "Compare tonight's retrieval with last night's evaluation and with the backbone used zero-shot "
        "(evaluated every night, embedding only the products changed since last night's zero-shot run; "
        "--evaluate_flags '--zero_shot false' skips it) by paired t-test on the judged queries; below on "
        f"{' or '.join(GUARDED_METRICS)} by more than {MARGIN:g} at p < {MAX_PVALUE:g}: warn prints it and "
        "publishes, refuse does not publish, off skips the check (default: %(default)s)",
        choices=GUARD_MODES,
    )
    # The morning report (`madr report`) written into the run folder at the end, also of a run that stops.
    report: bool = setting(
        True,
        "Write the morning report (report.html: verdict, catalog, retrieval against last night and "
        "zero-shot, trends, annotations, index, cost, worst queries) into the run folder at the end, also "
        "when the run stops (default: %(default)s); `madr report` writes it for any run",
        choices=("true", "false"),
    )
    enrich: bool = setting(
        False,
        "Also write the catalog with its aspect gaps filled (enriched/, as `madr enrich`; predictions at or "
        f"above --min_confidence, {DEFAULT_PREDICTION_THRESHOLD})",
    )
    export_vertex: bool = setting(
        False,
        "Also write Vertex AI Vector Search files (vertex/, as `madr export-vertex`; --restricts, "
        "--vertex_aspects and --vertex_num_files apply)",
    )
    # The serving bundle of tonight's index (serving/, as `madr export-serving`).
    export_serving: bool = setting(
        False,
        "Also write the serving bundle of tonight's index (serving/, as `madr export-serving`), which "
        "`madr serve --bundle` loads and /reload swaps in",
    )
    # Beam options and stage flags for every stage (`madr nightly --precision int8` sets embed's and
    # evaluate's precision): what the command line holds besides the job's own flags.
    beam_args: tuple[str, ...] = beam_options()
    # Each stage's config, parsed from the fields above when the job is made.
    stages: NightlyStages = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.run_id is None:
            object.__setattr__(self, "run_id", dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d"))
        checked_name(self.run_id, "--run_id")
        if self.run_id == LATEST:
            raise ValueError(f"--run_id {LATEST} is the root's pointer to the published run: pick another")
        if not 0 <= self.max_shrink <= 1:
            raise ValueError(f"--max_shrink must be in [0, 1], got {self.max_shrink}")
        if (self.queries is None) != (self.judgments is None):
            raise ValueError("give both --queries and --judgments to evaluate, or neither")
        if self.quality_guard not in GUARD_MODES:
            raise ValueError(
                f"--quality_guard must be one of {', '.join(GUARD_MODES)}, got {self.quality_guard!r}"
            )
        object.__setattr__(self, "stages", self._stage_configs())

    @property
    def run_folder(self) -> str:
        return FileSystems.join(self.out, self.run_id)

    def stage(self, name: str) -> str:
        return FileSystems.join(self.run_folder, name)

    def stage_args(self, stage: str) -> list[str]:
        """The Beam pipeline options of one stage (its folder name): the job's flags, then that stage's own,
        without the stages' flags (each stage's config has read its own)."""
        flags = [*self.beam_args, *self._own_flags(stage)]
        for config_class, _, _ in STAGES.values():
            flags = _stage_parser(config_class).parse_known_args(flags)[1]
        return flags

    def _own_flags(self, stage: str) -> tuple[str, ...]:
        own = {"embeddings": self.embed_flags, "index": self.index_flags, "eval": self.evaluate_flags}
        return own.get(stage, ())

    def with_previous(
        self, embeddings: str | None = None, index: str | None = None, zero_shot: str | None = None
    ) -> NightlyStages:
        """Tonight's stage configs reusing last night's `embeddings` (unchanged products are not embedded
        again), updating last night's `index` in place when little changed (`index_builder.update`),
        and reusing last night's `zero_shot` vectors for the zero-shot row."""
        stages = self.stages
        evaluate = stages.evaluate
        if evaluate is not None and zero_shot and not evaluate.evaluate.zero_shot_previous:
            evaluate = replace(evaluate, evaluate=replace(evaluate.evaluate, zero_shot_previous=zero_shot))
        # Which run's embeddings are reused is the job's to decide (LATEST's, when whole), never a flag's.
        embed = replace(stages.embed, embed=replace(stages.embed.embed, previous=embeddings))
        index_config = replace(stages.index, previous_index=index)
        return replace(stages, embed=embed, index=index_config, evaluate=evaluate)

    def _stage_configs(self) -> NightlyStages:
        embed = self._parsed("embeddings", {"products": self.catalog, "model": self.model})
        if "tuning_queries" in given_flags([*self.beam_args, *self.index_flags]):
            raise ValueError(
                "--tuning_queries: the nightly's index stage tunes on held-out catalog vectors only; "
                "`madr build-index --tuning_queries Q --model MODEL` tunes on queries"
            )
        # BM25 from tonight's catalog in every shard, what `madr search` fuses (--lexical false: none).
        index = self._parsed("index", {"embeddings": self.stage("embeddings"), "products": self.catalog})
        # The job's index settings (--num_leaves, --depth, ...), then those that --index_flags names
        # (the stage's other fields there are only its defaults).
        named = given_flags(self.index_flags) & {f.name for f in flag_fields(IndexSettings)}
        given = {name: getattr(index.index, name) for name in named}
        index_config = replace(index, index=replace(self.index, **given))
        stages = NightlyStages(embed, index_config)
        if self.queries and self.judgments:
            with_bm25 = index_config.products is not None
            stages = replace(stages, evaluate=self._evaluate_config(index_config.index.depth, with_bm25))
        inputs = {"products": self.catalog, "embeddings": self.stage("embeddings")}
        if self.enrich:
            stages = replace(stages, enrich=self._parsed("enriched", inputs))
        if self.export_vertex:
            stages = replace(stages, export=self._parsed("vertex", inputs))
        return stages

    def _evaluate_config(self, depth: int, with_bm25: bool) -> EvaluateConfig:
        """The evaluation of this run's index against --queries and --judgments, into its eval/, beside the
        backbone used zero-shot and, when the index carries BM25 (`with_bm25`), scoring the ranking a server
        gets (dense + BM25) beside BM25 and the BM25 + zero-shot hybrid, from the index's own BM25."""
        inputs = {"model": self.model, "queries": self.queries, "judgments": self.judgments}
        inputs |= {"index": self.stage("index"), "embeddings": self.stage("embeddings")}
        # Tonight's catalog: the annotations are scored on the products the model held out.
        config = self._parsed("eval", {**inputs, "products": self.catalog})
        given = given_flags([*self.beam_args, *self.evaluate_flags])
        # By default the depth the index was built for, searched the faster of the index and exact scoring
        # by measurement (both reported). The BM25 rows come from the index's own BM25; without it BM25
        # would index the whole catalog every night: only when asked (--lexical true). One searcher (issue
        # 26): the calibrated choice alone (the index's recall against exact search is in the manifest's
        # searcher_choice anyway); --compare_exact true asks for both.
        nightly_defaults = {"depth": depth, "searcher": "auto", "compare_exact": "false"}
        if not with_bm25:
            nightly_defaults["lexical"] = "false"
        chosen = {name: value for name, value in nightly_defaults.items() if name not in given}
        return replace(config, evaluate=replace(config.evaluate, **chosen))

    def _parsed(self, folder: str, inputs: Mapping[str, Any]) -> Any:
        """The config of the stage in `folder`: its command's parser over the job's flags, then the stage's
        own, with `inputs` (the job's) and the stage's folder in this run set over them (an interrupted
        attempt's leftovers there are replaced)."""
        config_class = STAGES[folder][0]
        parser = _stage_parser(config_class)
        own = self._own_flags(folder)
        _refuse_unknown_flags(folder, parser.parse_known_args(own)[1])
        args, _ = parser.parse_known_args([*self.beam_args, *own])
        where = {"output": self.stage(folder), "overwrite": True, "verify": self.verify and args.verify}
        return config_from_values(config_class, {**vars(args), **inputs, **where})


def _stage_parser(config_class: type[Any]) -> argparse.ArgumentParser:
    """A stage's own parser (its config's flags). No abbreviations: `--search exact` would parse as
    --searcher, yet not count as given (`given_flags`)."""
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    add_config_arguments(parser, config_class)
    return parser


def _stage_options(config_class: type[Any], old_names: bool = True) -> list[str]:
    """The option strings of a stage's parser, in its order; without `old_names`, not the renamed flags'
    old names (`--max_k`)."""
    actions = _stage_parser(config_class)._actions
    return [
        option
        for action in actions
        if old_names or not (action.help or "").startswith("Deprecated")
        for option in action.option_strings
    ]


def passed_on_flags() -> dict[str, list[str]]:
    """Each stage's flags (by its name in messages) that `madr nightly` passes on, in its parser's order;
    those the job sets itself (the inputs and folders) left out."""
    return {
        stage: [o for o in _stage_options(config_class, old_names=False) if o.lstrip("-") not in FIXED_FLAGS]
        for config_class, stage, _ in STAGES.values()
    }


def stage_owners(but: str | None = None) -> dict[str, str]:
    """Each flag of a stage but `but` (its folder name), and the stages that read it ("index, evaluate")."""
    parsers = {
        f"the {stage} stage": _stage_parser(config_class)
        for folder, (config_class, stage, _) in STAGES.items()
        if folder != but
    }
    return flag_owners(parsers, joiner=" and ")


def given_flags(flags: Sequence[str]) -> set[str]:
    """The option names written in a stage's flags (`--depth 100` and `--depth=100` alike; an old name,
    `--max_k`, as the option it now sets)."""
    return {OLD_FLAG_NAMES.get(name, name) for name in flag_names(flags)}


def _refuse_unknown_flags(folder: str, flags: Sequence[str]) -> None:
    """A flag of --<stage>_flags that the stage does not read, and is not Beam's, is an error naming it
    (and the stages that do read it)."""
    _, stage, command = STAGES[folder]
    refused = refused_flags(flags, f"the {stage} stage")
    if refused:  # then say which stages read them (every stage's parser built: only on this path)
        refused = refused_flags(flags, f"the {stage} stage", owners=stage_owners(but=folder))
        raise ValueError(
            f"--{stage}_flags: {'; '.join(refused)} (`madr {command} --help` lists the {stage} stage's)"
        )


__all__ = ["STAGES", "NightlyJob", "NightlyStages", "given_flags", "passed_on_flags", "stage_owners"]
