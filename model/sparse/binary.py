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
    """[batch, n] dense -> one `SparseVector` per row.

    One `nonzero` over the whole batch, split by row: a row-by-row scan cost as much as the
    encoding itself at the paper's n = 81,920 (§3.3).
    """
    rows = vectors.detach().to(torch.float32).cpu()
    row_of, indices = rows.nonzero(as_tuple=True)  # row-major: ascending indices within each row
    values = rows[row_of, indices].numpy()
    bounds = np.cumsum(np.bincount(row_of.numpy(), minlength=rows.shape[0]))[:-1]
    return [
        SparseVector(dims, found)
        for dims, found in zip(
            np.split(indices.numpy().astype(np.int64), bounds), np.split(values, bounds), strict=True
        )
    ]
