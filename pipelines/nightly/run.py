"""`madr nightly`: embed, then index, then evaluate, into OUT/<run id>/, then move LATEST.

Readers find the current index through OUT/LATEST, a small JSON pointer that is
published only after every stage of a run has succeeded. On an object store a
folder rename is not atomic, but a single-object write is: so runs are never
renamed into place, the pointer is. Locally the pointer is written to a temporary
file and renamed over the old one.

Rerunning the same night (same run id) is idempotent: a stage whose manifest
exists is finished and is skipped; a stage folder without a manifest is what a
crash left behind, and the stage runs again with --overwrite to replace it (a stage
otherwise refuses a non-empty output folder, `staged_output.fresh_output`). The previous
run for incremental embedding is whatever LATEST pointed to when the run started;
when its embeddings have lost a file, nothing is reused (a warning names the file).

Before anything is indexed, tonight's product count is checked against the previous
run's (`pipelines.nightly.publish_guard`): an empty catalog, or one that shrank by more than
--max_shrink, is refused unless --allow_shrink says the shrink is intended. Before anything
is embedded, the model, queries and judgments are checked, and a run folder started for
another catalog is refused (`pipelines.nightly.inputs`).

The evaluation scores the backbone used zero-shot beside tonight's model every night (its unchanged
products reuse last night's zero-shot vectors, so it costs the churn), and the quality guard compares
tonight with it and with last night before publishing (`pipelines.nightly.quality_guard`).

With --enrich and --export_vertex the run also writes the catalog with its gaps filled
(enriched/) and the Vertex AI Vector Search files (vertex/), from the same embeddings.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass, field
from typing import Any

from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import PipelineOptions

from pipelines.cluster.dask_runner import one_cluster_for_every_pipeline
from pipelines.embed.enrich import enrich_catalog
from pipelines.embed.export import export_vertex
from pipelines.embed.stage import EMBEDDINGS_KIND, embed_catalog
from pipelines.engine_failures import in_stage
from pipelines.evaluate.inputs import EvaluationInputRefused
from pipelines.evaluate.stage import evaluate_retrieval
from pipelines.index.partitioned import build_partitioned
from pipelines.layout import ZERO_SHOT_FOLDER
from pipelines.nightly.inputs import (
    CATALOG_RECORD,
    CatalogChanged,
    PublishedRunKept,
    check_inputs,
    claim_run_folder,
)
from pipelines.nightly.job import NightlyJob
from pipelines.nightly.latest import LATEST, LatestChanged, publish_latest, read_latest
from pipelines.nightly.publish_guard import CatalogSizeCheck, PublishRefused, catalog_size
from pipelines.nightly.quality_guard import QualityRefused, quality_check
from pipelines.report.night import SERVING_FOLDER, STAGE_FOLDERS, published_runs
from pipelines.report.page import write_report
from pipelines.report.status import clear_run_status, write_run_status
from pipelines.serve.serving_export import ExportServingConfig, export_serving
from pipelines.stage_runs import StageRunner, is_finished
from pipelines.storage.catalog_fingerprint import CatalogFingerprint
from pipelines.storage.stage_manifests import read_stage_manifest, write_stage_manifest
from pipelines.storage.verify import verify_model
from pipelines.storage.writer_lock import exclusive_writer
from schemas.manifest import MANIFEST_FILE, ArtifactError
from schemas.names import require_inside
from serving.bundle import BUNDLE_KIND

LOGGER = logging.getLogger(__name__)
RUN_KIND = "madr-nightly-run"


@dataclass
class NightlyReport:
    run_id: str
    previous_run_id: str | None
    stages: dict[str, Any] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)
    # Per stage that ran: CPU seconds and peak resident memory (`StageRunner.usage`).
    usage: dict[str, dict[str, Any]] = field(default_factory=dict)
    # The quality guard's one-line verdict (`pipelines.nightly.quality_guard`), when the night was evaluated.
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

    One nightly at a time per root: the run holds the root's write lock (`pipelines.storage.writer_lock`, on
    OUT/LATEST) from start to publication, and a second one is refused at once, naming the first.
    """
    with (
        exclusive_writer(FileSystems.join(job.out, LATEST), f"madr nightly run {job.run_id}"),
        one_cluster_for_every_pipeline(job.beam_args) as beam_args,
    ):
        job = dataclasses.replace(job, beam_args=beam_args)
        try:
            report = _run_locked(job)
        except (CatalogChanged, PublishedRunKept):
            raise  # the run folder is another catalog's or a published run's: nothing is written into it
        except Exception as error:
            if not FileSystems.exists(FileSystems.join(job.run_folder, CATALOG_RECORD)) or _published(job):
                raise  # nothing claimed yet, or a published run, whose folder is never written again
            state, stage = _where_it_stopped(job, error)
            failed = in_stage(error, stage)  # a runner's failure names the stage it happened in
            status = write_run_status(job.run_folder, state, stage, failed)
            LOGGER.error("run %s %s", job.run_id, status.line())
            _write_report(job)
            if failed is error:
                raise
            raise failed from error
        if "all" not in report.skipped:
            _write_report(job)
        return report


def _published(job: NightlyJob) -> bool:
    """Whether `job.run_id` is a run LATEST ever pointed to (False when LATEST cannot be read)."""
    try:
        return job.run_id in published_runs(job.out, read_latest(job.out))
    except (ArtifactError, OSError, ValueError):
        return False


