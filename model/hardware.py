"""What the machine computes natively, and the inference precision `--precision auto` picks from it.

The rule, in order (each precision's speed and quality against fp32 are in docs/PERFORMANCE.md,
"embedding against sentence-transformers"):

1. A GPU that computes bf16 (Ampere and later): bf16, torch autocast.
2. A CPU with AMX or AVX-512 bf16 units: bf16, torch autocast on the CPU. bf16 against fp32 on the demo
   benchmark (29 Nov 2026): Recall@100 equal, NDCG@10 0.05 points lower, aspect Accuracy@1 equal.
3. Anything else: fp32. That includes CPUs that multiply int8 natively (AVX-512 VNNI, AVX-VNNI, AMX
   int8) but have no bf16 units: int8 (ONNX Runtime's dynamic quantisation) ran at 1.85x fp32 on a VNNI
   CPU (30 Nov 2026, 10,000 products) and held the demo benchmark (Recall@100 equal, NDCG@10 +0.60
   points; +0.49 and -0.01 on 25 Nov), but lost 2.53 points of NDCG@10 and 1.05 of Recall@100 on the
   store export with its adapted model, over the 0.5 a precision may lose to be picked unasked. It
   also includes x86 CPUs with AVX2 but no VNNI, where int8 is faster (1.3x fp32
   on a 2-core AMD EPYC, 10,000 products, 29 Nov 2026) but ONNX Runtime's AVX2 kernel (u8 x s8 through
   int16 sums, which can saturate) cost NDCG@10 0.60 points on the demo benchmark and 2.42 on the store
   export with its adapted model (Recall@100 0.18 and 1.05), over the 0.5 points a precision may lose
   to be picked without being asked for. `--precision int8` still takes it. bf16 on the store export
   (emulated, same numbers as native): Recall@100 +0.62, NDCG@10 -0.28 points.
   Also another architecture, an unreadable /proc/cpuinfo, or a GPU without bf16.

fp16 is never picked: it was not measured against fp32. `MADR_CPU_FLAGS` (space- or comma-separated
flag names, as /proc/cpuinfo spells them) replaces the CPU's own flags: to pin a fleet whose workers
differ from the machine that launches the job, or to make a test independent of the machine it runs on.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import torch

CPU_FLAGS_ENV = "MADR_CPU_FLAGS"
BF16_FLAGS = frozenset({"amx_bf16", "avx512_bf16"})
VNNI_FLAGS = frozenset({"avx512_vnni", "avx_vnni", "amx_int8"})


def cpu_flags() -> frozenset[str]:
    """The CPU's feature flags (Linux), or `MADR_CPU_FLAGS` when it is set; empty when unknown."""
    override = os.environ.get(CPU_FLAGS_ENV)
    if override is not None:
        return frozenset(override.replace(",", " ").split())
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return frozenset()
    for line in text.splitlines():
        if line.startswith("flags"):
            return frozenset(line.partition(":")[2].split())
    return frozenset()


def has_vnni(flags: frozenset[str] | None = None) -> bool:
    """Whether this CPU multiplies u8 x s8 with VNNI (AVX-512 VNNI, AVX-VNNI or AMX)."""
    return bool((cpu_flags() if flags is None else flags) & VNNI_FLAGS)


@dataclass(frozen=True)
class PrecisionChoice:
    """A precision and why: what `--precision auto` resolved to, for the log and the manifest."""

    precision: str
    reason: str

    def as_json(self) -> dict[str, str]:
        return {"precision": self.precision, "reason": self.reason}


def auto_precision(
    device: torch.device, flags: frozenset[str] | None = None, gpu_bf16: bool | None = None
) -> PrecisionChoice:
    """The precision `--precision auto` encodes at on `device` (see the module docstring for the rule).

    `flags` and `gpu_bf16` default to this machine's; tests pass their own.
    """
    if device.type == "cuda":
        if bf16_is_native(device) if gpu_bf16 is None else gpu_bf16:
            return PrecisionChoice("bf16", "the GPU computes bf16 natively")
        return PrecisionChoice("fp32", "the GPU has no bf16 units (fp16 is not picked: not measured)")
    if device.type != "cpu":
        return PrecisionChoice("fp32", f"no measured faster precision on a {device.type} device")
    flags = cpu_flags() if flags is None else flags
    if bf16_is_native(device, flags):
        units = ", ".join(sorted(flags & BF16_FLAGS))
        return PrecisionChoice("bf16", f"the CPU computes bf16 natively ({units})")
    if flags & VNNI_FLAGS:
        units = ", ".join(sorted(flags & VNNI_FLAGS))
        return PrecisionChoice(
            "fp32",
            f"the CPU has no bf16 units; int8, native here ({units}), lost 2.5 points of NDCG@10 on the "
            "store export (`--precision int8` takes it)",
        )
    if "avx2" in flags:
        return PrecisionChoice(
            "fp32",
            "the CPU has no VNNI or bf16 units; int8 through AVX2 lost 0.6 (benchmark) and 2.4 (store "
            "export) points of NDCG@10",
        )
    if flags:
        return PrecisionChoice("fp32", "the CPU has no VNNI or bf16 units")
    return PrecisionChoice("fp32", "the CPU's features are unknown")


def bf16_is_native(device: torch.device, flags: frozenset[str] | None = None) -> bool:
    """Whether bf16 runs at hardware speed on `device`: a GPU that supports it, or a CPU with AVX-512 bf16
    or AMX. Elsewhere torch emulates it, and autocast slows inference and training down instead."""
    if device.type == "cuda":
        return bool(torch.cuda.is_available() and torch.cuda.is_bf16_supported())
    if device.type != "cpu":
        return False
    return bool((cpu_flags() if flags is None else flags) & BF16_FLAGS)
