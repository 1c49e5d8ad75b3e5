"""One night of a nightly root, as the morning report reads it: what each stage wrote, gathered.

Every figure comes from a file a stage wrote, and `NightSummary.sources` names each file read, so the
page can say where a number comes from and a test can compare the two. Nothing here recomputes a metric:
a missing file is a missing section, never a guess.

    ROOT/LATEST                         the published run (`pipelines.nightly.latest`)
    ROOT/<run>/manifest.json            the finished run: seconds and usage per stage, guards' verdicts
    ROOT/<run>/status.json              a run that stopped: the stage and its one-line error
    ROOT/<run>/embeddings/manifest.json products read, embedded, reused, dead-lettered
    ROOT/<run>/index/.../manifest.json  the index's schedule per depth, its recall and speeds
    ROOT/<run>/eval/metrics.json        tonight's means; zero_shot/eval/metrics.json the backbone's
    ROOT/<run>/eval/annotation_quality.json
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from apache_beam.io.filesystems import FileSystems

from evaluation.report import METRICS_FILE, PER_QUERY_FILE
from pipelines.layout import LEXICAL_FILE, ZERO_SHOT_FILE, ZERO_SHOT_FOLDER
from pipelines.report.status import RunStatus, read_run_status
from pipelines.settings.dead_letter_limit import dead_letter_reasons
from schemas.manifest import MANIFEST_FILE

STAGE_FOLDERS = {"embed": "embeddings", "index": "index", "evaluate": "eval"}
SERVING_FOLDER = "serving"  # `madr nightly --export_serving`'s bundle, beside the index it was made from


def read_json(path: str) -> dict[str, Any] | None:
    """A JSON file's object, or None when the file is absent."""
    if not FileSystems.exists(path):
        return None
    with FileSystems.open(path) as handle:
        return json.loads(handle.read())


@dataclass
class NightSummary:
    """What a run folder holds, section by section; None where a stage did not write it."""

    run_id: str
    folder: str
    finished: bool
    published: bool
    created_at: str | None = None
    previous_run_id: str | None = None
    status: RunStatus | None = None
    quality: dict[str, Any] | None = None
    catalog_check: dict[str, Any] | None = None
    seconds: dict[str, float] = field(default_factory=dict)
    usage: dict[str, dict[str, Any]] = field(default_factory=dict)
    embed_counts: dict[str, int] | None = None
    dead_letter_reasons: list[tuple[str, int]] = field(default_factory=list)
    dead_letter_files: list[str] = field(default_factory=list)
    metrics: dict[str, float] | None = None
    zero_shot_metrics: dict[str, float] | None = None
    zero_shot_comparison: dict[str, Any] | None = None
    # Which ranking the evaluation reports (the evaluation manifest's "ranking": the served one, fused with
    # BM25, when the index carries it), and the lexical rows beside it (lexical.json).
    ranking: dict[str, Any] | None = None
    lexical_comparison: dict[str, Any] | None = None
    annotation_quality: dict[str, Any] | None = None
    enrich_counts: dict[str, int] | None = None
    index_recall: dict[str, Any] | None = None
    index_config: dict[str, Any] | None = None
    searcher_choice: dict[str, Any] | None = None
    # The serving bundle of tonight's index (`madr nightly --export_serving`): its manifest's info.
    serving_bundle: dict[str, Any] | None = None
    sources: dict[str, str] = field(default_factory=dict)
    # A run folder outside a nightly root (`madr demo --output`): nothing is published from it.
    standalone: bool = False

    @property
    def products(self) -> int | None:
        return None if self.embed_counts is None else self.embed_counts.get("products_read")

    @property
    def annotation_precision(self) -> dict[str, float]:
        """Per aspect, the precision of the values written at the threshold, when measured on products the
        model provably never trained on (else empty: the trend never draws figures of training products
        on the line of unseen ones)."""
        if not self.annotation_unseen:
            return {}
        products = (self.annotation_quality or {}).get("products") or {}
        return dict(products.get("confident_accuracy") or {})

    @property
    def annotation_unseen(self) -> bool:
        """Whether the annotation figures are of products the model provably never trained on."""
        quality = self.annotation_quality or {}
        # A record written before `unseen` existed: its "whole catalog" was decided by folder paths.
        return bool(quality.get("unseen", "the whole catalog" not in str(quality.get("held_out", ""))))

    @property
    def evaluation(self) -> str:
        return FileSystems.join(self.folder, STAGE_FOLDERS["evaluate"])

    @property
    def zero_shot_evaluation(self) -> str:
        return FileSystems.join(self.evaluation, ZERO_SHOT_FOLDER, "eval")

    @property
    def per_query_file(self) -> str:
        return FileSystems.join(self.evaluation, PER_QUERY_FILE)

    def unfinished_stages(self) -> list[str]:
        """The stages whose folder exists without a manifest: where a stopped run stopped."""
        return [
            stage
            for stage, folder in STAGE_FOLDERS.items()
            if FileSystems.exists(FileSystems.join(self.folder, folder))
            and not FileSystems.exists(FileSystems.join(self.folder, folder, MANIFEST_FILE))
        ]


