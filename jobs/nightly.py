"""`madr nightly`: embed, then index, then evaluate, into OUT/<run id>/, then move LATEST.

Readers find the current index through OUT/LATEST, a small JSON pointer that is
published only after every stage of a run has succeeded. On an object store a
folder rename is not atomic, but a single-object write is: so runs are never
renamed into place, the pointer is. Locally the pointer is written to a temporary
file and renamed over the old one.

Rerunning the same night (same run id) is idempotent: a stage whose manifest
exists is finished and is skipped; a stage folder without a manifest is what a
crash left behind, and the stage runs again with --overwrite to replace it (a stage
otherwise refuses a non-empty output folder, `artifacts.fresh_output`). The previous
run for incremental embedding is whatever LATEST pointed to when the run started;
when its embeddings have lost a file, nothing is reused (a warning names the file).

Before anything is indexed, tonight's product count is checked against the previous
run's (`jobs.publish_guard`): an empty catalog, or one that shrank by more than
--max_shrink, is refused unless --allow_shrink says the shrink is intended. Before anything
is embedded, the model, queries and judgments are checked, and a run folder started for
another catalog is refused (`jobs.nightly_inputs`).

The evaluation scores the backbone used zero-shot beside tonight's model every night (its unchanged
products reuse last night's zero-shot vectors, so it costs the churn), and the quality guard compares
tonight with it and with last night before publishing (`jobs.quality_guard`).

With --enrich and --export_vertex the run also writes the catalog with its gaps filled
(enriched/) and the Vertex AI Vector Search files (vertex/), from the same embeddings.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import PipelineOptions

from jobs.nightly_inputs import CatalogFingerprint, check_inputs, claim_run_folder
from jobs.nightly_latest import LATEST, publish_latest, read_latest
from jobs.publish_guard import DEFAULT_MAX_SHRINK, CatalogSizeCheck, catalog_size
from jobs.quality_guard import GUARD_MODES, quality_check
from jobs.stage_runs import StageRunner, is_finished
from pipelines.artifacts import read_stage_manifest, write_stage_manifest
from pipelines.embed.enrich import EnrichConfig, enrich_catalog
from pipelines.embed.export import ExportVertexConfig, export_vertex
from pipelines.embed.stage import EMBEDDINGS_KIND, EmbedConfig, embed_catalog
from pipelines.evaluate.stage import EvaluateConfig, evaluate_retrieval
from pipelines.evaluate.zero_shot import ZERO_SHOT_FOLDER
from pipelines.index.config import IndexBuildConfig
from pipelines.index.partitioned import build_partitioned
from pipelines.options import (
    EmbedSettings,
    EvaluateSettings,
    ExportSettings,
    IndexSettings,
    ModelSettings,
    PredictionThreshold,
)
from pipelines.stage_config import StageOutput, config_from_values, config_values
from pipelines.verify import verification_wanted
from pipelines.writer_lock import exclusive_writer
from schemas.manifest import MANIFEST_FILE, ArtifactError

LOGGER = logging.getLogger(__name__)
RUN_KIND = "madr-nightly-run"


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
    # Tonight against last night and zero-shot before publishing: warn, refuse or off (`jobs.quality_guard`).
    quality_guard: str = "warn"

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
        """The job's index settings (--num_leaves, --max_k, ...), then those that --index_flags names (the
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
        defaults = {"depth": self.index_settings.max_k, "searcher": "auto"}
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
    """The option names written in a stage's flags (`--depth 100` and `--depth=100` alike)."""
    return {token[2:].split("=", 1)[0] for token in flags if token.startswith("--")}


def _refuse_unknown_flags(stage: str, flags: Sequence[str]) -> None:
    """A flag in --<stage>_flags that no stage or Beam option declares is an error naming it, not dropped."""
    options = PipelineOptions(list(flags))
    unknown = set(options.get_all_options(retain_unknown_options=True)) - set(options.get_all_options())
    if unknown:
        names = ", ".join(f"--{name}" for name in sorted(unknown))
        command = {"index": "build-index"}.get(stage, stage)
        raise ValueError(
            f"--{stage}_flags: {names} is not a flag of the {stage} stage or of Beam "
            f"(`madr {command} --help` lists the stage's)"
        )


