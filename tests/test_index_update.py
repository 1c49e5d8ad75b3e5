"""Last night's tree updated instead of retrained (`index_builder.update`), through `madr build-index`'s
one-shard Beam path (the nightly's) with --previous_index, on a real ScaNN tree.

8,000 seeded clustered unit vectors x 32: enough for the sizing rule to give a tree with hashing and
re-ranking at max_k 100 (below 5,000 vectors the index is exact and there is no tree to update).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from index_builder import ExactSearcher, ScannIndex, depth_tuning
from index_builder.config import ScannIndexConfig
from index_builder.update import MAX_CHANGED_SINCE_TRAINING, same_recipe, tree_changes
from jobs.cli import parse_command
from pipelines.index.partitioned import build_partitioned
from tests.test_index_partitioned import clustered_unit_vectors, write_embeddings

N, DIM, MAX_K = 8_000, 32, 100


def _night(
    root: Path, name: str, ids: list[str], matrix: np.ndarray, previous: str | None, extra: tuple = ()
) -> dict:
    write_embeddings(root / name / "embeddings", ids, matrix)
    flags = [
        *("--embeddings", str(root / name / "embeddings"), "--output", str(root / name / "index")),
        *("--depth", str(MAX_K), "--serving_depths", "10,100", "--num_index_shards", "1"),
        *(("--previous_index", previous) if previous else ()),
        *extra,
    ]
    build_partitioned(*parse_command("build-index", flags))
    shard = root / name / "index" / "shard-00000-of-00001"
    return json.loads((shard / "manifest.json").read_text())["recall"]


@pytest.fixture(scope="module")
def nights(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    """Monday's tree; Tuesday with 100 products removed, 200 changed and 100 added, built over Monday's.
    Timed as if the tree were faster at k = 10 and exact scoring at k = 100 (a tree and an exact depth:
    at 8,000 x 32 exact scoring wins everywhere on its own)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(depth_tuning, "queries_per_second", _timing)
        yield _nights(tmp_path_factory)


def _timing(searcher, queries: np.ndarray, k: int, **options) -> float:
    tree = {10: 2_000.0, MAX_K: 500.0}[k]
    return 1_000.0 if isinstance(searcher, ExactSearcher) else tree


def _nights(tmp_path_factory: pytest.TempPathFactory) -> dict:
    rng = np.random.default_rng(46)
    centres = rng.normal(size=(40, DIM))
    root = tmp_path_factory.mktemp("update")
    ids = [f"sku-{i:05d}" for i in range(N)]
    monday = clustered_unit_vectors(rng, centres, N)
    monday_recall = _night(root, "monday", ids, monday, None)
    removed, changed = ids[:100], ids[100:300]
    added = [f"new-{i:03d}" for i in range(100)]
    tuesday_ids = sorted(ids[100:] + added)
    vectors = dict(zip(ids, monday, strict=True))
    fresh = clustered_unit_vectors(rng, centres, 300)  # 300 upserts: more than one of ScaNN's batches
    vectors.update(zip(changed + added, fresh, strict=True))
    tuesday = np.stack([vectors[product_id] for product_id in tuesday_ids])
    tuesday_recall = _night(root, "tuesday", tuesday_ids, tuesday, str(root / "monday" / "index"))
    return {
        "root": root,
        "monday": monday_recall,
        "tuesday": tuesday_recall,
        "ids": tuesday_ids,
        "vectors": vectors,
        "removed": removed,
        "changed": changed,
        "added": added,
        "rng": rng,
        "centres": centres,
    }


def test_a_night_with_little_churn_updates_last_nights_tree(nights) -> None:
    monday, tuesday = nights["monday"], nights["tuesday"]
    assert monday["choice"] == "approximate"
    assert monday["tree_history"] == {"trained_vectors": N, "updates": 0, "changed_since_training": 0}
    assert tuesday["reason"].startswith(
        "last night's tree updated (100 products added, 200 changed, 100 removed"
    )
    assert tuesday["tree_history"] == {"trained_vectors": N, "updates": 1, "changed_since_training": 400}
    # The schedule was re-checked, not re-tuned: the same settings at every depth, the recall re-measured.
    settings = ("depth", "searcher", "leaves_to_search", "pre_reorder_num_neighbors")
    assert [[e[key] for key in settings] for e in tuesday["schedule"]] == [
        [e[key] for key in settings] for e in monday["schedule"]
    ]
    assert [entry["searcher"] for entry in tuesday["schedule"]] == ["tree", "exact"]
    assert tuesday["schedule"][0]["tree_recall"] >= tuesday["target"]
    # No pickle in the artifact: ScaNN pickles a searcher's ids when it has them.
    assert not list((nights["root"] / "tuesday" / "index").rglob("*.pkl"))


