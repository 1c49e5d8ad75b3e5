"""A product id's 64-bit key: the shard it belongs to, and the tie order every merged ranking shares.

The key is the first 8 bytes of the id's sha256, big-endian: stable across processes, machines and Python
versions (Python's built-in ``hash`` of a str is salted per process, so two Beam workers would disagree).
A product's shard is its key modulo the shard count; equal scores are ordered by key wherever rankings
of shards are merged (BM25 in `index_builder.bm25` and `index_builder.lexical`, the sharded evaluation),
so a ranking does not depend on how the catalog was split.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

import numpy as np


def id_key(product_id: str) -> int:
    """The id's key, an unsigned 64-bit int."""
    return int.from_bytes(hashlib.sha256(product_id.encode("utf-8")).digest()[:8], "big")


def id_keys(product_ids: Iterable[str]) -> np.ndarray:
    """The ids' keys as one uint64 array (sorting it sorts by key)."""
    return np.fromiter((id_key(pid) for pid in product_ids), dtype=np.uint64)


def shard_of(product_id: str, num_shards: int) -> int:
    """The shard a product belongs to: its key modulo `num_shards`."""
    if not isinstance(num_shards, int) or isinstance(num_shards, bool) or num_shards < 1:
        raise ValueError(f"num_shards must be a positive int, got {num_shards!r}")
    return id_key(product_id) % num_shards


__all__ = ["id_key", "id_keys", "shard_of"]