@dataclass
class NightlyReport:
    run_id: str
    previous_run_id: str | None
    stages: dict[str, Any] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)
    # Per stage that ran: CPU seconds and peak resident memory (`StageRunner.usage`).
    usage: dict[str, dict[str, Any]] = field(default_factory=dict)
    # The quality guard's one-line verdict (`jobs.quality_guard`), when the night was evaluated.
    quality: str | None = None

    def cost_lines(self) -> list[str]:
        """One line per stage that ran: wall seconds, CPU seconds and peak resident memory."""
        lines = []
        for name, seconds in self.seconds.items():
            used = self.usage.get(name, {})
            peak = used.get("peak_rss_mb")
            lines.append(
                f"  {name}: {seconds:,.1f} s wall, {used.get('cpu_seconds', float('nan')):,.1f} CPU-s, "
                f"peak RSS {'?' if peak is None else f'{peak:,.0f}'} MB"
            )
        return lines


def _reusable(embeddings: str) -> bool:
    """Whether the previous run's embeddings are whole; a lost file is named, and nothing is reused."""
    try:
        read_stage_manifest(embeddings, EMBEDDINGS_KIND)
    except ArtifactError as error:
        # The previous run is only a cache here: tonight's run is still whole without it, just slower.
        LOGGER.warning("not reusing the previous run's embeddings, every product is embedded: %s", error)
        return False
    return True


def _previous_zero_shot(job: NightlyJob, previous: str | None) -> str | None:
    """Last night's zero-shot embeddings when whole, for tonight's zero-shot row to reuse."""
    if not previous:
        return None
    embeddings = FileSystems.join(job.out, previous, "eval", ZERO_SHOT_FOLDER, "embeddings")
    if not FileSystems.exists(FileSystems.join(embeddings, MANIFEST_FILE)):
        return None  # last night ran without the zero-shot row
    return embeddings if _reusable(embeddings) else None


def _catalog_check(job: NightlyJob, previous: str | None, latest: dict[str, Any] | None) -> CatalogSizeCheck:
    """Tonight's product count against the previous published run's (its LATEST entry, else its manifest)."""
    products = catalog_size(job.stage("embeddings"))
    before, unknown = (latest or {}).get("products"), ""
    if previous and before is None:
        try:
            before = catalog_size(FileSystems.join(job.out, previous, "embeddings"), complete=False)
        except (ArtifactError, KeyError, ValueError) as error:
            unknown = str(error) or type(error).__name__
    return CatalogSizeCheck(
        job.run_id,
        products,
        previous,
        before if previous else None,
        job.max_shrink,
        job.allow_shrink,
        unknown,
    )


def run_nightly(job: NightlyJob) -> NightlyReport:
    """Run (or finish) one night; move LATEST only when every stage has succeeded.

    One nightly at a time per root: the run holds the root's write lock (`pipelines.writer_lock`, on
    OUT/LATEST) from start to publication, and a second one is refused at once, naming the first.
    """
    with exclusive_writer(FileSystems.join(job.out, LATEST), f"madr nightly run {job.run_id}"):
        return _run_locked(job)


