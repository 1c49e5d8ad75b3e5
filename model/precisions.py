"""The precisions and runtimes an encoder runs at, by name: what `--precision` and `--runtime` accept.

Kept apart from `model.text_encoder` (which runs them) so that a command's flags cost no torch import.
fp32 runs anywhere; int8 on ONNX Runtime (CPU); bf16 with torch autocast (GPU or CPU), fp16 on a GPU;
auto by the hardware (`model.hardware`). The runtime: auto is ONNX Runtime on a CPU, torch on a GPU.
"""

from __future__ import annotations

PRECISIONS = ("auto", "fp32", "int8", "bf16", "fp16")
RUNTIMES = ("auto", "torch", "onnxruntime")

__all__ = ["PRECISIONS", "RUNTIMES"]