def _where_it_stopped(job: NightlyJob, error: Exception) -> tuple[str, str]:
    """("refused" or "failed", the guard or stage) of a run that stopped with `error`."""
    if isinstance(error, QualityRefused):
        return "refused", "the quality guard"
    if isinstance(error, PublishRefused):
        return "refused", "the catalog-size guard"
    if isinstance(error, EvaluationInputRefused):
        return "refused", "the check of the evaluation's queries and judgments"
    if isinstance(error, LatestChanged):
        return "failed", "publishing (LATEST moved)"
    for stage, folder in STAGE_FOLDERS.items():
        if not is_finished(job.stage(folder)):
            return "failed", f"the {stage} stage"
    return "failed", "the run's last steps"


def _write_report(job: NightlyJob) -> None:
    """The morning report into the run folder (`--report false` skips it); a report that cannot be
    written is a warning, never a failed night."""
    if not job.report:
        return
    try:
        path = write_report(job.out, job.run_id)
    except Exception as error:
        LOGGER.warning("the morning report was not written: %s", error)
        return
    print(f"report: {path}", flush=True)


def _run_locked(job: NightlyJob) -> NightlyReport:
    run_manifest = FileSystems.join(job.run_folder, MANIFEST_FILE)
    # Before the first slow stage: the inputs, and which catalog this run folder is for.
    catalog = CatalogFingerprint.of(job.catalog)
    verify_model(job.model, job.verify)
    latest = read_latest(job.out)
    published = published_runs(job.out, latest)
    if job.run_id in published[1:]:
        # Run again, its finished stages would be published anew over a later run, rewriting the history.
        raise PublishedRunKept(
            f"run {job.run_id} was published before {published[0]} (LATEST) and is kept as it is: pass a new "
            "--run_id for tonight"
        )
    if job.restart_run and FileSystems.exists(job.run_folder):
        # Every run LATEST ever pointed to (its chain of previous runs), not only tonight's LATEST: a run
        # servers read once is history the report and the guards compare with.
        if job.run_id in published:
            now = " (LATEST)" if published[0] == job.run_id else f" (LATEST is now {published[0]})"
            raise PublishedRunKept(
                f"--restart_run: run {job.run_id} was published{now} and is never discarded; pass another "
                "--run_id"
            )
        LOGGER.warning("--restart_run: discarding the unpublished run folder %s", job.run_folder)
        FileSystems.delete([require_inside(job.out, job.run_folder, "--restart_run: the run folder")])
    claim_run_folder(job.run_folder, catalog, job.run_id, published=job.run_id in published)
    # After the claim, so that a refused night has its status and its report; before anything is embedded.
    check_inputs(job.stages.evaluate)
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
    zero_shot = _previous_zero_shot(job, previous) if job.queries else None
    tonight = job.with_previous(reused, previous_index, zero_shot)
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
        lambda: embed_catalog(tonight.embed, PipelineOptions(job.stage_args("embeddings"))),
        job.stage("embeddings"),
    )
    # Checked before the index is built: a refused night costs no index, and its rerun with
    # --allow_shrink picks up from here (the embed stage is finished).
    check = _catalog_check(job, previous, latest)
    LOGGER.info("catalog size: %s", check.to_dict())
    check.enforce()

    stages.run(
        "index",
        lambda: build_partitioned(tonight.index, PipelineOptions(job.stage_args("index"))).summary(),
        job.stage("index"),
    )

    if tonight.evaluate is not None:
        evaluate = tonight.evaluate
        stages.run(
            "evaluate",
            lambda: _summary_means(
                evaluate_retrieval(evaluate, PipelineOptions(job.stage_args("eval")), check_inputs=False)
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
        "queries": job.queries,
        "judgments": job.judgments,
        "catalog_check": check.to_dict(),
        # What --precision (auto by default) encoded tonight's products at, and why.
        "precision": read_stage_manifest(job.stage("embeddings"), EMBEDDINGS_KIND).get("precision"),
        **({"quality": quality.to_dict()} if quality else {}),
    }
    clear_run_status(job.run_folder)  # an earlier attempt's stop, now finished
    # Lists (and so binds) the run folder's own files, catalog.json: the stages' folders have their own.
    write_stage_manifest(job.run_folder, RUN_KIND, {"run_id": job.run_id, **summary})
    publish_latest(job.out, job.run_id, {"previous_run_id": previous, "products": check.products}, latest)
    return report


def _extra_stages(job: NightlyJob, stages: StageRunner) -> None:
    """enriched/ and vertex/ from tonight's embeddings, and serving/ from tonight's index, when asked for."""
    enrich, export = job.stages.enrich, job.stages.export
    if enrich is not None:
        options = PipelineOptions(job.stage_args("enriched"))
        stages.run("enrich", lambda: enrich_catalog(enrich, options), enrich.output)
    if export is not None:
        export_options = PipelineOptions(job.stage_args("vertex"))
        stages.run("export-vertex", lambda: export_vertex(export, export_options), export.output)
    if job.export_serving:  # the config checks its folder is empty: made only when the stage runs
        serving = job.stage(SERVING_FOLDER)

        def bundle() -> dict[str, Any]:
            return export_serving(
                ExportServingConfig(index=job.stage("index"), model=job.model, output=serving)
            )

        stages.run("export-serving", bundle, serving, BUNDLE_KIND)


def _summary_means(result: dict[str, Any]) -> dict[str, float]:
    return {name: mean.mean for name, mean in result["summary"].items()}