def _run_locked(job: NightlyJob) -> NightlyReport:
    run_manifest = FileSystems.join(job.run_folder, MANIFEST_FILE)
    # Before the first slow stage: the inputs, and which catalog this run folder is for.
    catalog = CatalogFingerprint.of(job.catalog)
    check_inputs(job.model, job.queries, job.judgments, verification_wanted(job.stage_options()))
    latest = read_latest(job.out)
    if job.restart_run and FileSystems.exists(job.run_folder):
        if latest and latest["run_id"] == job.run_id:
            raise ValueError(
                f"--restart_run: run {job.run_id} is the published one (LATEST); pass another --run_id"
            )
        LOGGER.warning("--restart_run: discarding the unpublished run folder %s", job.run_folder)
        FileSystems.delete([job.run_folder])
    claim_run_folder(job.run_folder, catalog, job.run_id)
    previous = latest["run_id"] if latest and latest["run_id"] != job.run_id else None
    if latest and latest["run_id"] == job.run_id and FileSystems.exists(run_manifest):
        LOGGER.info("run %s is already published for this catalog; nothing to do", job.run_id)
        return NightlyReport(job.run_id, latest.get("previous_run_id"), skipped=["all"])
    report = NightlyReport(job.run_id, previous)
    # A stage folder without a manifest is unfinished: what an interrupted attempt left (stages move
    # their files into place only once they succeed, but an object store's move is a copy, and older
    # runs wrote in place). Each stage's config replaces it (`overwrite=True`); the folder of a finished
    # stage is skipped (`StageRunner`) and never touched.

    previous_embeddings = FileSystems.join(job.out, previous, "embeddings") if previous else None
    previous_index = FileSystems.join(job.out, previous, "index") if previous else None
    reused = None
    if previous_embeddings and not is_finished(job.stage("embeddings")) and _reusable(previous_embeddings):
        reused = previous_embeddings
    stages = StageRunner(
        report.seconds,
        digits=1,
        logger=LOGGER,
        skipped=report.skipped,
        results=report.stages,
        usage=report.usage,
    )
    stages.run(
        "embed",
        lambda: embed_catalog(job.embed_config(reused), PipelineOptions(job.stage_args("embeddings"))),
        job.stage("embeddings"),
    )
    # Checked before the index is built: a refused night costs no index, and its rerun with
    # --allow_shrink picks up from here (the embed stage is finished).
    check = _catalog_check(job, previous, latest)
    LOGGER.info("catalog size: %s", check.to_dict())
    check.enforce()

    stages.run(
        "index",
        lambda: repr(
            build_partitioned(job.index_config(previous_index), PipelineOptions(job.stage_args("index")))
        ),
        job.stage("index"),
    )

    if job.queries:
        zero_shot_previous = _previous_zero_shot(job, previous)
        stages.run(
            "evaluate",
            lambda: _summary_means(
                evaluate_retrieval(
                    job.evaluate_config(zero_shot_previous), PipelineOptions(job.stage_args("eval"))
                )
            ),
            job.stage("eval"),
        )

    _extra_stages(job, stages)
    quality = None
    if job.queries:
        earlier = (previous, FileSystems.join(job.out, previous, "eval")) if previous else None
        quality = quality_check(job.quality_guard, job.stage("eval"), earlier)
        report.quality = quality.verdict()
        LOGGER.info("%s", report.quality)
        quality.enforce()  # before the run's manifest: a rerun with --quality_guard warn publishes it

    summary = {
        "catalog_fingerprint": catalog.to_dict(),
        "previous_run_id": previous,
        "skipped": report.skipped,
        "seconds": report.seconds,
        "usage": report.usage,
        "catalog": job.catalog,
        "model": job.model,
        "catalog_check": check.to_dict(),
        **({"quality": quality.to_dict()} if quality else {}),
    }
    # Lists (and so binds) the run folder's own files, catalog.json: the stages' folders have their own.
    write_stage_manifest(job.run_folder, RUN_KIND, {"run_id": job.run_id, **summary})
    publish_latest(job.out, job.run_id, {"previous_run_id": previous, "products": check.products}, latest)
    return report


def _extra_stages(job: NightlyJob, stages: StageRunner) -> None:
    """enriched/ and vertex/ from tonight's embeddings, when asked for."""
    options, embeddings = job.stage_options(), job.stage("embeddings")
    inputs = {
        "products": job.catalog,
        "embeddings": embeddings,
        "threshold": config_from_values(PredictionThreshold, options),
    }
    # Each replaces what an interrupted attempt left; --no_verify applies as it does to the other stages.
    output = {"overwrite": True, "verify": verification_wanted(options)}
    if job.enrich:
        enrich = EnrichConfig(**inputs, output=job.stage("enriched"), **output)
        stages.run("enrich", lambda: enrich_catalog(enrich, options), enrich.output)
    if job.export_vertex:
        export = ExportVertexConfig(
            **inputs, export=config_from_values(ExportSettings, options), output=job.stage("vertex"), **output
        )
        stages.run("export-vertex", lambda: export_vertex(export, options), export.output)


def _summary_means(result: dict[str, Any]) -> dict[str, float]:
    return {name: mean.mean for name, mean in result["summary"].items()}
