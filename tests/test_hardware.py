"""`--precision auto`: the precision each kind of machine gets, and where the choice is written down."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from jobs.cli import parse_command
from model import Side
from model.hardware import CPU_FLAGS_ENV, PrecisionChoice, auto_precision, cpu_flags
from model.text_encoder import resolve_precision
from pipelines.embed.stage import embed_catalog
from pipelines.inference import EncoderModelHandler
from pipelines.settings.options import ModelSettings
from tests.test_embed_pipeline import catalog, write_catalog

CPU, GPU = torch.device("cpu"), torch.device("cuda")


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        ({"avx2", "avx512f", "avx512_vnni", "amx_int8", "amx_bf16"}, "bf16"),  # Sapphire Rapids
        ({"avx2", "avx512f", "avx512_bf16", "avx512_vnni"}, "bf16"),  # Cooper Lake, Zen 4
        # Cascade Lake, Ice Lake; Alder Lake: int8 is native, yet lost 2.5 NDCG@10 points on a store
        ({"avx2", "avx512f", "avx512_vnni"}, "fp32"),
        ({"avx2", "avx_vnni"}, "fp32"),
        ({"avx2", "fma"}, "fp32"),  # Zen 2/3, Haswell: int8 through AVX2 lost too much NDCG@10
        ({"sse4_2"}, "fp32"),
        (set(), "fp32"),  # flags unknown (not Linux, another architecture)
    ],
)
def test_a_cpu_gets_the_fastest_precision_it_computes_natively(flags: set[str], expected: str) -> None:
    choice = auto_precision(CPU, frozenset(flags))
    assert choice.precision == expected
    assert choice.reason  # said in the log and the manifest


def test_a_gpu_gets_bf16_only_where_it_has_bf16_units() -> None:
    assert auto_precision(GPU, gpu_bf16=True) == PrecisionChoice("bf16", "the GPU computes bf16 natively")
    assert auto_precision(GPU, gpu_bf16=False).precision == "fp32"  # fp16 was never measured: not picked


def test_the_flags_come_from_the_environment_when_it_names_them(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CPU_FLAGS_ENV, "avx2, avx512_vnni")
    assert cpu_flags() == frozenset({"avx2", "avx512_vnni"})
    assert resolve_precision("auto", CPU).precision == "fp32"
    assert resolve_precision("fp32", CPU) == PrecisionChoice("fp32", "given")
    # bf16 is torch's: with ONNX Runtime asked for, a bf16 CPU gets what ONNX Runtime runs fastest.
    monkeypatch.setenv(CPU_FLAGS_ENV, "avx2 avx512_bf16 avx512_vnni")
    assert resolve_precision("auto", CPU).precision == "bf16"
    chosen = resolve_precision("auto", CPU, "onnxruntime")
    assert chosen.precision == "fp32" and chosen.reason.startswith("--runtime onnxruntime, which has no bf16")
    monkeypatch.setenv(CPU_FLAGS_ENV, "avx2 avx512_bf16")
    assert resolve_precision("auto", CPU, "onnxruntime").precision == "fp32"
    monkeypatch.delenv(CPU_FLAGS_ENV)
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        assert ("avx2" in cpu_flags()) == (" avx2" in cpuinfo.read_text())


def test_the_handler_resolves_auto_where_the_job_is_built(
    tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CPU_FLAGS_ENV, "avx2 avx512_vnni")
    handler = EncoderModelHandler(ModelSettings(str(tiny_model_dir)), Side.DOCUMENT)
    assert handler.precision == "fp32"
    assert handler.precision_choice.reason.startswith(
        "the CPU has no bf16 units; int8, native here (avx512_vnni)"
    )
    monkeypatch.setenv(CPU_FLAGS_ENV, "avx2 avx512_bf16")
    assert EncoderModelHandler(ModelSettings(str(tiny_model_dir)), Side.DOCUMENT).precision == "bf16"
    monkeypatch.setenv(CPU_FLAGS_ENV, "")
    assert EncoderModelHandler(ModelSettings(str(tiny_model_dir)), Side.DOCUMENT).precision == "fp32"


@pytest.mark.parametrize(("flags", "expected"), [("avx2 avx512_bf16", "bf16"), ("avx2 avx512_vnni", "fp32")])
def test_the_embed_manifest_says_which_precision_auto_picked_and_why(
    tmp_path: Path, tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch, flags: str, expected: str
) -> None:
    monkeypatch.setenv(CPU_FLAGS_ENV, flags)
    products = write_catalog(tmp_path / "catalog.parquet", catalog(6))
    out = tmp_path / "out"
    counts = embed_catalog(
        *parse_command(
            "embed", ["--products", products, "--model", str(tiny_model_dir), "--output", str(out)]
        )
    )
    assert counts["products_embedded"] == 6
    recorded = json.loads((out / "manifest.json").read_text())["precision"]
    assert recorded["precision"] == expected
    assert recorded["reason"] == auto_precision(CPU).reason
