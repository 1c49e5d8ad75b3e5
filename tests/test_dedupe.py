"""Duplicate product ids: the documented rule, applied without grouping whole records, on a real runner."""

from __future__ import annotations

import json
from pathlib import Path

import apache_beam as beam
import numpy as np
import pytest
from apache_beam.runners.portability.fn_api_runner import FnApiRunner
from apache_beam.runners.worker import bundle_processor
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from jobs.cli import parse_command
from model import content_hash, document_text
from pipelines.embed.dedupe import KeptCopy, _Copy, _kept_copies, raw_product_id
from pipelines.embed.key_index import CollectKeys, IndexKeys, KeyIndex, as_side_input
from pipelines.embed.stage import build_embed_pipeline, embed_catalog
from pipelines.io.parquet_reading import read_parquet_table
from schemas import InvalidRecord, validate_product
from tests.test_embed_pipeline import catalog, write_catalog


@pytest.mark.parametrize(
    "raw", [" p1 ", "p1", 7, "", "   ", None, True, 1.5, ["p1"], "p\n1", "p\u202e1", "p" * 257, "e\u0301"]
)
def test_raw_ids_are_normalised_exactly_as_validation_does(raw) -> None:
    record = {**catalog(1)[0], "product_id": raw}
    try:
        expected = validate_product(record)["product_id"]
    except InvalidRecord:
        expected = None
    assert raw_product_id(raw) == expected


def test_collect_keys_finds_repeated_keys_and_keeps_values_of_the_others(local_runner) -> None:
    chunks = [
        (np.array([5, 9], dtype=np.uint64), np.array([50, 90], dtype=np.uint64)),
        (5, 51),
        (2**64 - 1, 7),
    ]
    with TestPipeline(runner=local_runner) as pipeline:
        index = pipeline | beam.Create(chunks) | beam.CombineGlobally(CollectKeys())

        def check(found: list[KeyIndex]) -> None:
            (only,) = found
            assert only.repeated.tolist() == [5]
            assert (only.get(9), only.get(2**64 - 1), only.get(5), only.get(3)) == (90, 7, None, None)
            assert 5 in only and 9 in only and 3 not in only and len(only) == 3

        assert_that(index, check)


def test_an_empty_input_reads_as_an_empty_index(local_runner) -> None:
    with TestPipeline(runner=local_runner) as pipeline:
        index = pipeline | "NoKeys" >> beam.Create([]) | IndexKeys(with_values=False)
        read = pipeline | beam.Create([7]) | beam.Map(lambda key, i: (len(i), key in i), as_side_input(index))
        assert_that(read, equal_to([(0, False)]))


def test_ids_sharing_a_key_are_each_kept_but_never_matched_for_reuse() -> None:
    copies = [
        _Copy("a", ("f", 3), '{"title": "b"}', "h-a2"),
        _Copy("a", ("f", 1), '{"title": "b"}', "h-a1"),  # byte-identical copy: the position decides
        _Copy("b", ("f", 2), '{"title": "c"}', "h-b"),
    ]
    kept = dict(_kept_copies((123, copies)))
    assert kept == {"a": KeptCopy(("f", 1), "h-a1", False), "b": KeptCopy(("f", 2), "h-b", False)}
    assert dict(_kept_copies((123, copies[:2]))) == {"a": KeptCopy(("f", 1), "h-a1", True)}


def _duplicated_catalog() -> tuple[list[dict], dict]:
    """15 records: d1 twice (different), d2 three times (byte-identical), d3 once invalid once valid."""
    base = catalog(8)
    zebra = {**base[0], "product_id": "d1", "title": "Zebra sock"}
    alpha = {**base[0], "product_id": "d1", "title": "Alpha sock"}  # its canonical JSON sorts first
    same = {**base[1], "product_id": "d2"}
    invalid = {**base[2], "product_id": "d3", "title": ""}
    valid = {**base[2], "product_id": "d3"}
    return [zebra, *base[:4], same, invalid, same, *base[4:], same, alpha, valid], alpha


