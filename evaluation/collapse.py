"""Whether a model's embeddings have collapsed: every text mapped to nearly the same direction.

A collapsed encoder's retrieval figures measure the collapse, not the method: on MiniLM-L6, CLS after 5
of its 6 layers (madral-kdd22 §7.2's layer drop) is the same vector for every text, and the variants that
embed it retrieve at chance (docs/RESULTS.md). The experiment measures each dense variant's documents and
marks a collapsed row instead of reporting it as the method's result.
"""

from __future__ import annotations

import numpy as np

# Healthy models here sit far below: the shipped MtBERT 0.07 over the demo catalog. The collapsed CLS of
# MiniLM-L6 after 5 layers reads 0.999 (64 product titles).
COLLAPSED_COSINE = 0.95
SAMPLE = 1000


def mean_pairwise_cosine(vectors: np.ndarray, sample: int = SAMPLE, seed: int = 0) -> float:
    """Mean cosine over the distinct pairs of up to `sample` rows, drawn with `seed` (all rows when fewer).

    Zero rows count as orthogonal to everything. Needs at least 2 rows.
    """
    if len(vectors) < 2:
        raise ValueError(f"need at least 2 vectors to compare, got {len(vectors)}")
    rows = np.random.default_rng(seed).choice(len(vectors), size=min(sample, len(vectors)), replace=False)
    unit = np.asarray(vectors[np.sort(rows)], dtype=np.float64)
    norms = np.linalg.norm(unit, axis=1, keepdims=True)
    unit = np.divide(unit, norms, out=np.zeros_like(unit), where=norms > 0)
    total = unit.sum(axis=0)
    n = len(unit)
    # Σ_{i≠j} u_i·u_j = |Σ u_i|² - Σ |u_i|², without the n × n Gram matrix.
    pairs = float(total @ total) - float((unit * unit).sum())
    return pairs / (n * (n - 1))


def is_collapsed(cosine: float | None) -> bool:
    return cosine is not None and cosine >= COLLAPSED_COSINE
