"""`--encode_ahead`: the model in a thread of its own a batch ahead of Beam's, its texts tokenized on a
third (`pipelines.embed.ahead`), writes what RunInference's path writes: the same rows, annotations, dead
letters and counts."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import apache_beam as beam
import numpy as np
import pyarrow.compute as pc
import pytest
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from jobs.cli import main
from model.encoder import Side
from pipelines.embed.batches import EmbedBatches, GatherProducts, ProductBatchHandler
from pipelines.inference import ModelIdentity
from pipelines.io.parquet_reading import read_parquet_table
from pipelines.settings.options import EmbedSettings, ModelSettings
from tests.test_embed_pipeline import _FailingHandler, catalog, write_catalog


def _embed(tmp_path: Path, model: Path, products: str, ahead: str) -> tuple[list[dict], dict]:
    out = tmp_path / f"ahead-{ahead}"
    argv = ["embed", "--products", products, "--model", str(model), "--output", str(out)]
    argv += ["--batch_size", "8", "--encode_ahead", ahead, "--max_dead_letter_fraction", "0.2"]
    argv += ["--device", "auto"]  # torch has no "auto": madr's default choice, as typed
    assert main(argv) == 0
    table = read_parquet_table(str(out), "embeddings")
    rows = table.take(pc.sort_indices(table, [("product_id", "ascending")])).to_pylist()
    return rows, json.loads((out / "manifest.json").read_text())


def test_madr_embed_ahead_writes_what_runinference_writes(tmp_path: Path, tiny_model_dir: Path) -> None:
    rows = [*catalog(45), {**catalog(1)[0], "product_id": "", "title": "no id"}]
    products = write_catalog(tmp_path / "products.parquet", rows, row_group_size=7)
    plain, plain_manifest = _embed(tmp_path, tiny_model_dir, products, "false")
    ahead, ahead_manifest = _embed(tmp_path, tiny_model_dir, products, "true")
    assert len(ahead) == 45
    vectors = [np.asarray([row.pop("embedding") for row in found], np.float32) for found in (plain, ahead)]
    np.testing.assert_array_equal(vectors[1], vectors[0])
    assert ahead == plain  # ids, annotations, hashes
    counts = [manifest["counts"] for manifest in (plain_manifest, ahead_manifest)]
    assert counts[1] == counts[0] and counts[0]["inference_batches"] == 6  # 45 products, batches of 8
    assert counts[0]["products_dead_lettered"] == 1


class _FailingTokenizerHandler(_FailingHandler):
    """`_FailingHandler` whose tokenizing raises on a batch holding BOOM too (ahead, on its own thread)."""

    def tokenize(self, products, model):
        if any("BOOM" in text for text in products.texts):
            raise RuntimeError("simulated tokenizer failure")
        return super().tokenize(products, model)


def _failing_run(model: Path, runner, ahead: bool, handler_class: type = _FailingHandler) -> int:
    """Products through `EmbedBatches` with a model that raises on a batch holding BOOM: the good ones
    written, BOOM dead-lettered (asserted in the pipeline); the model calls counted."""
    products = [*catalog(3), {**catalog(1)[0], "product_id": "boom", "title": "BOOM sock"}, *catalog(9)[5:]]
    identity = ModelIdentity.of(str(model))
    handler = handler_class(ModelSettings(str(model), batch_size=4), Side.DOCUMENT)
    pipeline = TestPipeline(runner=runner)
    batches = pipeline | beam.Create(products) | beam.ParDo(GatherProducts(identity, 4))
    embedded = batches | EmbedBatches(handler, identity, ahead=ahead)
    rows = embedded["rows"] | beam.FlatMap(lambda table: table.column("product_id").to_pylist())
    assert_that(rows, equal_to(["p0", "p1", "p2", "p5", "p6", "p7", "p8"]))
    assert_that(
        embedded["dead_letters"] | beam.Map(lambda d: d["record_id"]), equal_to(["boom"]), label="dead"
    )
    result = pipeline.run()
    result.wait_until_finish()
    (counter,) = result.metrics().query(MetricsFilter().with_name("inference_batches"))["counters"]
    return counter.committed


def test_a_failing_batch_ahead_keeps_its_good_records_and_counts_each_retry(
    tiny_model_dir, local_runner
) -> None:
    calls = _failing_run(tiny_model_dir, local_runner, ahead=True)
    assert calls == _failing_run(tiny_model_dir, local_runner, ahead=False)
    # The batch holding BOOM raises before the model runs, then is retried record by record: its 3 good
    # records, then the second batch, each one model call.
    assert calls == 3 + 1


def test_a_batch_whose_tokenizing_fails_ahead_is_encoded_again_and_its_bad_record_isolated(
    tiny_model_dir, local_runner
) -> None:
    calls = _failing_run(tiny_model_dir, local_runner, ahead=True, handler_class=_FailingTokenizerHandler)
    assert calls == _failing_run(tiny_model_dir, local_runner, ahead=False) == 3 + 1


_THREADS: list[tuple[str, str, bool]] = []  # the local runner runs the DoFn in this process


class _ThreadRecordingHandler(ProductBatchHandler):
    def tokenize(self, products, model):
        _THREADS.append(("tokenize", threading.current_thread().name, True))
        return super().tokenize(products, model)

    def encode_products(self, products, model, tokens=None):
        _THREADS.append(("encode", threading.current_thread().name, tokens is not None))
        return super().encode_products(products, model, tokens)


def test_texts_are_tokenized_on_their_own_thread_and_the_model_thread_gets_the_tokens(
    tiny_model_dir, local_runner
) -> None:
    _THREADS.clear()
    identity = ModelIdentity.of(str(tiny_model_dir))
    handler = _ThreadRecordingHandler(ModelSettings(str(tiny_model_dir), batch_size=4), Side.DOCUMENT)
    with TestPipeline(runner=local_runner) as pipeline:
        batches = pipeline | beam.Create(catalog(10)) | beam.ParDo(GatherProducts(identity, 4))
        embedded = batches | EmbedBatches(handler, identity, ahead=True)
        ids = embedded["rows"] | beam.FlatMap(lambda table: table.column("product_id").to_pylist())
        assert_that(ids, equal_to([f"p{n}" for n in range(10)]))
    steps = sorted({(step, name.split("_")[0], given) for step, name, given in _THREADS})
    assert steps == [("encode", "madr-encode", True), ("tokenize", "madr-tokenize", True)]
    assert sum(step == "encode" for step, _, _ in _THREADS) == 3  # 10 products, batches of 4


def test_encode_ahead_is_on_where_the_model_runs_on_a_gpu_unless_told() -> None:
    assert EmbedSettings(products="p").encodes_ahead("cuda") and not EmbedSettings(
        products="p"
    ).encodes_ahead("cpu")
    assert EmbedSettings(products="p", encode_ahead="true").encodes_ahead("cpu")
    assert not EmbedSettings(products="p", encode_ahead="false").encodes_ahead("cuda")
    with pytest.raises(ValueError, match="--encode_ahead must be one of auto, true, false"):
        EmbedSettings(products="p", encode_ahead="yes")
