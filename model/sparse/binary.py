"""Binarised and sparse views of WTA buckets, for an inverted index (uhd-bert §3.4, §3.7).

Only the non-zero dimensions of a document enter the index; binarisation turns
them into 1 so that matching counts shared winning dimensions (§3.4).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch


def binarize(vectors: torch.Tensor) -> torch.Tensor:
    """Non-zero -> 1, zero -> 0 (§3.7), in the input dtype so dot products count overlaps."""
    return (vectors != 0).to(vectors.dtype)


@dataclass(frozen=True)
class SparseVector:
    """The non-zero dimensions of one bucket: ascending `indices` and their `values`."""

    indices: np.ndarray  # int64
    values: np.ndarray  # float32

    def __post_init__(self) -> None:
        if self.indices.shape != self.values.shape or self.indices.ndim != 1:
            raise ValueError("indices and values must be 1-D arrays of the same length")

    def binarized(self) -> SparseVector:
        return SparseVector(self.indices, np.ones_like(self.values))

    def dot(self, other: SparseVector) -> float:
        """The bucket-wise dot product of Eq. 7 on sparse vectors."""
        _, mine, theirs = np.intersect1d(self.indices, other.indices, assume_unique=True, return_indices=True)
        return float(np.dot(self.values[mine], other.values[theirs]))


def to_sparse(vectors: torch.Tensor) -> list[SparseVector]:
    """[batch, n] dense -> one `SparseVector` per row."""
    rows = vectors.detach().to(torch.float32).cpu()
    result = []
    for row in rows:
        indices = row.nonzero(as_tuple=True)[0]
        result.append(SparseVector(indices.numpy().astype(np.int64), row[indices].numpy()))
    return result
