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
on how embeddings were produced. The names below are imported on first use, not with the package:
`pipelines.options` reads `index_builder.config` for every command's flags, and the searchers
bring torch and ScaNN with them.
"""

from __future__ import annotations

from schemas.package_exports import exported_on_use

# Each exported name and the submodule that defines it.
_EXPORTS = {
    "IndexArtifactError": "index_builder.artifact",
    "IndexManifest": "index_builder.artifact",
    "ScannIndexBuilder": "index_builder.builder",
    "ReorderPrecision": "index_builder.config",
    "ScannIndexConfig": "index_builder.config",
    "Scoring": "index_builder.config",
    "ExactSearcher": "index_builder.exact",
    "ExactSparseSearcher": "index_builder.inverted",
    "InvertedIndex": "index_builder.inverted",
    "InvertedManifest": "index_builder.inverted",
    "PartitionedIndex": "index_builder.partitioned",
    "PartitionedManifest": "index_builder.partitioned",
    "open_index": "index_builder.partitioned",
    "shard_of": "index_builder.partitioned",
    "RecallReport": "index_builder.recall",
    "RecallTargetError": "index_builder.recall",
    "tune_recall": "index_builder.recall",
    "ScannIndex": "index_builder.scann_index",
    "Searcher": "index_builder.searcher",
    "SearchResult": "index_builder.searcher",
}

__getattr__, __dir__ = exported_on_use(__name__, _EXPORTS)


__all__ = sorted(_EXPORTS)