def test_the_updated_tree_finds_the_new_and_changed_vectors_and_none_of_the_removed(nights) -> None:
    index = ScannIndex.load(nights["root"] / "tuesday" / "index" / "shard-00000-of-00001")
    assert sorted(index.ids) == nights["ids"] and index.size == len(nights["ids"])
    vectors = nights["vectors"]
    moved = nights["changed"] + nights["added"]
    queries = np.stack([vectors[product_id] for product_id in moved])
    # The tree (k = 10) finds them as often as the target says; the exact depth (k = 100) always, scoring
    # tonight's vectors in the updated tree's row order.
    found = index.search(queries, 10)
    assert np.mean([product_id in row for product_id, row in zip(moved, found.ids, strict=True)]) >= 0.95
    assert [row[0] for row in index.search(queries, MAX_K).ids] == moved
    everything = index.search(np.stack(list(vectors.values())), 10).ids
    assert not {product_id for row in everything for product_id in row} & set(nights["removed"])


def test_churn_past_the_bound_since_training_trains_a_new_tree(nights) -> None:
    """Wednesday's changes alone stay under the bound; with Tuesday's 400 they cross it: a new tree, its
    history reset."""
    rng, ids, vectors = nights["rng"], nights["ids"], dict(nights["vectors"])
    count = int(MAX_CHANGED_SINCE_TRAINING * N) - 400 + 1
    for product_id, vector in zip(
        ids[:count], clustered_unit_vectors(rng, nights["centres"], count), strict=True
    ):
        vectors[product_id] = vector
    matrix = np.stack([vectors[product_id] for product_id in ids])
    root = nights["root"]
    wednesday = _night(root, "wednesday", ids, matrix, str(root / "tuesday" / "index"))
    assert not wednesday["reason"].startswith("last night's tree updated")
    assert wednesday["tree_history"] == {
        "trained_vectors": len(ids),
        "updates": 0,
        "changed_since_training": 0,
    }


def test_tree_changes_counts_removed_added_and_changed_vectors() -> None:
    old = np.eye(4, dtype=np.float32)
    # Tonight a keeps its vector, b takes a's, e is new (d's vector); c and d are gone.
    changes = tree_changes(["a", "b", "c", "d"], old, ["a", "b", "e"], np.stack([old[0], old[0], old[3]]))
    assert changes.removed == ["c", "d"]
    assert changes.upserted_rows.tolist() == [1, 2] and changes.added == 1 and changes.kept == 1


def test_another_leaf_count_asked_for_is_another_recipe() -> None:
    trained = ScannIndexConfig.from_dict(_tree_config(num_leaves=90))
    tonight = ScannIndexConfig.from_dict(_tree_config(num_leaves=95))
    assert same_recipe(trained, tonight, {})  # the leaf count follows the corpus size
    assert not same_recipe(trained, tonight, {"num_leaves": 95})
    other = ScannIndexConfig.from_dict(_tree_config(num_leaves=90, soar_lambda=1.5))
    assert not same_recipe(trained, other, {})


def _tree_config(**changes) -> dict:
    from index_builder.builder import config_for_corpus

    return {**config_for_corpus(N, DIM, MAX_K).to_dict(), **changes}


def test_a_tree_built_before_histories_counts_as_trained_on_the_corpus_it_was_timed_on() -> None:
    from index_builder.update import _history

    old = {"choice": "approximate", "speed": {"vectors": 1_000_000}}
    assert _history(old).to_dict() == {
        "trained_vectors": 1_000_000,
        "updates": 0,
        "changed_since_training": 0,
    }
    assert _history({"choice": "exact", "speed": {"vectors": 10}}) is None
    # A history that does not parse is not guessed at: no update, a new tree.
    assert _history({**old, "tree_history": {"trained_vectors": 5, "updates": 2}}) is None


def test_an_int8_reranked_tree_is_not_updated_but_trained_anew(tmp_path) -> None:
    """int8 re-ranking keeps no float32 vectors to tell the changed products by: the night trains."""
    rng = np.random.default_rng(8)
    centres = rng.normal(size=(40, DIM))
    ids = [f"sku-{i:05d}" for i in range(6_000)]
    matrix = clustered_unit_vectors(rng, centres, len(ids))
    int8 = ("--reorder_precision", "int8")
    _night(tmp_path, "mon", ids, matrix, None, int8)
    matrix[:10] = clustered_unit_vectors(rng, centres, 10)
    tuesday = _night(tmp_path, "tue", ids, matrix, str(tmp_path / "mon" / "index"), int8)
    assert tuesday["tree_history"]["updates"] == 0 and tuesday["choice"] == "approximate"
