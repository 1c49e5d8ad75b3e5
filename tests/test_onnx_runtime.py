"""ONNX Runtime inference: the exported graph answers like the torch encoder; the cache is checked."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from model import Side, load_encoder
from model.annotations import annotate
from model.hardware import has_vnni
from model.onnx_runtime import (
    OnnxRuntimeEncoder,
    cached_graph,
    nodes_kept_in_fp32,
    quantize_graph,
)
from model.text_encoder import resolve_runtime
from pipelines.inference import EncoderModelHandler, TextToEncode
from pipelines.settings.options import ModelSettings
from schemas.manifest import sha256_file
from tests.test_baselines import build

TEXTS = ["socks", "white nike running socks for men with cushioning", "a", "juicer with two speeds"]


@pytest.fixture(scope="module")
def mtbert_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    encoder, tokenizer = build("mtbert")
    return encoder.save_pretrained(tmp_path_factory.mktemp("mtbert"), tokenizer)


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("MADR_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.mark.parametrize("variant", ["bibert", "mtbert", "madral", "madral-en-v2", "mpbert", "mural"])
@pytest.mark.parametrize("side", [Side.DOCUMENT, Side.QUERY])
def test_onnx_graph_answers_like_the_torch_encoder(
    variant: str, side: Side, tmp_path: Path, cache: Path
) -> None:
    encoder, tokenizer = build(variant)
    encoder.save_pretrained(tmp_path / "model", tokenizer)
    encoder, tokenizer = load_encoder(tmp_path / "model")
    graph, layout = cached_graph(tmp_path / "model", encoder, tokenizer, side, "fp32")
    batch = encoder.tokenize(tokenizer, TEXTS, side)
    with torch.inference_mode():
        expected = encoder(batch, side)
    actual = OnnxRuntimeEncoder(graph, layout, side)(batch, side)
    torch.testing.assert_close(actual.embedding, expected.embedding, atol=1e-5, rtol=1e-4)
    assert set(actual.aspect_logits) == set(expected.aspect_logits)
    for aspect, logits in expected.aspect_logits.items():
        torch.testing.assert_close(actual.aspect_logits[aspect], logits, atol=1e-4, rtol=1e-4)
    assert actual.fusion_slots == (expected.fusion_slots if expected.fusion_weights is not None else ())
    assert annotate(encoder, actual) == pytest.approx(annotate(encoder, expected))


def test_short_text_is_padded_for_first_token_readers(tmp_path: Path, cache: Path) -> None:
    """madral-en-v2 reads positions 1..3; a one-word text has fewer tokens than that."""
    encoder, tokenizer = build("madral-en-v2")
    encoder.save_pretrained(tmp_path / "model", tokenizer)
    encoder, tokenizer = load_encoder(tmp_path / "model")
    graph, layout = cached_graph(tmp_path / "model", encoder, tokenizer, Side.QUERY, "fp32")
    assert layout.min_length == 4
    batch = encoder.tokenize(tokenizer, ["a"], Side.QUERY)
    assert batch.input_ids.shape[1] < 4
    with torch.inference_mode():
        expected = encoder(batch, Side.QUERY).embedding
    torch.testing.assert_close(
        OnnxRuntimeEncoder(graph, layout, Side.QUERY)(batch, Side.QUERY).embedding, expected
    )


def test_graph_is_cached_by_checksum_and_a_damaged_one_is_exported_again(
    mtbert_dir: Path, cache: Path
) -> None:
    encoder, tokenizer = load_encoder(mtbert_dir)
    graph, _ = cached_graph(mtbert_dir, encoder, tokenizer, Side.DOCUMENT, "fp32")
    assert graph.is_relative_to(cache) and not any(mtbert_dir.glob("*.onnx"))
    modified = graph.stat().st_mtime_ns
    assert (
        cached_graph(mtbert_dir, encoder, tokenizer, Side.DOCUMENT, "fp32")[0].stat().st_mtime_ns == modified
    )
    graph.write_bytes(graph.read_bytes()[:-10] + b"0123456789")
    with pytest.warns(UserWarning, match="sha256 does not match"):
        again, _ = cached_graph(mtbert_dir, encoder, tokenizer, Side.DOCUMENT, "fp32")
    sidecar = json.loads(graph.with_suffix(".json").read_text())
    from schemas.manifest import sha256_file

    assert sidecar["sha256"] == sha256_file(again)


def test_int8_keeps_feed_forward_outputs_in_fp32_and_stays_close(mtbert_dir: Path, cache: Path) -> None:
    encoder, tokenizer = load_encoder(mtbert_dir)
    fp32, layout = cached_graph(mtbert_dir, encoder, tokenizer, Side.DOCUMENT, "fp32")
    int8, _ = cached_graph(mtbert_dir, encoder, tokenizer, Side.DOCUMENT, "int8")
    # The first layer's feed-forward output, and the last layer's output projections, which the
    # leading-positions forward pass (model.leading_positions) does not scope under the layer's name.
    kept = nodes_kept_in_fp32(fp32)
    assert [name for name in kept if "/layer." in name] == ["/encoder/layer.0/output/dense/MatMul"]
    assert len(kept) == 3
    import onnx

    operators = {node.op_type for node in onnx.load(str(int8)).graph.node}
    assert "DynamicQuantizeLinear" in operators or "DynamicQuantizeMatMul" in operators
    batch = encoder.tokenize(tokenizer, TEXTS, Side.DOCUMENT)
    full = OnnxRuntimeEncoder(fp32, layout, Side.DOCUMENT)(batch, Side.DOCUMENT).embedding
    quantized = OnnxRuntimeEncoder(int8, layout, Side.DOCUMENT)(batch, Side.DOCUMENT).embedding
    if not has_vnni():
        # Without VNNI, ONNX Runtime's u8 x s8 AVX2 kernel saturates on this tiny random BERT's full-range
        # weights (cosine 0.72 on an AMD EPYC; the real demo MtBERT keeps 0.983): the same graph with
        # 7-bit weights shows that the graph is right and the loss is the kernel's.
        seven_bit = cache / "document-int8-7bit.onnx"
        quantize_graph(fp32, seven_bit, reduce_range=True)
        quantized = OnnxRuntimeEncoder(seven_bit, layout, Side.DOCUMENT)(batch, Side.DOCUMENT).embedding
    assert float((full * quantized).sum(-1).min()) > 0.95


def test_handler_runtimes_agree(mtbert_dir: Path, cache: Path) -> None:
    examples = [TextToEncode(str(i), text) for i, text in enumerate(TEXTS)]
    results = {}
    for runtime in ("torch", "onnxruntime"):
        handler = EncoderModelHandler(
            ModelSettings(str(mtbert_dir), runtime=runtime), Side.DOCUMENT, annotate=True
        )
        results[runtime] = handler.run_inference(examples, handler.load_model())
    for by_torch, by_onnx in zip(results["torch"], results["onnxruntime"], strict=True):
        np.testing.assert_allclose(by_onnx.inference.embedding, by_torch.inference.embedding, atol=1e-5)
        assert by_onnx.inference.annotations.aspect_values == by_torch.inference.annotations.aspect_values


@pytest.mark.parametrize(
    ("runtime", "precision", "device", "expected"),
    [
        ("auto", "fp32", "cpu", "onnxruntime"),
        ("auto", "fp32", "cuda", "torch"),
        ("torch", "fp32", "cpu", "torch"),
        ("auto", "int8", "cpu", "onnxruntime"),
        ("auto", "bf16", "cuda", "torch"),
        ("auto", "bf16", "cpu", "torch"),
    ],
)
def test_runtime_resolution(runtime: str, precision: str, device: str, expected: str) -> None:
    assert resolve_runtime(runtime, precision, torch.device(device)) == expected


@pytest.mark.parametrize(
    ("runtime", "precision", "device", "message"),
    [
        ("auto", "fp16", "cpu", "runs with torch on a GPU"),
        ("onnxruntime", "bf16", "cpu", "runs with torch on a GPU"),
        ("auto", "auto", "cpu", "precision one of"),
        ("torch", "int8", "cpu", "int8 runs on ONNX Runtime"),
        ("onnxruntime", "fp32", "cuda", "runs on the CPU"),
    ],
)
def test_impossible_runtime_is_a_clear_error(runtime: str, precision: str, device: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        resolve_runtime(runtime, precision, torch.device(device))


def test_autocast_path_encodes_in_bfloat16_and_returns_float32(mtbert_dir: Path) -> None:
    """The GPU path (--precision bf16/fp16) is torch autocast; CPU autocast runs the same code here."""
    from model.text_encoder import TextEncoder

    examples = [TextToEncode(str(i), text) for i, text in enumerate(TEXTS)]
    handler = EncoderModelHandler(
        ModelSettings(str(mtbert_dir), runtime="torch"), Side.DOCUMENT, annotate=True
    )
    encoder, tokenizer = load_encoder(mtbert_dir)
    full = handler.encode_batch(examples, TextEncoder(encoder, tokenizer))
    half = handler.encode_batch(examples, TextEncoder(encoder, tokenizer, autocast=torch.bfloat16))
    for exact, autocast in zip(full, half, strict=True):
        vector = autocast.inference.embedding
        assert vector.dtype == np.float32 and np.isfinite(vector).all()
        # Unit length in fp32 (normalised in bf16 a norm was off by 0.003, and build-index refused it).
        assert abs(float(np.linalg.norm(vector)) - 1.0) < 1e-6
        assert float(vector @ exact.inference.embedding) > 0.98
        assert set(autocast.inference.annotations.aspect_values) == set(
            exact.inference.annotations.aspect_values
        )


def test_a_forged_cached_graph_is_caught_and_torch_encodes_instead(
    mtbert_dir: Path, cache: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 24: model B's graph copied over model A's, its sidecar rewritten to match, made embed write
    B's vectors labelled as A. The loader now encodes probe texts with both and refuses the graph."""
    other, tokenizer = build("mtbert")  # the shape of mtbert_dir's model, then other weights
    torch.manual_seed(11)
    with torch.no_grad():
        for parameter in other.parameters():
            parameter.add_(0.05 * torch.randn_like(parameter))
    other_dir = tmp_path / "other"
    other.save_pretrained(other_dir, tokenizer)
    forged, _ = cached_graph(other_dir, other, tokenizer, Side.DOCUMENT, "fp32")
    encoder, _ = load_encoder(mtbert_dir)
    genuine, _ = cached_graph(mtbert_dir, encoder, tokenizer, Side.DOCUMENT, "fp32")
    shutil.copyfile(forged, genuine)
    sidecar = genuine.with_suffix(".json")
    record = json.loads(sidecar.read_text())
    record["sha256"] = sha256_file(genuine)  # what an attacker who can write the cache does
    sidecar.write_text(json.dumps(record))

    examples = [TextToEncode(str(i), text) for i, text in enumerate(TEXTS)]
    handler = EncoderModelHandler(ModelSettings(str(mtbert_dir), runtime="onnxruntime"), Side.DOCUMENT)
    with caplog.at_level(logging.WARNING, logger="model.text_encoder"):
        loaded = handler.load_model()
    assert loaded.run is None and "does not encode as" in caplog.text
    by_torch = EncoderModelHandler(ModelSettings(str(mtbert_dir), runtime="torch"), Side.DOCUMENT)
    for got, want in zip(
        handler.run_inference(examples, loaded),
        by_torch.run_inference(examples, by_torch.load_model()),
        strict=True,
    ):
        np.testing.assert_allclose(got.inference, want.inference, atol=1e-6)


def test_an_unwritable_cache_falls_back_to_a_private_one(
    mtbert_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("a file where the cache should be")
    monkeypatch.setenv("MADR_CACHE", str(blocked))
    encoder, tokenizer = load_encoder(mtbert_dir)
    with pytest.warns(UserWarning, match="is not writable"):
        graph, _ = cached_graph(mtbert_dir, encoder, tokenizer, Side.QUERY, "fp32")
    assert graph.is_file() and blocked not in graph.parents
