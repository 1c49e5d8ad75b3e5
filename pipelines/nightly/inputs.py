"""What a nightly run checks before its first slow stage, and which catalog a run folder belongs to.

A run folder is named by its run id (the date by default), and its finished stages are skipped when
the night is rerun. That is right for a rerun after a crash, and wrong when the catalog changed in
between: the second run would skip tonight's embedding and publish yesterday's catalog as today's. So a
run records the catalog it was started for (`CatalogFingerprint`: each file's path, size and modification
time, cheap on an object store too), and a run folder started for another catalog is refused with the
way out (another --run_id), never reported as published.
"""

from __future__ import annotations

import json

from apache_beam.io.filesystems import FileSystems

from pipelines.evaluate.config import EvaluateConfig
from pipelines.evaluate.inputs import check_evaluation_inputs
from pipelines.storage.catalog_fingerprint import CatalogFingerprint

CATALOG_RECORD = "catalog.json"


class CatalogChanged(ValueError):
    """The run folder was started for another catalog than tonight's: a user's error (one line, exit 2),
    whose message names the two ways on."""


class PublishedRunKept(ValueError):
    """The run id names a run that was published: it is neither rerun nor discarded, and nothing of this
    attempt is written into its folder (one line, exit 2, naming a new --run_id)."""


def claim_run_folder(
    run_folder: str, catalog: CatalogFingerprint, run_id: str = "", published: bool = False
) -> None:
    """Record `catalog` as the one `run_folder` processes, or refuse a folder started for another
    (`published`: the run was published, so only another --run_id is offered, never --restart_run)."""
    path = FileSystems.join(run_folder, CATALOG_RECORD)
    if FileSystems.exists(path):
        with FileSystems.open(path) as handle:
            recorded = json.loads(handle.read())
        if recorded.get("digest") != catalog.digest:
            name = run_id or "RUN_ID"
            raise CatalogChanged(
                f"run folder {run_folder} was started for another catalog ({recorded.get('pattern')}: "
                f"{recorded.get('files')} files, {recorded.get('bytes')} bytes; --products "
                f"{catalog.pattern} now: {catalog.files} files, {catalog.bytes} bytes, or the same sizes "
                "written since), and its finished stages would publish that one: pass another --run_id "
                f"(e.g. --run_id {name}-2) to keep it"
                + (
                    " (it was published, so it is kept)"
                    if published
                    else f", or --restart_run to discard it and run this catalog as {name}"
                )
            )
        return
    with FileSystems.create(path) as handle:  # a local create makes the folder; a bucket needs none
        handle.write((json.dumps(catalog.to_dict(), indent=2) + "\n").encode())


def check_inputs(evaluate: EvaluateConfig | None) -> None:
    """Fail before embedding on what would fail later: the query and judgment files the evaluation reads,
    validated as the evaluate stage will (`check_evaluation_inputs`: a night whose evaluation would score
    nothing is refused here, and not published)."""
    if evaluate is not None:
        check_evaluation_inputs(evaluate.evaluate)
