"""Errors name the cause (issue 24, item 6): a full disk, a damaged or foreign weights file and an unusable
ONNX graph each end with one line naming the file and the fix (exit 2) or a fallback, never "a bug in
madr"."""

from __future__ import annotations

import errno
import io
import json
import logging
import shutil
from pathlib import Path

import pytest
import torch

from jobs.cli_errors import EXIT_USER_ERROR, report_error
from model import Side, load_encoder, new_encoder
from model.onnx_runtime import cached_graph
from model.weights_file import WeightsError
from pipelines.inference import EncoderModelHandler
from pipelines.settings.options import ModelSettings
from pipelines.storage.staged_output import fresh_output, is_disk_full, wrapped_os_error
from pipelines.storage.verify import verify_model
from schemas import write_manifest
from schemas.manifest import sha256_file
from tests.conftest import tiny_backbone

# What Beam's DirectRunner raises when a worker's write hits a full disk: the OSError's text only.
BEAM_ENOSPC = (
    "OSError: [Errno 28] No space left on device [while running "
    "'WriteEmbeddings/WriteToParquet/Write/WriteImpl/WriteBundles']"
)


def test_a_full_disk_reported_through_beam_is_a_user_error_naming_the_cause() -> None:
    wrapped = RuntimeError(BEAM_ENOSPC)
    assert is_disk_full(wrapped)
    found = wrapped_os_error(wrapped)
    assert found is not None and found.errno == errno.ENOSPC
    stream = io.StringIO()
    assert report_error("embed", wrapped, stream) == EXIT_USER_ERROR
    assert stream.getvalue() == (
        "madr embed: error: No space left on device; free some space or write elsewhere\n"
    )
    assert report_error("embed", RuntimeError("a real bug"), io.StringIO()) == 1


def test_a_stage_that_fills_the_disk_names_its_output_and_leaves_no_staging(tmp_path: Path) -> None:
    target = tmp_path / "out"
    with (
        pytest.raises(OSError, match="No space left on device") as refused,
        fresh_output(str(target)) as staging,
    ):
        Path(staging, "part-0.parquet").write_bytes(b"x" * 1000)
        raise RuntimeError(BEAM_ENOSPC)
    assert refused.value.errno == errno.ENOSPC and refused.value.filename == str(target)
    assert not target.exists() and not (tmp_path / ".out.staging").exists()  # the space is given back
    stream = io.StringIO()
    assert report_error("embed", refused.value, stream) == EXIT_USER_ERROR
    assert str(target) in stream.getvalue() and "free some space" in stream.getvalue()


def _relist(model: Path) -> None:
    """List the model's files as they are now, as whoever copied a file in with its entry would."""
    write_manifest(model, "madr-model", {"variant": "bibert", "model_version": "test"})


def test_a_truncated_weights_file_listed_in_the_manifest_is_named_on_the_driver(
    tmp_path: Path, tiny_model_dir: Path
) -> None:
    model = Path(shutil.copytree(tiny_model_dir, tmp_path / "model"))
    weights = model / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:5000])
    _relist(model)
    with pytest.raises(
        WeightsError, match=r"model\.safetensors is not a readable safetensors file"
    ) as refused:
        verify_model(str(model))
    assert "train it again" in str(refused.value)


def test_the_weights_of_another_model_are_named_as_such(tmp_path: Path, tiny_model_dir: Path) -> None:
    other, tokenizer = new_encoder(
        "bibert", pretrained=False, backbone=tiny_backbone(), projection_dim=8, model_version="test"
    )
    other.save_pretrained(tmp_path / "other", tokenizer)
    model = Path(shutil.copytree(tiny_model_dir, tmp_path / "model"))
    shutil.copyfile(tmp_path / "other" / "model.safetensors", model / "model.safetensors")
    _relist(model)
    verify_model(str(model))  # a whole safetensors file, listed: only loading it can tell
    with pytest.raises(
        WeightsError, match=r"holds the weights of another model than its config\.json's bibert"
    ):
        load_encoder(model)


def test_an_unreadable_cached_graph_falls_back_to_torch_with_a_warning(
    tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("MADR_CACHE", str(tmp_path / "cache"))
    encoder, tokenizer = load_encoder(tiny_model_dir)
    graph, _ = cached_graph(tiny_model_dir, encoder, tokenizer, Side.QUERY, "fp32")
    graph.write_bytes(b"not an onnx graph")
    sidecar = graph.with_suffix(".json")
    record = json.loads(sidecar.read_text())
    record["sha256"] = sha256_file(graph)  # the sidecar agrees: the bytes themselves are bad
    sidecar.write_text(json.dumps(record))
    handler = EncoderModelHandler(ModelSettings(str(tiny_model_dir), runtime="onnxruntime"), Side.QUERY)
    with caplog.at_level(logging.WARNING, logger="model.text_encoder"):
        loaded = handler.load_model()
    assert loaded.run is None and "cannot be used" in caplog.text and "encoding with torch" in caplog.text
    assert isinstance(loaded.encoder, torch.nn.Module)
