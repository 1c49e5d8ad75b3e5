"""The union recall's one-shard-at-a-time pieces: its rank keys order as the merged rankings do, and an
embed output that lacks a shard's vector is named, not measured wrong.

The figure itself is checked against a plain whole-index computation in
`tests/test_index_partitioned.py::test_the_build_measures_recall_over_the_union_and_writes_it`.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from index_builder.searcher import sort_rows
from pipelines.index.union_recall import _key_rows, _key_scores, _rank_keys, _TopK


def test_rank_keys_sort_as_score_descending_ties_by_row_and_give_the_score_back() -> None:
    rng = np.random.default_rng(3)
    scores = rng.choice(np.float32([-1.0, -0.25, -1e-8, 0.0, 1e-8, 0.5, 0.75, 1.0]), size=(20, 40))
    rows = np.stack([rng.permutation(1_000)[:40] for _ in range(20)]).astype(np.int64)
    keys = _rank_keys(scores, rows)
    order = np.argsort(keys, axis=1)
    want_rows, want_scores = sort_rows(rows, scores)
    np.testing.assert_array_equal(np.take_along_axis(rows, order, 1), want_rows)
    np.testing.assert_array_equal(_key_scores(keys), scores)
    np.testing.assert_array_equal(_key_rows(keys), rows)
    assert want_scores.dtype == np.float32


def test_merging_shards_keeps_the_best_k_of_their_union() -> None:
    rng = np.random.default_rng(5)
    parts = [(rng.random((4, 30)).astype(np.float32), np.arange(30) + 30 * part) for part in range(3)]
    top = _TopK.empty(4)
    for scores, rows in parts:
        top = top.merged(_rank_keys(scores, rows), scores, 11)
    rows, carried = top.ordered()
    every_score = np.concatenate([scores for scores, _ in parts], axis=1)
    every_row = np.broadcast_to(np.concatenate([rows for _, rows in parts]), every_score.shape)
    want_rows, want_scores = sort_rows(np.ascontiguousarray(every_row), every_score)
    np.testing.assert_array_equal(rows, want_rows[:, :11])
    np.testing.assert_array_equal(carried, want_scores[:, :11])


def test_embeddings_missing_a_products_vector_are_named(tmp_path: Path) -> None:
    from bench.sharded_eval_bench import write_data
    from jobs.cli import parse_command
    from pipelines.index.partitioned import build_partitioned
    from pipelines.index.union_recall import measure_union_recall

    write_data(tmp_path, 600, 10, 0)
    embeddings = tmp_path / "embeddings"
    flags = ["--embeddings", str(embeddings), "--output", str(tmp_path / "index")]
    build_partitioned(*parse_command("build-index", [*flags, "--num_index_shards", "2", "--depth", "20"]))
    short = tmp_path / "short"
    shutil.copytree(embeddings, short)
    path = sorted(short.glob("embeddings*.parquet"))[0]
    table = pq.read_table(path)
    pq.write_table(table.slice(1), path)
    with pytest.raises(ValueError, match=r"holds \d+ of the \d+ vectors of .*shard-0000"):
        measure_union_recall(str(tmp_path / "index"), str(short), 20)
