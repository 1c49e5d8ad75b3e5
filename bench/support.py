"""Helpers the index and join benchmarks share: seeded vectors, recall against exact, memory, timing.

Kept apart from `bench.common` (which only reports) so that the data every index
benchmark runs on is defined once and named the same way in every results file.
"""

from __future__ import annotations

import argparse
import os
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from pipelines.stage_runs import peak_rss_mb, reset_peak_rss

T = TypeVar("T")

# Described in every results file that uses it, so a figure always says what data it came from.
GENERATOR = (
    "numpy.random.default_rng(seed) (PCG64): {clusters} unit centres in R^{dim}; each vector is a random "
    "centre plus Gaussian noise of expected norm {noise} (clusters overlap: at 1.7 an IVF "
    "index over 200k of them needs ~1 % of its lists for recall@10 = 0.95), then L2-normalised; "
    "queries are the last rows of the same draw (held out of the corpus)"
)


def clustered_unit_vectors(
    n: int, dim: int, *, clusters: int = 500, noise: float = 1.7, seed: int = 0
) -> np.ndarray:
    """(n, dim) float32 unit vectors around ``clusters`` random unit centres, noise of norm ``noise``.

    Overlapping clusters are the hard case for a partitioned index: a query's nearest
    neighbours spread over several leaves, as with real embeddings, unlike well-separated
    blobs on which any index looks perfect.
    """
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((clusters, dim)).astype(np.float32)
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    out = np.empty((n, dim), dtype=np.float32)
    step = 100_000
    for start in range(0, n, step):
        stop = min(n, start + step)
        which = rng.integers(0, clusters, stop - start)
        block = centres[which] + rng.standard_normal((stop - start, dim)).astype(np.float32) * (
            noise / np.sqrt(dim)
        )
        out[start:stop] = block / np.linalg.norm(block, axis=1, keepdims=True)
    return out


def add_vector_arguments(parser: argparse.ArgumentParser, queries: int) -> None:
    """The flags of the seeded corpus `clustered_unit_vectors` draws, shared by the index benchmarks."""
    parser.add_argument("--n", type=int, default=1_000_000, help="Corpus vectors (default: %(default)s)")
    parser.add_argument("--queries", type=int, default=queries, help="Queries (default: %(default)s)")
    parser.add_argument("--dim", type=int, default=128, help="Dimension (default: %(default)s)")
    parser.add_argument(
        "--noise", type=float, default=1.7, help="Noise norm vs unit centres (default: %(default)s)"
    )
    parser.add_argument("--seed", type=int, default=0, help="Generator seed (default: %(default)s)")


def describe_generator(dim: int, clusters: int = 500, noise: float = 1.7) -> str:
    return GENERATOR.format(clusters=clusters, dim=dim, noise=noise)


def recall_at_k(found: np.ndarray, truth: np.ndarray, k: int) -> float:
    """Mean |found[:k] ∩ truth[:k]| / k over queries (rows are corpus indices; -1 never matches)."""
    found, truth = found[:, :k], truth[:, :k]
    hits = 0
    for row_found, row_truth in zip(found, truth, strict=True):
        hits += np.intersect1d(row_found, row_truth, assume_unique=False).size
    return hits / (truth.shape[0] * k)


def timed(call: Callable[[], T]) -> tuple[T, float]:
    """(result, seconds) of one call, by the wall clock: what a user waits for."""
    started = time.perf_counter()
    result = call()
    return result, time.perf_counter() - started


def best_of(call: Callable[[], T], repeats: int) -> tuple[T, float]:
    """The fastest of ``repeats`` runs: on a shared machine the minimum is the least disturbed figure."""
    best: tuple[T, float] | None = None
    for _ in range(max(1, repeats)):
        result, seconds = timed(call)
        if best is None or seconds < best[1]:
            best = (result, seconds)
    assert best is not None
    return best


def _status_mb(field: str) -> float:
    text = Path("/proc/self/status").read_text()
    match = re.search(rf"^{field}:\s+(\d+) kB", text, re.MULTILINE)
    return int(match.group(1)) / 1024 if match else float("nan")


def current_rss_mb() -> float:
    """Resident memory now (Linux /proc; nan elsewhere)."""
    return _status_mb("VmRSS")


def measure_memory(call: Callable[[], T]) -> tuple[T, float, float, float]:
    """(result, seconds, peak RSS delta MB, retained RSS delta MB) of one call."""
    import gc

    gc.collect()
    reset_peak_rss()
    before = current_rss_mb()
    result, seconds = timed(call)
    return result, seconds, (peak_rss_mb() or float("nan")) - before, current_rss_mb() - before


def load_average() -> float:
    """1-minute load average, recorded with each run: shared-machine figures must be read as such."""
    return os.getloadavg()[0]


def shared_machine_note() -> dict[str, Any]:
    return {"load_average_1min_at_start": round(load_average(), 2), "cores": os.cpu_count()}


def command_line(module: str, argv: list[str] | None) -> str:
    """The command that reproduces a run, stored in its results so the performance doc can quote it."""
    import sys

    arguments = sys.argv[1:] if argv is None else argv
    return " ".join(["python -m", module, *arguments])


# The tiny random BERT of tests/conftest.py: benchmarks of the stages' plumbing, where speed must not
# depend on the model.
TINY_BACKBONE = {
    "vocab_size": 30522,
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "intermediate_size": 64,
    "max_position_embeddings": 512,
}


def tiny_model(directory: Path, projection_dim: int, model_version: str) -> Path:
    """A saved, untrained tiny BiBERT with its manifest, as `madr train` writes it (stages verify it).
    Its random weights are seeded by `model_version`: a `--quick` figure is the same on every run, and
    two versions are two different models (the reliability cases tell them apart by their weights)."""
    import zlib

    import torch
    from transformers import BertConfig

    from model import new_encoder
    from schemas import write_manifest

    with torch.random.fork_rng():  # the caller's random state is left as it was
        torch.manual_seed(zlib.crc32(model_version.encode()))
        encoder, tokenizer = new_encoder(
            "bibert",
            pretrained=False,
            backbone=BertConfig(**TINY_BACKBONE).to_dict(),
            projection_dim=projection_dim,
            model_version=model_version,
        )
    encoder.save_pretrained(directory, tokenizer)
    write_manifest(directory, "madr-model", {"variant": "bibert", "model_version": model_version})
    return directory
