"""The evaluation searched part by part (issue 62, item 5): its metrics equal the whole-index search's on
the same index, for the dense, the BM25 and the fused ranking, and for exact search over the embedding
files; a worker opens one part only."""

from __future__ import annotations

import json
from pathlib import Path

import apache_beam as beam
import numpy as np
from apache_beam.options.pipeline_options import PipelineOptions

from evaluation import RelevanceRule, parse_metrics
from evaluation.ranked import CorpusIds, score_query
from index_builder import ExactSearcher, PartitionedIndex
from pipelines.evaluate.corpus_parts import embedding_parts, index_carries_bm25, index_parts
from pipelines.evaluate.searchers import SearcherSpec
from pipelines.evaluate.sharded import BM25, DENSE, FUSED, SearchPartsAndScore
from pipelines.evaluate.transforms import JudgedQuery, SearchAndScore
from pipelines.io.parquet_reading import read_embeddings
from tests.test_lexical_shards import QUERIES
from tests.test_lexical_shards import store as store

METRICS = parse_metrics(["recall@10", "recall@100", "ndcg@10", "mrr@10"])
RULE = RelevanceRule(positive_min_grade=2)
DEPTH = 100


def _queries(store: dict) -> list[JudgedQuery]:
    rng = np.random.default_rng(5)
    vectors = store["vectors"]
    found = []
    for i, text in enumerate(QUERIES * 3):
        near = vectors[(i * 37) % len(vectors)] + rng.normal(scale=0.3, size=vectors.shape[1])
        judged = {f"p{(i * 37 + j * 11) % 900:04d}": 3 - j % 4 for j in range(6)}
        judged["not-in-catalog"] = 3
        found.append(JudgedQuery(f"q{i}", (near / np.linalg.norm(near)).astype(np.float32), judged, text))
    return found


def _rows(folder: Path, name: str) -> dict[str, dict]:
    lines = [line for path in sorted(folder.glob(f"{name}-*")) for line in path.read_text().splitlines()]
    return {row["query_id"]: row for row in map(json.loads, lines)}


def _rounded(rows: dict[str, dict]) -> dict[str, dict]:
    return {q: {k: round(v, 9) if isinstance(v, float) else v for k, v in r.items()} for q, r in rows.items()}


def _run_parts(queries, parts, lexical, systems, folder: Path) -> None:
    with beam.Pipeline(options=PipelineOptions(["--direct_num_workers", "1"])) as pipeline:
        scored = pipeline | beam.Create(queries) | SearchPartsAndScore(
            parts, lexical, systems, systems[-1], DEPTH, METRICS, RULE, batch_size=4
        )
        for system in systems:
            _ = scored[f"per_query_{system}"] | f"W{system}" >> beam.Map(json.dumps) | f"T{system}" >> (
                beam.io.WriteToText(str(folder / system))
            )
        _ = scored["run"] | beam.FlatMap(lambda t: t.to_pylist()) | "R" >> beam.Map(json.dumps) | (
            "TR" >> beam.io.WriteToText(str(folder / "run"))
        )


def _expected(queries, rankings: dict[str, list[str]], ids: list[str]) -> dict[str, dict]:
    corpus = CorpusIds(ids)
    found = {}
    for query in queries:
        judged = {pid: grade for pid, grade in query.judgments.items() if pid in corpus}
        rows = corpus.rows(rankings[query.query_id])
        found[query.query_id] = score_query(query.query_id, rows, judged, corpus, METRICS, RULE)[0]
    return found