def _embed(tmp_path: Path, model: Path, name: str, rows: list[dict]) -> tuple[dict, dict, list]:
    # Two files, row groups of 3: duplicates meet across row groups and files.
    folder = tmp_path / name
    folder.mkdir()
    half = len(rows) // 2
    write_catalog(folder / "a.parquet", rows[:half], row_group_size=3)
    write_catalog(folder / "b.parquet", rows[half:], row_group_size=3)
    out = folder / "out"
    flags = ["--products", str(folder / "*.parquet"), "--model", str(model), "--output", str(out),
             "--max_dead_letter_fraction", "0.5"]  # fmt: skip
    # How many inference batches there are depends on how bundles were cut; records must not.
    counts = {
        k: v for k, v in embed_catalog(*parse_command("embed", flags)).items() if k.startswith("products_")
    }
    table = read_parquet_table(str(out), "embeddings", ["product_id", "content_hash"]).to_pylist()
    hashes = {row["product_id"]: row["content_hash"] for row in table}
    assert len(hashes) == len(table)  # every id written once
    letters = [
        json.loads(line) for f in out.glob("dead_letters*.jsonl") for line in f.read_text().splitlines()
    ]
    return counts, hashes, sorted(letters, key=lambda letter: (letter["record_id"], letter["reason"]))


def test_duplicates_are_dead_lettered_by_the_rule_whatever_the_order(tmp_path, tiny_model_dir) -> None:
    rows, alpha = _duplicated_catalog()
    counts, hashes, letters = _embed(tmp_path, tiny_model_dir, "forward", rows)
    names = ("products_read", "products_embedded", "products_dead_lettered")
    assert [counts[name] for name in names] == [15, 11, 4]
    kept = content_hash(document_text(validate_product(alpha)))
    assert hashes["d1"] == kept  # not the copy read first (Zebra)
    assert sorted(hashes) == sorted([*(f"p{i}" for i in range(8)), "d1", "d2", "d3"])
    reasons = [(letter["record_id"], letter["stage"], letter["reason"]) for letter in letters]
    duplicate = "duplicate product_id; kept the copy whose canonical JSON sorts first"
    assert reasons[0] == ("d1", "dedupe", f"product 'd1': {duplicate} (content hash {kept[:12]})")
    assert [r[:2] for r in reasons] == [("d1", "dedupe"), ("d2", "dedupe"), ("d2", "dedupe"),
                                        ("d3", "validate_product")]  # fmt: skip
    assert "Zebra sock" in letters[0]["record_json"]

    assert _embed(tmp_path, tiny_model_dir, "reversed", rows[::-1]) == (counts, hashes, letters)


def _stage_of(stages: list, name: str):
    (stage,) = [s for s in stages if any(name in t.unique_name for t in s.transforms)]
    return stage


@pytest.mark.parametrize("with_previous", [False, True])
def test_products_go_from_reading_to_writing_in_one_stage(tmp_path, tiny_model_dir, with_previous) -> None:
    """The local runner keeps in memory whatever leaves a fused stage: only dead letters and the
    writer's file names may leave the stage that reads products (and the one that reads previous rows)."""
    products = write_catalog(tmp_path / "products.parquet", catalog(6))
    flags = ["--products", products, "--model", str(tiny_model_dir)]
    if with_previous:
        embed_catalog(*parse_command("embed", [*flags, "--output", str(tmp_path / "mon")]))
        flags += ["--previous", str(tmp_path / "mon")]
    pipeline, _ = build_embed_pipeline(*parse_command("embed", [*flags, "--output", str(tmp_path / "tue")]))
    _, stages = FnApiRunner().create_stages(pipeline.to_runner_api())
    # reading step -> (its writer, what else may leave: dead letters, the 16-byte-per-product keys)
    plan_outputs = ("AllDeadLetters/Write/", "PlanEmbedding/IndexTonight/")
    steps = {"PlanEmbedding/Plan": ("WriteEmbeddings/", plan_outputs)}
    if with_previous:
        steps["PlanEmbedding/ReusedRows"] = ("WriteReused/", ())
    for reader, (writer, others) in steps.items():
        stage = _stage_of(stages, reader)
        names = [t.unique_name for t in stage.transforms]
        assert any(n.startswith(writer) and n.endswith("WriteImpl/WriteBundles") for n in names), names
        leaving = [t.unique_name for t in stage.transforms if t.spec.urn == bundle_processor.DATA_OUTPUT_URN]
        # The writer's file names (row dicts and reused Arrow tables alike go through WriteParquetShards).
        allowed = (*others, f"{writer}WriteParquetShards/Write/WriteImpl/GroupByKey/Write")
        assert leaving and all(n.startswith(allowed) for n in leaving), leaving
