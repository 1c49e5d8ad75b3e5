"""Index building for madr: ScaNN indexes over product embeddings, and their exact ground truth.

`ScannIndexBuilder` collects a `ScannIndexConfig` (or derives one from the corpus size
with `for_corpus`) and trains a `ScannIndex`; `ExactSearcher` answers the same
`search(queries, k)` exactly, so evaluation can measure what the index costs. Both
satisfy the `Searcher` protocol. A saved index directory carries a manifest and is
verified on `ScannIndex.load`; defects raise `IndexArtifactError`. A catalog beyond one
worker's memory is built as hash-partitioned shards (`pipelines.index.partitioned`) and searched
as one corpus by `PartitionedIndex`; `open_index` loads either layout from its manifest.
`tune_recall` measures a built index against exact search and widens its search to a target.

Only `schemas`, numpy, scann and pyarrow are imported here: the index must not depend
on how embeddings were produced.
"""

from index_builder.artifact import IndexArtifactError, IndexManifest
from index_builder.builder import ScannIndexBuilder
from index_builder.config import ReorderPrecision, ScannIndexConfig, Scoring
from index_builder.exact import ExactSearcher
from index_builder.inverted import ExactSparseSearcher, InvertedIndex, InvertedManifest
from index_builder.partitioned import PartitionedIndex, PartitionedManifest, open_index, shard_of
from index_builder.recall import RecallReport, RecallTargetError, tune_recall
from index_builder.scann_index import ScannIndex
from index_builder.searcher import Searcher, SearchResult

__all__ = [
    "ExactSearcher",
    "ExactSparseSearcher",
    "IndexArtifactError",
    "IndexManifest",
    "InvertedIndex",
    "InvertedManifest",
    "PartitionedIndex",
    "PartitionedManifest",
    "RecallReport",
    "RecallTargetError",
    "ReorderPrecision",
    "ScannIndex",
    "ScannIndexBuilder",
    "ScannIndexConfig",
    "Scoring",
    "SearchResult",
    "Searcher",
    "open_index",
    "shard_of",
    "tune_recall",
]
