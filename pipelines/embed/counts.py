"""The embed stage's counts: records in = embedded + reused + dead-lettered, and the refusal past
--max_dead_letter_fraction (or when no product could be read at all), quoting the commonest reasons."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from apache_beam.io.filesystems import FileSystems

from pipelines.refusals import StageRefused
from pipelines.settings.dead_letter_limit import dead_letter_reasons


class DeadLetterThresholdExceeded(StageRefused):
    """More records were rejected than --max_dead_letter_fraction allows."""


def rows_held(counts: Mapping[str, Any]) -> int:
    """The embedding rows an embed output holds, by its manifest's counts: embedded in the run plus
    reused from --previous."""
    return int(counts.get("products_embedded", 0)) + int(counts.get("products_reused", 0))


def check_counts(counts: dict[str, int], max_dead_letter_fraction: float, folder: str = "") -> None:
    """Records in = embedded + reused + dead-lettered, and not too many dead letters (written to `folder`)."""
    accounted = counts["products_embedded"] + counts["products_reused"] + counts["products_dead_lettered"]
    if accounted != counts["products_read"]:
        raise RuntimeError(f"counts do not reconcile: read {counts['products_read']}, accounted {accounted}")
    read, dead = counts["products_read"], counts["products_dead_lettered"]
    unreadable = counts.get("files_dead_lettered", 0) + counts.get("row_groups_dead_lettered", 0)
    if not read and unreadable:
        # Refused as an empty catalog is: an output of no rows would only fail later, in build-index.
        raise DeadLetterThresholdExceeded(
            f"no product could be read: {counts.get('files_dead_lettered', 0)} file(s) and "
            f"{counts.get('row_groups_dead_lettered', 0)} row group(s) of --products are unreadable (0 "
            "bytes, not Parquet, or damaged); see the dead_letters-*.jsonl files"
            + (f" in {folder}, which name each file" if folder else "")
            + "; rewrite them, e.g. with `madr ingest`"
        )
    if read and dead > max_dead_letter_fraction * read:
        invalid = counts.get("embeddings_invalid", 0)
        cause = f" ({invalid} of them for an invalid embedding: check the model)" if invalid else ""
        raise DeadLetterThresholdExceeded(
            f"{dead} of {read} products are dead letters{cause}, more than --max_dead_letter_fraction="
            f"{max_dead_letter_fraction}{_commonest_reasons(folder)}; see the dead_letters-*.jsonl files"
            + (f" in {folder} (the output was not published)" if folder else "")
        )


def _commonest_reasons(folder: str) -> str:
    """The dead letters' commonest reasons, for the refusal: often one cause (a queries file given as the
    catalog: no title), which the user should not have to open a file to see."""
    if not folder:
        return ""
    letters = FileSystems.match([FileSystems.join(folder, "dead_letters-*.jsonl")])[0].metadata_list
    reasons = dead_letter_reasons([m.path for m in letters], top=3)
    return f" (commonest reasons: {'; '.join(f'{r} ({n:,}×)' for r, n in reasons)})" if reasons else ""


__all__ = ["DeadLetterThresholdExceeded", "check_counts", "rows_held"]
