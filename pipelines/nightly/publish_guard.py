"""The nightly job's last check before it moves LATEST: is tonight's catalog plausibly the catalog?

An upstream export that wrote an empty file, or one partition of the catalog instead of all of it, still
embeds and indexes cleanly; published, it would take most products out of search overnight. So the
nightly job compares the products its embed stage wrote with those of the run LATEST points to, and
refuses to publish a catalog that is empty or that shrank by more than --max_shrink, unless told with
--allow_shrink that the shrink is intended. An empty catalog is refused even then: there is nothing to
index, so nothing could be published.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pipelines.embed.stage import EMBEDDINGS_KIND, rows_held
from pipelines.refusals import StageRefused
from pipelines.storage.stage_manifests import read_stage_manifest

DEFAULT_MAX_SHRINK = 0.2


class PublishRefused(StageRefused):
    """Tonight's catalog is empty, or smaller than the published one by more than --max_shrink."""


def catalog_size(embeddings: str, complete: bool = True) -> int:
    """Products an embed output holds (embedded tonight plus reused), from its manifest's counts.

    ``complete=False`` reads the count of a folder that has lost files since: what it held when it was
    published is what tonight is compared with.
    """
    return rows_held(read_stage_manifest(embeddings, EMBEDDINGS_KIND, complete=complete)["counts"])


@dataclass(frozen=True)
class CatalogSizeCheck:
    """Tonight's product count against the previous published run's, and the verdict."""

    run_id: str
    products: int
    previous_run_id: str | None
    previous_products: int | None  # None with a previous run: its size could not be read (`unknown`)
    max_shrink: float = DEFAULT_MAX_SHRINK
    allow_shrink: bool = False
    unknown: str = ""  # why the previous run's size could not be read

    def __post_init__(self) -> None:
        if not 0 <= self.max_shrink <= 1:
            raise ValueError(f"--max_shrink must be in [0, 1], got {self.max_shrink}")

    @property
    def shrink(self) -> float:
        """The fraction of the previous catalog that is gone tonight (0 without a previous run)."""
        if not self.previous_products:
            return 0.0
        return max(0.0, (self.previous_products - self.products) / self.previous_products)

    def refusal(self) -> str | None:
        """One line naming both counts and the flag, or None when the run may be published."""
        before = (
            f"previous run {self.previous_run_id}: {self.previous_products}"
            if self.previous_run_id is not None
            else "no previous run"
        )
        if self.products == 0:
            return (
                f"refusing to publish run {self.run_id}: its catalog has 0 products ({before}); "
                "check --products (--allow_shrink does not apply: an empty catalog has nothing to index)"
            )
        if self.allow_shrink:
            return None
        if self.previous_run_id is not None and self.previous_products is None:
            return (
                f"refusing to publish run {self.run_id} ({self.products} products): the size of the "
                f"previous run {self.previous_run_id} is unknown ({self.unknown}), so a shrink cannot be "
                "ruled out; rerun with --allow_shrink to publish without the comparison"
            )
        if self.shrink > self.max_shrink:
            return (
                f"refusing to publish run {self.run_id}: the catalog shrank from {self.previous_products} "
                f"products (run {self.previous_run_id}) to {self.products}, by {self.shrink:.1%}, more than "
                f"--max_shrink {self.max_shrink:g}; rerun with --allow_shrink if the shrink is intended"
            )
        return None

    def enforce(self) -> None:
        message = self.refusal()
        if message is not None:
            raise PublishRefused(message)

    def to_dict(self) -> dict[str, Any]:
        return {
            "products": self.products,
            "previous_products": self.previous_products,
            "shrink": round(self.shrink, 6),
            "max_shrink": self.max_shrink,
            "allow_shrink": self.allow_shrink,
        }


__all__ = ["DEFAULT_MAX_SHRINK", "CatalogSizeCheck", "PublishRefused", "catalog_size"]