def test_dense_bm25_and_fused_rankings_by_part_equal_the_whole_index(store, tmp_path) -> None:
    queries = _queries(store)
    parts = index_parts(str(store["three"]))
    assert len(parts) == 3 and index_carries_bm25(str(store["three"]))
    _run_parts(queries, parts, parts, (DENSE, BM25, FUSED), tmp_path)
    index = PartitionedIndex.load(store["three"])
    vectors = np.stack([q.vector for q in queries])
    texts = [q.text for q in queries]
    ids = list(index.ids)
    dense = index.search(vectors, DEPTH)
    lexical = index.lexical.search(texts, DEPTH)
    fused = index.search_hybrid(vectors, texts, DEPTH)
    expected = {
        DENSE: {q.query_id: list(dense.ids[i]) for i, q in enumerate(queries)},
        BM25: {q.query_id: [ids[r] for r in lexical[i].rows] for i, q in enumerate(queries)},
        FUSED: {q.query_id: list(fused.ids[i]) for i, q in enumerate(queries)},
    }
    for system, rankings in expected.items():
        found = _rows(tmp_path, system)
        assert _rounded(found) == _rounded(_expected(queries, rankings, ids)), system
    # The whole-index evaluation (one searcher over every shard) gives the dense rows too.
    with beam.Pipeline() as pipeline:
        scored = pipeline | beam.Create(queries) | SearchAndScore(
            SearcherSpec("ann", str(store["three"])), DEPTH, METRICS, RULE, 4
        )
        _ = scored["per_query"] | beam.Map(json.dumps) | beam.io.WriteToText(str(tmp_path / "whole"))
    assert _rows(tmp_path, "whole") == _rows(tmp_path, DENSE)
    # The primary system's run: every query's fused ranking, each product named by its own part.
    run = [json.loads(line) for p in tmp_path.glob("run-*") for line in p.read_text().splitlines()]
    by_query: dict[str, list[tuple[int, str]]] = {}
    for row in run:
        by_query.setdefault(row["query_id"], []).append((row["rank"], row["product_id"]))
    assert {q: [pid for _, pid in sorted(rows)] for q, rows in by_query.items()} == expected[FUSED]


def test_exact_search_by_embedding_file_equals_one_exact_searcher(store, tmp_path) -> None:
    queries = _queries(store)
    parts = embedding_parts(str(store["root"] / "embeddings"))
    assert len(parts) == 2 and [p.offset for p in parts] == [0, 450]
    _run_parts(queries, parts, (), (DENSE,), tmp_path)
    ids, matrix, _ = read_embeddings(str(store["root"] / "embeddings"))
    found = ExactSearcher(matrix, ids).search(np.stack([q.vector for q in queries]), DEPTH)
    rankings = {q.query_id: list(found.ids[i]) for i, q in enumerate(queries)}
    assert _rounded(_rows(tmp_path, DENSE)) == _rounded(_expected(queries, rankings, ids))


def test_a_part_sends_twice_its_share_and_a_cut_that_may_hide_candidates_is_detected() -> None:
    from pipelines.evaluate.sharded import PartHits, merge_hits, part_depth, part_depth_reached

    assert (part_depth(10_000, 16), part_depth(100, 3), part_depth(10, 1)) == (1_350, 100, 10)

    def hits(part: int, scores: list[float], complete: bool = False) -> PartHits:
        keys = np.arange(part * 10, part * 10 + len(scores), dtype=np.int64)
        return PartHits(DENSE, part, np.asarray(scores, np.float32), keys, complete=complete)

    spread = [hits(0, [0.9, 0.7, 0.5]), hits(1, [0.8, 0.6, 0.4])]
    assert not part_depth_reached(spread, merge_hits(spread, 4), 4)  # each part's last is below the cut
    crowded = [hits(0, [0.9, 0.8, 0.7]), hits(1, [0.3, 0.2, 0.1])]
    assert part_depth_reached(crowded, merge_hits(crowded, 4), 4)  # part 0 may hold a fourth above 0.3
    whole = [hits(0, [0.9, 0.8, 0.7], complete=True), hits(1, [0.3, 0.2, 0.1])]
    assert not part_depth_reached(whole, merge_hits(whole, 4), 4)  # part 0 sent all it has
