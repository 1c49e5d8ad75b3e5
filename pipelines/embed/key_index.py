"""Compact 64-bit key indexes: one pass over a whole catalog remembers each product in 8-16 bytes.

Beam's local FnApiRunner holds the whole input of a GroupByKey (and of every Flatten) in
memory, decoded, at a few hundred bytes per key; Dataflow shuffles it to disk instead.
The embed stage therefore never groups every product. What it must know about all of them
(which ids occur more than once, which previous rows are reusable, which ids are in
tonight's catalog) it collects with `CollectKeys`, a CombineGlobally whose accumulator is a
pair of uint64 arrays (8 bytes per key, 8 more per value), and reads back as a side input.

Keys are 64-bit hashes of ids, so two different ids can share one (about once in 10^7
catalogs of a million products). A `KeyIndex` never hides that: a key seen twice is
`repeated` and has no value, and every user treats a repeated key as "look closer",
never as a match.
"""

from __future__ import annotations

import hashlib
from array import array
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import apache_beam as beam
import numpy as np
from apache_beam import pvalue

EMPTY = np.zeros(0, dtype=np.uint64)


def id_key(record_id: str) -> int:
    """A stable 64-bit key of an id (Python's hash() is salted per process, so no good across workers)."""
    return int.from_bytes(hashlib.blake2b(record_id.encode("utf-8"), digest_size=8).digest(), "little")


def content_key(digest: str) -> int:
    """The first 64 bits of a hex content hash (`model.content_hash`)."""
    return int(digest[:16], 16)


@dataclass(frozen=True, eq=False)
class KeyIndex:
    """Sorted keys seen once with their values, and the keys seen more than once (without values)."""

    keys: np.ndarray = field(default_factory=lambda: EMPTY)
    values: np.ndarray = field(default_factory=lambda: EMPTY)
    repeated: np.ndarray = field(default_factory=lambda: EMPTY)

    def _find(self, sorted_keys: np.ndarray, key: int) -> int:
        at = int(np.searchsorted(sorted_keys, np.uint64(key)))
        return at if at < len(sorted_keys) and int(sorted_keys[at]) == key else -1

    def get(self, key: int) -> int | None:
        """The value of a key seen exactly once; None for a key absent or repeated."""
        at = self._find(self.keys, key)
        return int(self.values[at]) if at >= 0 else None

    def is_repeated(self, key: int) -> bool:
        return self._find(self.repeated, key) >= 0

    def __contains__(self, key: int) -> bool:
        return self._find(self.keys, key) >= 0 or self.is_repeated(key)

    def __len__(self) -> int:
        return len(self.keys) + len(self.repeated)

    def values_of(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """`get` for an array of keys at once: whether each was seen exactly once, and its value (0 where
        not)."""
        once, at = _positions(self.keys, keys)
        return once, np.where(once, self.values[at] if len(self.values) else 0, 0).astype(np.uint64)

    def repeated_each(self, keys: np.ndarray) -> np.ndarray:
        """`is_repeated` for an array of keys at once."""
        return _positions(self.repeated, keys)[0]


def _positions(sorted_keys: np.ndarray, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Where each of `keys` is in `sorted_keys` (clipped into range) and whether it is there."""
    if len(sorted_keys) == 0:
        return np.zeros(len(keys), dtype=bool), np.zeros(len(keys), dtype=np.intp)
    at = np.minimum(np.searchsorted(sorted_keys, keys), len(sorted_keys) - 1)
    return sorted_keys[at] == keys, at


def build_index(keys: np.ndarray, values: np.ndarray | None) -> KeyIndex:
    """Sort once; a key equal to its neighbour is repeated. Peak memory is a few copies of `keys`."""
    if values is None:
        keys = np.sort(keys)
    else:
        order = np.argsort(keys, kind="stable")
        keys, values = keys[order], values[order]
        del order
    same_as_next = keys[1:] == keys[:-1]
    repeated = np.unique(keys[1:][same_as_next])
    once = np.ones(len(keys), dtype=bool)
    once[1:] &= ~same_as_next
    once[:-1] &= ~same_as_next
    return KeyIndex(keys[once], values[once] if values is not None else EMPTY, repeated)


class CollectKeys(beam.CombineFn):
    """(key, value) pairs, or (keys, values) uint64 array chunks -> one `KeyIndex` of all of them.

    With `with_values=False` the inputs are keys alone (ints or arrays) and only `repeated`
    is filled: all a duplicate search needs, and a small side input. The accumulator is two
    `array('Q')`s: appending is cheap per element, and they pickle as raw bytes between the
    combiner's phases.
    """

    def __init__(self, with_values: bool = True) -> None:
        super().__init__()
        self.with_values = with_values

    def create_accumulator(self) -> tuple[array, array]:
        return array("Q"), array("Q")

    def add_input(self, accumulator: tuple[array, array], element: Any) -> tuple[array, array]:
        keys, values = accumulator
        if not self.with_values:
            element = (element, None)
        key, value = element
        if isinstance(key, np.ndarray):
            keys.frombytes(key.astype(np.uint64).tobytes())
            if self.with_values:
                values.frombytes(np.asarray(value).astype(np.uint64).tobytes())
        else:
            keys.append(key)
            if self.with_values:
                values.append(value)
        return accumulator

    def merge_accumulators(self, accumulators: Iterable[tuple[array, array]]) -> tuple[array, array]:
        merged_keys, merged_values = array("Q"), array("Q")
        for keys, values in accumulators:
            merged_keys.extend(keys)
            merged_values.extend(values)
        return merged_keys, merged_values

    def extract_output(self, accumulator: tuple[array, array]) -> KeyIndex:
        keys, values = accumulator
        key_array = np.frombuffer(keys, dtype=np.uint64) if len(keys) else EMPTY
        if not self.with_values:
            return KeyIndex(repeated=build_index(key_array, None).repeated)
        return build_index(key_array, np.frombuffer(values, dtype=np.uint64) if len(values) else EMPTY)


class IndexKeys(beam.PTransform):
    """Keys (see `CollectKeys`) -> at most one `KeyIndex`; read it with `as_side_input`.

    Without defaults on purpose: CombineGlobally's default value is injected by one more
    step that takes the whole index as a side input and copies it, ~50 MB at 1M products.
    """

    def __init__(self, with_values: bool = True) -> None:
        super().__init__()
        self.with_values = with_values

    def expand(self, keys: beam.PCollection) -> beam.PCollection:
        return keys | beam.CombineGlobally(CollectKeys(self.with_values)).without_defaults()


def as_side_input(index: beam.PCollection) -> pvalue.AsSingleton:
    """An `IndexKeys` output as a side input; no input at all reads as an empty index."""
    return pvalue.AsSingleton(index, default_value=KeyIndex())
