"""Update last night's tree with tonight's vectors instead of training a new one.

Training is most of a tree build: k-means over a sample, the hashing codebooks, every vector assigned
and hashed, then the schedule tuned and timed per depth. On a night when a few percent of the catalog
changed, the tree trained last night still partitions tonight's vectors as well, so the nightly's
index stage (`pipelines.index.shard_build`) asks `update_within_target` first. It loads last night's
artifact, deletes the products gone, upserts the changed and new ones (`ScannIndex.updated`: ScaNN puts
each into its nearest leaf and hashes it with the trained codebooks, in place), and re-checks last
night's schedule at each tree depth on tonight's vectors, one recall measurement each, as a retrained
tree's schedule is re-checked (`index_builder.tuned`). The updated tree ships when every depth still
reaches the target.

A new tree is trained and tuned instead (None is returned) when there is no tree to update or its
schedule is not comparable (other depths or target, a corpus more than 1.25 times larger or smaller),
when the recipe changed (another --num_leaves, scoring, hashing or re-ranking; int8 re-ranking keeps no
float32 vectors to compare), when the products changed since the tree was trained exceed
`MAX_CHANGED_SINCE_TRAINING` of the vectors it was trained on, after
`MAX_UPDATES` nights of updates, or when a depth falls below the target. The manifest's
``recall.tree_history`` carries the count across nights.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from index_builder.artifact import SCANN_DIR, IndexArtifactError
from index_builder.config import ReorderPrecision, ScannIndexConfig
from index_builder.depth_tuning import DepthTuner
from index_builder.exact import ExactSearcher
from index_builder.recall import RecallReport, TreeHistory
from index_builder.scann_index import ScannIndex
from index_builder.schedule import SearchSchedule, schedule_depths
from index_builder.tuned import comparable_schedule, train_within_target, tree_report

logger = logging.getLogger(__name__)

# Retrain once the products changed, added or removed since the tree was trained exceed this share of
# the vectors it was trained on: its centroids and codebooks describe a catalog that is no longer there.
MAX_CHANGED_SINCE_TRAINING = 0.25
# ...and at least every this many nights, whatever the churn.
MAX_UPDATES = 14
# Rows compared at a time between last night's vectors and tonight's.
_COMPARE_ROWS = 65_536
# Config fields a tree's recipe is made of: another value tonight means a new tree. The leaf count
# follows the corpus size (2 sqrt(n)) and is only compared when given explicitly.
_RECIPE = (
    "dimension",
    "distance",
    "scoring",
    "dimensions_per_block",
    "anisotropic_quantization_threshold",
    "soar_lambda",
    "reorder_precision",
)


@dataclass(frozen=True)
class TreeChanges:
    """Tonight's vectors against last night's tree: which products to delete and which to upsert."""

    removed: list[str]
    upserted_rows: np.ndarray  # rows of tonight's matrix: new products and changed vectors
    added: int
    kept: int

    @property
    def changed(self) -> int:
        return len(self.removed) + len(self.upserted_rows)


def tree_changes(
    old_ids: Sequence[str], old_vectors: np.ndarray, ids: Sequence[str], embeddings: np.ndarray
) -> TreeChanges:
    """Which of tonight's products (`ids`, rows of `embeddings`) are new or have another vector than in
    last night's tree (`old_ids`, rows of `old_vectors`), and which of last night's are gone."""
    where = {product_id: row for row, product_id in enumerate(old_ids)}
    old_rows = np.fromiter((where.get(product_id, -1) for product_id in ids), np.int64, count=len(ids))
    present = old_rows >= 0
    differs = ~present
    for start in range(0, len(ids), _COMPARE_ROWS):
        block = slice(start, start + _COMPARE_ROWS)
        rows, here = old_rows[block], present[block]
        moved = np.any(old_vectors[rows[here]] != embeddings[block][here], axis=1)
        differs[block][here] = moved
    tonight = set(ids)
    removed = [product_id for product_id in old_ids if product_id not in tonight]
    added = int(np.count_nonzero(~present))
    upserted = np.flatnonzero(differs)
    return TreeChanges(removed, upserted, added, len(ids) - len(upserted))


def same_recipe(trained: ScannIndexConfig, tonight: ScannIndexConfig, explicit: Mapping[str, Any]) -> bool:
    """Whether last night's tree was built as tonight's would be (see `_RECIPE`)."""
    if trained.num_leaves is None or tonight.num_leaves is None:
        return False
    if "num_leaves" in explicit and explicit["num_leaves"] != trained.num_leaves:
        return False
    return all(getattr(trained, name) == getattr(tonight, name) for name in _RECIPE)


def update_within_target(
    previous_dir: str | Path,
    earlier: dict[str, Any] | None,
    config: ScannIndexConfig,
    embeddings: np.ndarray,
    ids: Sequence[str],
    depth: int,
    target_recall: float | None,
    *,
    serving_depths: Sequence[int],
    explicit: Mapping[str, Any] | None = None,
    evaluation_queries: np.ndarray | None = None,
) -> tuple[ScannIndex, RecallReport, np.ndarray] | None:
    """Last night's tree (`previous_dir`, whose manifest's ``recall`` is `earlier`) updated to tonight's
    `embeddings`, its schedule re-checked; None where a new tree must be trained (the module's docstring).

    Returns the index, its report and tonight's matrix in the index's row order (what its exact depths
    and recall checks score)."""
    n = embeddings.shape[0]
    depths = schedule_depths(serving_depths, depth, n)
    schedule = comparable_schedule(earlier, embeddings.shape, depths, target_recall)
    history = _history(earlier)
    why = _refusal(schedule, history)
    if why is None:
        try:
            previous = ScannIndex.load(previous_dir)
        except IndexArtifactError as error:  # last night's index saves time here, it never fails a night
            why = f"last night's index does not load: {error}"
        else:
            if not same_recipe(previous.config, config, explicit or {}):
                why = f"tonight's recipe differs ({config}; last night {previous.config})"
            elif previous.config.reorder_precision is not ReorderPrecision.FLOAT32:
                why = "last night's tree keeps no float32 vectors to tell the changed products by"
    if why is not None:
        logger.info("training a new tree, not updating last night's: %s", why)
        return None
    changes = tree_changes(previous.ids, _vectors_of(previous, Path(previous_dir)), ids, embeddings)
    changed = history.changed_since_training + changes.changed
    if changed > MAX_CHANGED_SINCE_TRAINING * history.trained_vectors:
        logger.info(
            "training a new tree: %d products changed since the tree was trained on %d (more than %.0f%%)",
            changed,
            history.trained_vectors,
            100 * MAX_CHANGED_SINCE_TRAINING,
        )
        return None
    rows = changes.upserted_rows
    index = previous.updated(changes.removed, [ids[row] for row in rows], embeddings[rows])
    del previous
    position = {product_id: row for row, product_id in enumerate(ids)}
    order = np.fromiter((position[product_id] for product_id in index.ids), np.int64, count=n)
    matrix = embeddings[order]
    exact = ExactSearcher(matrix, index.ids)
    tuner = DepthTuner.over(index, exact, matrix, target_recall, evaluation_queries)
    schedule, short, retuned = tuner.verify(schedule, retune=True)
    if short:
        logger.info("the updated tree misses the target (%s): training a new tree", "; ".join(short))
        return None
    done = (
        f"last night's tree updated ({changes.added:,} products added, "
        f"{len(rows) - changes.added:,} changed, {len(changes.removed):,} removed, {changes.kept:,} kept), "
        "last night's schedule re-checked at every tree depth" + "".join(f"; {line}" for line in retuned)
    )
    logger.info("%s", done)
    history = TreeHistory(history.trained_vectors, history.updates + 1, changed)
    # The speeds last night's build timed, at the size it timed them (`comparable_schedule` compares it).
    report = tree_report(schedule, target_recall, done, dict(earlier["speed"]), history)
    return index.with_schedule(schedule, exact), report, matrix


def update_or_train(
    previous_dir: str | Path | None,
    config: ScannIndexConfig,
    embeddings: np.ndarray,
    ids: Sequence[str],
    depth: int,
    target_recall: float | None,
    *,
    serving_depths: Sequence[int],
    earlier: dict[str, Any] | None = None,
    explicit: Mapping[str, Any] | None = None,
    evaluation_queries: np.ndarray | None = None,
) -> tuple[ScannIndex, RecallReport, np.ndarray]:
    """Last night's tree updated where it may be (`update_within_target`), else `train_within_target`;
    with tonight's matrix in the index's row order."""
    shared: dict[str, Any] = {"serving_depths": serving_depths, "evaluation_queries": evaluation_queries}
    if previous_dir and earlier and target_recall:
        args = (previous_dir, earlier, config, embeddings, ids, depth, target_recall)
        updated = update_within_target(*args, explicit=explicit, **shared)
        if updated is not None:
            return updated
    index, report = train_within_target(
        config, embeddings, ids, depth, target_recall, earlier=earlier, **shared
    )
    return index, report, embeddings


def _refusal(schedule: SearchSchedule | None, history: TreeHistory | None) -> str | None:
    """Why last night's tree cannot be updated before it is even loaded; None when it may be."""
    if schedule is None or not schedule.uses_tree or schedule.serving_default is None:
        return "last night's index has no tree with a schedule tuned for tonight's depths and size"
    if history is None:
        return "last night's index does not record the tree it was trained as"
    if history.updates >= MAX_UPDATES:
        return f"the tree has been updated {history.updates} nights since it was trained"
    return None


def _history(earlier: dict[str, Any] | None) -> TreeHistory | None:
    """The tree's history from last night's ``recall``; an index built before histories were written
    counts as trained on the corpus its speeds were timed on, and not updated since."""
    earlier = earlier or {}
    if "tree_history" in earlier:  # one that does not parse is not guessed at: a new tree is trained
        return TreeHistory.from_dict(earlier["tree_history"])
    vectors = (earlier.get("speed") or {}).get("vectors")
    if earlier.get("choice") == "approximate" and isinstance(vectors, int):
        return TreeHistory(trained_vectors=vectors)
    return None


def _vectors_of(index: ScannIndex, directory: Path) -> np.ndarray:
    """Last night's float32 vectors in its row order: its exact searcher's, else ScaNN's own copy."""
    if index.exact_searcher is not None:
        return index.exact_searcher.corpus
    return np.load(directory / SCANN_DIR / "dataset.npy", mmap_mode="r")


__all__ = [
    "MAX_CHANGED_SINCE_TRAINING",
    "MAX_UPDATES",
    "TreeChanges",
    "same_recipe",
    "tree_changes",
    "update_or_train",
    "update_within_target",
]
