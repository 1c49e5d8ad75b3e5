"""Duplicate product ids, found without grouping whole records.

The rule is the one documented in `pipelines.embed.incremental`: of the valid copies sharing a
product_id, the one whose canonical JSON sorts first is kept; the others become dead
letters naming the id. Applying it by grouping every product by id would hold the whole
catalog in memory on the local runner (see `pipelines.embed.key_index`), although almost every
id occurs once. So the work is split by how much of the catalog each step needs:

1. `RepeatedIdKeys` reads the product_id column alone and collects 64-bit keys of the raw
   ids: the keys seen more than once are the *candidates*. Raw ids are read before
   validation, so a candidate may turn out to have one valid copy, or to be two ids that
   share a key; either only costs a closer look in step 2.
2. `KeptCopies` validates only the candidates' records, groups them by key (a group as
   small as the duplicates) and applies the rule per id. The kept copy is remembered by
   its position (file, row), which also tells byte-identical copies apart.
3. The plan (`pipelines.embed.incremental`) streams every product past these two side inputs.

Both steps skip what cannot be read (`catalog_io.batches_until_unreadable`; an id that is not
valid UTF-8 counts as no id): the plan's reading dead-letters it, once.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Iterator
from typing import Any, NamedTuple

import apache_beam as beam
import numpy as np

from model import content_hash
from pipelines.embed.key_index import IndexKeys, KeyIndex, as_side_input, id_key
from pipelines.inference import ModelIdentity
from pipelines.io.catalog_io import (
    ArrowDoFn,
    RowGroup,
    batch_records,
    batches_until_unreadable,
    column_values,
)
from schemas import InvalidRecord, validate_product
from schemas.validation import clean_id

CANDIDATES = "candidates"
KEPT = "kept"


def canonical_json(record: dict[str, Any]) -> str:
    return json.dumps(record, sort_keys=True, default=str)


def raw_product_id(value: Any) -> str | None:
    """A raw product_id as `schemas.validate_product` normalises it, or None where it would reject it.

    Must agree with validation for every valid record, or a duplicate could go unseen:
    tests/test_dedupe.py checks the two against each other.
    """
    try:
        return clean_id(value, "product_id", "product")
    except InvalidRecord:
        return None


class KeptCopy(NamedTuple):
    """The copy of a candidate id that the duplicate rule keeps."""

    position: tuple[str, int]
    content_hash: str  # of the text the model reads; the other copies' dead letters name it
    sole_id: bool  # no other valid id shares its 64-bit key; a shared key is never matched for reuse


class _Copy(NamedTuple):
    product_id: str
    position: tuple[str, int]
    canonical: str
    content_hash: str


class _RawIdKeysFn(ArrowDoFn):
    def process(self, group: RowGroup) -> Iterator[np.ndarray]:
        for batch in batches_until_unreadable(group, columns=["product_id"], batch_rows=8192):
            ids = (raw_product_id(value) for value in column_values(batch.column("product_id")))
            yield np.fromiter((id_key(i) for i in ids if i is not None), dtype=np.uint64)


class RepeatedIdKeys(beam.PTransform):
    """Product row groups -> a `KeyIndex` whose `repeated` keys are the candidate duplicates
    (no element for an empty catalog: read it with `key_index.as_side_input`)."""

    def expand(self, groups: beam.PCollection) -> beam.PCollection:
        return groups | "IdKeys" >> beam.ParDo(_RawIdKeysFn()) | "Repeated" >> IndexKeys(with_values=False)


class _CandidateCopiesFn(ArrowDoFn):
    def __init__(self, identity: ModelIdentity) -> None:
        super().__init__()
        self.identity = identity

    def process(self, group: RowGroup, candidates: KeyIndex) -> Iterator[tuple[int, _Copy]]:
        # Beam warns of a bare `return` in a generator process(), hence the helper.
        if len(candidates.repeated):  # usually empty: nothing to decode then
            yield from self._copies(group, set(candidates.repeated.tolist()))

    def _copies(self, group: RowGroup, wanted: set[int]) -> Iterator[tuple[int, _Copy]]:
        row = group.first_row
        # The plan's reading batches (1024 rows of every column): an unreadable group stops here where
        # it stops there, so no copy is kept that the plan dead-letters.
        for batch in batches_until_unreadable(group):
            ids = [raw_product_id(value) for value in column_values(batch.column("product_id"))]
            keys = [id_key(i) if i is not None else None for i in ids]
            hits = [n for n, key in enumerate(keys) if key in wanted]
            records = batch_records(batch.take(hits)) if hits else []
            for n, record in zip(hits, records, strict=True):
                if not isinstance(record, dict):
                    continue  # not valid UTF-8: the main pass dead-letters it
                try:
                    product = validate_product(record)
                except InvalidRecord:
                    continue  # the main pass dead-letters it as invalid
                text = self.identity.text_of(product)
                position = (group.path, row + n)
                copy = _Copy(product["product_id"], position, canonical_json(product), content_hash(text))
                yield keys[n], copy
            row += batch.num_rows


def _kept_copies(grouped: tuple[int, Iterable[_Copy]]) -> Iterator[tuple[str, KeptCopy]]:
    _, copies = grouped
    by_id: dict[str, list[_Copy]] = defaultdict(list)
    for copy in copies:
        by_id[copy.product_id].append(copy)
    sole_id = len(by_id) == 1
    for product_id, same_id in by_id.items():
        # Canonical JSON decides; the position only orders copies that are byte for byte the same.
        kept = min(same_id, key=lambda copy: (copy.canonical, copy.position))
        yield product_id, KeptCopy(kept.position, kept.content_hash, sole_id)


class FindDuplicates(beam.PTransform):
    """Product row groups -> {candidates: one KeyIndex, kept: (product_id, KeptCopy) per candidate id}.

    Both outputs are meant as side inputs (`key_index.as_side_input`, AsDict): their size is
    that of the duplicates, not of the catalog.
    """

    def __init__(self, identity: ModelIdentity) -> None:
        super().__init__()
        self.identity = identity

    def expand(self, groups: beam.PCollection) -> dict[str, beam.PCollection]:
        candidates = groups | RepeatedIdKeys()
        kept = (
            groups
            | "CandidateCopies"
            >> beam.ParDo(_CandidateCopiesFn(self.identity), candidates=as_side_input(candidates))
            | "ByKey" >> beam.GroupByKey()
            | "ApplyRule" >> beam.FlatMap(_kept_copies)
        )
        return {CANDIDATES: candidates, KEPT: kept}
