"""Index builds: `madr build-index` and `madr build-sparse-index`.

`single` trains one ScaNN index on the driver; `partitioned` builds hash-partitioned shards in
Beam (`--num_index_shards` > 1) and `manifest` writes their manifest; `sparse` builds UHD-BERT's
inverted indexes. The index artifacts themselves are `index_builder`'s.
"""

from pipelines.index.partitioned import BuildPartitionedIndex, build_partitioned_index, run_build_index
from pipelines.index.single import add_build_index_arguments, build_index
from pipelines.index.sparse import build_inverted_index, build_inverted_indexes

__all__ = [
    "BuildPartitionedIndex",
    "add_build_index_arguments",
    "build_index",
    "build_inverted_index",
    "build_inverted_indexes",
    "build_partitioned_index",
    "run_build_index",
]
