"""bench.embed_profile's sorting of py-spy samples into the parts of `madr embed`."""

from __future__ import annotations

from bench.embed_profile import MADR_PARTS, PEER_PARTS, classify, per_product, seconds_by_part

RUN = ";".join(
    [
        "main (jobs/cli.py:60)",
        "embed_catalog (pipelines/embed/stage.py:360)",
        "Pipeline.run (beam/pipeline.py:1)",
    ]
)
INFERENCE = ";".join(
    [
        RUN,
        "_RunInferenceDoFn.process (beam/base.py:1)",
        "EncoderModelHandler.encode_batch (pipelines/inference.py:2)",
    ]
)


def test_a_sample_goes_to_the_innermost_part_its_stack_names() -> None:
    assert (
        classify(f"{INFERENCE};OnnxRuntimeEncoder.__call__ (model/onnx_runtime.py:320)", MADR_PARTS)
        == "encode"
    )
    assert classify(f"{INFERENCE};MtBert.tokenize (model/encoder.py:120)", MADR_PARTS) == "tokenize"
    assert classify(f"{INFERENCE};annotate (model/annotations.py:95)", MADR_PARTS) == "annotations"
    # A module imported lazily inside the forward pass is an import's cost, not the model's.
    lazy = f"{INFERENCE};TextEncoder.forward (model/text_encoder.py:1);_find_and_load (<frozen importlib>:1)"
    assert classify(lazy, MADR_PARTS) == "imports"
    assert classify(f"{RUN};_PlanFn.plan (pipelines/embed/incremental.py:170)", MADR_PARTS) == "plan"
    assert (
        classify(f"{RUN};ParquetTableSink.write_record (pipelines/io/parquet_shards.py:88)", MADR_PARTS)
        == "write"
    )
    assert classify(f"{RUN};SdkWorker.process_bundle (apache_beam/sdk_worker.py:1)", MADR_PARTS) == "rest"
    # Names match whole function names: `annotate_batch` or `pretokenize` are not those parts.
    assert classify(f"{RUN};pretokenize (x.py:1);annotate_batch (y.py:2)", MADR_PARTS) == "rest"
    peer = "encode (sentence_transformers/base/model.py:1);Transformer.preprocess (st/transformer.py:1230)"
    assert classify(peer, PEER_PARTS) == "tokenize"


def test_seconds_and_microseconds_per_product_add_up() -> None:
    raw = "\n".join(
        [
            f"{INFERENCE};OnnxRuntimeEncoder.__call__ (model/onnx_runtime.py:320) 300",
            f"{RUN};validate_product (schemas/validation.py:210) 20",
            "<module> (jobs/cli.py:16);_find_and_load (<frozen importlib>:1) 500",
            f"{RUN};SdkWorker.process_bundle (apache_beam/sdk_worker.py:1) 10",
        ]
    )
    seconds = seconds_by_part(raw, MADR_PARTS, rate=100)
    assert (seconds["encode"], seconds["validate"], seconds["imports"], seconds["rest"]) == (
        3.0,
        0.2,
        5.0,
        0.1,
    )
    figures = per_product(seconds, products=1000, wall=9.0)
    assert figures["startup_s"] == 5.0 and figures["total_s"] == 8.3
    assert figures["us_per_product"]["encode"] == 3000
    assert figures["steady_us_per_product"] == 3300