def read_night(folder: str, run_id: str, published: bool) -> NightSummary:
    """The summary of the run in `folder` (ROOT/run_id of a nightly root, or a demo's run folder);
    `published`: whether LATEST points, or pointed, to it (`published_runs`)."""
    manifest_path = FileSystems.join(folder, MANIFEST_FILE)
    manifest = read_json(manifest_path)
    night = NightSummary(
        run_id=run_id,
        folder=folder,
        finished=manifest is not None,
        published=published,
        status=read_run_status(folder),
    )
    if manifest is not None:
        info = manifest.get("info", manifest)
        night.sources["run"] = manifest_path
        night.created_at = info.get("created_at")
        night.previous_run_id = info.get("previous_run_id")
        night.quality = info.get("quality")
        night.catalog_check = info.get("catalog_check")
        night.seconds = dict(info.get("seconds") or {})
        night.usage = dict(info.get("usage") or {})
    _read_embeddings(night)
    enriched = FileSystems.join(folder, "enriched", MANIFEST_FILE)
    if (manifest := read_json(enriched)) is not None:
        night.sources["enriched"] = enriched
        night.enrich_counts = dict(manifest.get("info", manifest).get("counts") or {})
    _read_index(night)
    bundle = FileSystems.join(folder, SERVING_FOLDER, MANIFEST_FILE)
    if (manifest := read_json(bundle)) is not None:
        night.sources["serving"] = bundle
        night.serving_bundle = dict(manifest.get("info", manifest))
    _read_evaluation(night)
    return night


def published_runs(root: str, latest: dict[str, Any] | None) -> list[str]:
    """The runs LATEST has pointed to, newest first: it, then each run's `previous_run_id` (a run is
    published only after every stage and guard, so the chain holds exactly the published runs)."""
    chain: list[str] = []
    run_id = None if latest is None else latest.get("run_id")
    while run_id and run_id not in chain:
        chain.append(str(run_id))
        manifest = read_json(FileSystems.join(root, str(run_id), MANIFEST_FILE)) or {}
        run_id = manifest.get("info", manifest).get("previous_run_id")
    return chain


def _read_embeddings(night: NightSummary) -> None:
    folder = FileSystems.join(night.folder, STAGE_FOLDERS["embed"])
    path = FileSystems.join(folder, MANIFEST_FILE)
    manifest = read_json(path)
    if manifest is None:
        return
    night.sources["embeddings"] = path
    night.embed_counts = dict(manifest.get("info", manifest).get("counts") or {})
    letters = FileSystems.match([FileSystems.join(folder, "dead_letters-*.jsonl")])[0].metadata_list
    night.dead_letter_files = sorted(m.path for m in letters if m.size_in_bytes)
    night.dead_letter_reasons = dead_letter_reasons(night.dead_letter_files)


def _read_index(night: NightSummary) -> None:
    folder = FileSystems.join(night.folder, STAGE_FOLDERS["index"])
    top = read_json(FileSystems.join(folder, MANIFEST_FILE))
    if top is None:
        return
    # A partitioned index: its shards' manifests carry the recall and schedule (the first shard's, as
    # every shard is built with the same settings).
    shards = top.get("info", top).get("shards") or [{}]
    shard = shards[0].get("path")
    path = FileSystems.join(folder, *([shard] if shard else []), MANIFEST_FILE)
    manifest = read_json(path) or top
    night.sources["index"] = path
    night.index_recall = manifest.get("recall")
    night.index_config = manifest.get("config")


def _read_evaluation(night: NightSummary) -> None:
    metrics_path = FileSystems.join(night.evaluation, METRICS_FILE)
    metrics = read_json(metrics_path)
    if metrics is not None:
        night.sources["metrics"] = metrics_path
        night.metrics = _means(metrics)
    zero_path = FileSystems.join(night.zero_shot_evaluation, METRICS_FILE)
    zero = read_json(zero_path)
    if zero is not None:
        night.sources["zero_shot_metrics"] = zero_path
        night.zero_shot_metrics = _means(zero)
    comparison_path = FileSystems.join(night.evaluation, ZERO_SHOT_FILE)
    night.zero_shot_comparison = read_json(comparison_path)
    if night.zero_shot_comparison is not None:
        night.sources["zero_shot_comparison"] = comparison_path
    quality_path = FileSystems.join(night.evaluation, "annotation_quality.json")
    night.annotation_quality = read_json(quality_path)
    if night.annotation_quality is not None:
        night.sources["annotation_quality"] = quality_path
    lexical_path = FileSystems.join(night.evaluation, LEXICAL_FILE)
    night.lexical_comparison = read_json(lexical_path)
    if night.lexical_comparison is not None:
        night.sources["lexical_comparison"] = lexical_path
    manifest = read_json(FileSystems.join(night.evaluation, MANIFEST_FILE))
    if manifest is not None:
        night.searcher_choice = manifest.get("info", manifest).get("searcher_choice")
        night.ranking = manifest.get("info", manifest).get("ranking")


def _means(metrics: dict[str, Any]) -> dict[str, float]:
    return {
        name: float(value["mean"])
        for name, value in (metrics.get("metrics") or {}).items()
        if isinstance(value, dict) and value.get("mean") is not None
    }


def run_ids(root: str) -> list[str]:
    """The run folders of a nightly root (each holds the catalog.json its run wrote first), in the order
    they were started."""
    found = FileSystems.match([FileSystems.join(root, "*", "catalog.json")])[0].metadata_list
    started = {m.path.replace("\\", "/").rstrip("/").split("/")[-2]: m.last_updated_in_seconds for m in found}
    return sorted(started, key=lambda run_id: (started[run_id], run_id))


__all__ = ["NightSummary", "dead_letter_reasons", "published_runs", "read_json", "read_night", "run_ids"]
