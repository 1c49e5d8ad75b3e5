"""`madr nightly`: embed, then index, then evaluate, into OUT/<run id>/, then move LATEST.

Readers find the current index through OUT/LATEST, a small JSON pointer that is
published only after every stage of a run has succeeded. On an object store a
folder rename is not atomic, but a single-object write is: so runs are never
renamed into place, the pointer is. Locally the pointer is written to a temporary
file and renamed over the old one.

Rerunning the same night (same run id) is idempotent: a stage whose manifest
exists is finished and is skipped; a stage folder without a manifest is what a
crash left behind, and it is cleared before the stage runs again. The previous
run for incremental embedding is whatever LATEST pointed to when the run started.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import PipelineOptions

from pipelines.artifacts import is_local
from pipelines.embed import run_embed
from pipelines.evaluate import run_evaluate
from pipelines.index import run_build_index
from schemas.manifest import MANIFEST_FILE

LOGGER = logging.getLogger(__name__)
LATEST = "LATEST"
RUN_KIND = "madr-nightly-run"


@dataclass(frozen=True)
class NightlyJob:
    catalog: str
    model: str
    out: str
    run_id: str
    queries: str | None = None
    judgments: str | None = None
    num_index_shards: int = 1
    max_k: int = 10_000
    beam_args: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.run_id or "/" in self.run_id or self.run_id == LATEST:
            raise ValueError(f"run id {self.run_id!r} must be a non-empty name without '/' and not {LATEST}")
        if (self.queries is None) != (self.judgments is None):
            raise ValueError("give both --queries and --judgments to evaluate, or neither")

    @property
    def run_folder(self) -> str:
        return FileSystems.join(self.out, self.run_id)

    def stage(self, name: str) -> str:
        return FileSystems.join(self.run_folder, name)


@dataclass
class NightlyReport:
    run_id: str
    previous_run_id: str | None
    stages: dict[str, Any] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)


def add_nightly_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--catalog", required=True, help="Tonight's product Parquet file or glob (local or gs://)"
    )
    parser.add_argument("--model", required=True, help="Trained model directory")
    parser.add_argument(
        "--out", required=True, help="Root of the nightly runs; holds <run id>/ folders and LATEST"
    )
    parser.add_argument(
        "--run_id", default=None, help="Run folder name (default: today's UTC date, YYYY-MM-DD)"
    )
    parser.add_argument("--queries", default=None, help="Query Parquet file, to evaluate the new index")
    parser.add_argument("--judgments", default=None, help="Judgment Parquet file, to evaluate the new index")
    parser.add_argument("--num_index_shards", type=int, default=1, help="Hash partitions of the index (1)")
    parser.add_argument(
        "--max_k", type=int, default=10_000, help="Deepest k the index must serve well (10000)"
    )


def job_from_args(args: argparse.Namespace, beam_args: list[str]) -> NightlyJob:
    return NightlyJob(
        catalog=args.catalog,
        model=args.model,
        out=args.out,
        run_id=args.run_id or dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d"),
        queries=args.queries,
        judgments=args.judgments,
        num_index_shards=args.num_index_shards,
        max_k=args.max_k,
        beam_args=tuple(beam_args),
    )


def read_latest(out: str) -> dict[str, Any] | None:
    """The LATEST pointer of a nightly root, or None before the first successful run."""
    path = FileSystems.join(out, LATEST)
    if not FileSystems.exists(path):
        return None
    with FileSystems.open(path) as handle:
        return json.loads(handle.read())


def publish_latest(out: str, run_id: str, summary: dict[str, Any]) -> None:
    """Point LATEST at a finished run, in one atomic step."""
    pointer = {
        "run_id": run_id,
        "path": FileSystems.join(out, run_id),
        "published_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        **summary,
    }
    data = (json.dumps(pointer, indent=2, sort_keys=True) + "\n").encode()
    target = FileSystems.join(out, LATEST)
    if is_local(out):
        staging = target + ".tmp"
        with FileSystems.create(staging) as handle:
            handle.write(data)
        FileSystems.rename([staging], [target])  # os.rename: atomic on one filesystem
    else:
        with FileSystems.create(target) as handle:  # one object write: readers see old or new
            handle.write(data)


def _finished(folder: str) -> bool:
    return FileSystems.exists(FileSystems.join(folder, MANIFEST_FILE))


def _run_stage(report: NightlyReport, name: str, folder: str, work: Callable[[], Any]) -> None:
    if _finished(folder):
        report.skipped.append(name)
        LOGGER.info("%s: finished in an earlier attempt, skipped", name)
        return
    if FileSystems.exists(folder):
        LOGGER.warning("%s: clearing what an interrupted attempt left in %s", name, folder)
        FileSystems.delete([folder])
    started = time.perf_counter()
    report.stages[name] = work()
    report.seconds[name] = round(time.perf_counter() - started, 1)


def run_nightly(job: NightlyJob) -> NightlyReport:
    """Run (or finish) one night; move LATEST only when every stage has succeeded."""
    run_manifest = FileSystems.join(job.run_folder, MANIFEST_FILE)
    latest = read_latest(job.out)
    previous = latest["run_id"] if latest and latest["run_id"] != job.run_id else None
    if latest and latest["run_id"] == job.run_id and FileSystems.exists(run_manifest):
        LOGGER.info("run %s is already published; nothing to do", job.run_id)
        return NightlyReport(job.run_id, latest.get("previous_run_id"), skipped=["all"])
    report = NightlyReport(job.run_id, previous)
    beam = list(job.beam_args)

    embed_flags = ["--products", job.catalog, "--model", job.model, "--output", job.stage("embeddings")]
    if previous:
        embed_flags += ["--previous", FileSystems.join(job.out, previous, "embeddings")]
    _run_stage(
        report, "embed", job.stage("embeddings"), lambda: run_embed(PipelineOptions([*embed_flags, *beam]))
    )

    index_flags = [
        "--embeddings",
        job.stage("embeddings"),
        "--output",
        job.stage("index"),
        "--num_index_shards",
        str(job.num_index_shards),
        "--max_k",
        str(job.max_k),
    ]
    _run_stage(
        report,
        "index",
        job.stage("index"),
        lambda: repr(run_build_index(PipelineOptions([*index_flags, *beam]))),
    )

    if job.queries:
        eval_flags = [
            "--queries",
            job.queries,
            "--judgments",
            job.judgments,
            "--model",
            job.model,
            "--index",
            job.stage("index"),
            "--embeddings",
            job.stage("embeddings"),
            "--output",
            job.stage("eval"),
            "--depth",
            str(job.max_k),
            # The faster of the index and exact search at this depth, by measurement (both reported).
            "--searcher",
            "auto",
        ]
        _run_stage(
            report,
            "evaluate",
            job.stage("eval"),
            lambda: _summary_means(run_evaluate(PipelineOptions([*eval_flags, *beam]))),
        )

    summary = {
        "previous_run_id": previous,
        "skipped": report.skipped,
        "seconds": report.seconds,
        "catalog": job.catalog,
        "model": job.model,
    }
    with FileSystems.create(run_manifest) as handle:
        handle.write(
            (
                json.dumps({"kind": RUN_KIND, "run_id": job.run_id, **summary}, indent=2, default=str) + "\n"
            ).encode()
        )
    publish_latest(job.out, job.run_id, {"previous_run_id": previous})
    return report


def _summary_means(result: dict[str, Any]) -> dict[str, float]:
    return {name: mean.mean for name, mean in result["summary"].items()}
