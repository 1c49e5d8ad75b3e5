"""--searcher auto measures on the driver part by part: an index's shards and an embed output's files, one
in memory at a time, with the recall and the choice the whole searchers give."""

from __future__ import annotations

import weakref
from pathlib import Path

import numpy as np
import pytest

from index_builder import ExactSearcher, open_index
from jobs.cli import parse_command
from pipelines.evaluate import corpus_parts
from pipelines.evaluate.calibration import calibrate, recall_against
from pipelines.evaluate.searchers import SearcherSpec
from pipelines.index.partitioned import build_partitioned
from tests.test_index_partitioned import clustered_unit_vectors, write_embeddings


@pytest.fixture(scope="module")
def sharded(tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = tmp_path_factory.mktemp("calibration-parts")
    rng = np.random.default_rng(11)
    centres = rng.normal(size=(20, 16))
    matrix, ids = clustered_unit_vectors(rng, centres, 3_000), [f"sku-{i:05d}" for i in range(3_000)]
    write_embeddings(root / "embeddings", ids, matrix, files=3)
    flags = ["--embeddings", str(root / "embeddings"), "--output", str(root / "index")]
    # An untuned tree searching few leaves: recall below 1, so the merged rankings are put to the test.
    flags += ["--num_index_shards", "3", "--depth", "50", "--target_recall", "0", "--num_leaves", "30"]
    build_partitioned(*parse_command("build-index", flags))
    queries = clustered_unit_vectors(rng, centres, 40)
    return {"root": root, "matrix": matrix, "ids": ids, "queries": queries}


def test_auto_by_part_measures_the_recall_of_the_whole_searchers(sharded: dict, monkeypatch) -> None:
    root = sharded["root"]
    alive: list[weakref.ref] = []
    most = []
    opened = corpus_parts.CorpusPart.open_dense

    def counted(part: corpus_parts.CorpusPart):
        most.append(sum(ref() is not None for ref in alive))
        searcher = opened(part)
        alive.append(weakref.ref(searcher))
        return searcher

    monkeypatch.setattr(corpus_parts.CorpusPart, "open_dense", counted)
    ann, exact = SearcherSpec("ann", str(root / "index")), SearcherSpec("exact", str(root / "embeddings"))
    measured = calibrate(ann, exact, sharded["queries"], depth=50, min_recall=0.0)
    assert len(most) == 6 and max(most) == 0  # 3 shards and 3 files, none open when the next opens
    found = open_index(root / "index").search(sharded["queries"], 50).ids
    truth = ExactSearcher(sharded["matrix"], sharded["ids"]).search(sharded["queries"], 50).ids
    whole = recall_against(found, truth)
    assert 0.3 < whole < 1.0
    assert measured.ann_recall == pytest.approx(whole) and measured.depth == 50 and measured.queries == 40
    assert measured.ann_seconds > 0 and measured.exact_seconds > 0
    assert measured.choice == ("ann" if measured.ann_seconds < measured.exact_seconds else "exact")


def test_auto_depth_is_capped_at_the_corpus(sharded: dict, tmp_path: Path) -> None:
    root = sharded["root"]
    ann, exact = SearcherSpec("ann", str(root / "index")), SearcherSpec("exact", str(root / "embeddings"))
    measured = calibrate(ann, exact, sharded["queries"][:3], depth=10_000, min_recall=0.0)
    assert measured.depth == 3_000 and measured.ann_recall == pytest.approx(1.0)
