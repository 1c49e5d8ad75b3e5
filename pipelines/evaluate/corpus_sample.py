"""A catalog cut to a size an evaluation can embed in minutes: every judged product and a fixed sample of
the rest.

`madr adapt` compares the adapted model with the backbone used zero-shot (and BM25) by embedding the
catalog once per model: on 100,000 products that is two passes of the whole catalog on top of training,
longer than the adaptation itself on a CPU. Every system is scored over the same cut corpus, so the
comparison stays like with like; each one's recall is higher than over the whole catalog (fewer
distractors), which the caller says. The sample is a product-id hash order, not a random draw: the same
catalog gives the same corpus on every run and machine.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from apache_beam.io.filesystems import FileSystems

LOGGER = logging.getLogger(__name__)


@dataclass(frozen=True)
class CorpusSample:
    """Where the cut catalog is (`products`, a Parquet glob), and how much of the catalog it holds."""

    products: str
    kept: int
    catalog: int
    judged: int

    @property
    def whole(self) -> bool:
        return self.kept == self.catalog

    def describe(self) -> str:
        if self.whole:
            return f"over all {self.catalog:,} products"
        others = self.kept - self.judged
        sample = f" and {others:,} of the others, a fixed sample" if others > 0 else ", no other"
        return (
            f"over {self.kept:,} of the catalog's {self.catalog:,} products ({self.judged:,} judged{sample}: "
            "recall is higher than over the whole catalog, for each system alike)"
        )


def _hash_rank(product_id: str) -> bytes:
    return hashlib.sha256(product_id.encode("utf-8")).digest()


def sample_corpus(products: str, judgments: str, limit: int, folder: Path) -> CorpusSample:
    """The catalog `products` (a Parquet glob) as is when it holds at most `limit` products (or `limit` is
    0); else a copy in `folder` of every product `judgments` names and the first of the others in
    product-id hash order, `limit` in all (more when more are judged: none is dropped)."""
    files = [meta.path for meta in FileSystems.match([products])[0].metadata_list]
    ids = pa.concat_arrays(
        [pq.read_table(path, columns=["product_id"]).column("product_id").combine_chunks() for path in files]
    )
    judged_ids = pc.unique(pq.read_table(judgments, columns=["product_id"]).column("product_id"))
    judged = pc.is_in(ids, value_set=judged_ids)
    judged_count = int(pc.sum(judged).as_py() or 0)
    if limit <= 0 or len(ids) <= limit:
        return CorpusSample(products, len(ids), len(ids), judged_count)
    others = sorted(pc.filter(ids, pc.invert(judged)).to_pylist(), key=_hash_rank)
    kept = pa.concat_arrays(
        [pc.filter(ids, judged), pa.array(others[: max(limit - judged_count, 0)], pa.string())]
    )
    target = folder / "products"
    target.mkdir(parents=True, exist_ok=True)
    for stale in target.glob("products-*.parquet"):  # an earlier run's cut: this folder is the sample's own
        stale.unlink()
    written = 0
    for number, path in enumerate(files):
        table = pq.read_table(path)
        table = table.filter(pc.is_in(table.column("product_id"), value_set=kept))
        if table.num_rows:
            pq.write_table(table, target / f"products-{number:05d}.parquet")
            written += table.num_rows
    LOGGER.info(
        "evaluation corpus: %d of %d products (%d judged) in %s", written, len(ids), judged_count, target
    )
    return CorpusSample(str(target / "products-*.parquet"), written, len(ids), judged_count)


__all__ = ["CorpusSample", "sample_corpus"]
