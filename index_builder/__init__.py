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
`pipelines.settings.options` reads `index_builder.config` for every command's flags, and the searchers
bring torch and ScaNN with them.
"""

from __future__ import annotations

from schemas.package_exports import exported_on_use

# Each submodule and the names the package exports from it.
_EXPORTS = {
    "artifact": ("IndexArtifactError", "IndexManifest"),
    "builder": ("ScannIndexBuilder",),
    "config": ("ReorderPrecision", "ScannIndexConfig", "Scoring"),
    "exact": ("ExactSearcher",),
    "inverted": ("ExactSparseSearcher", "InvertedIndex", "InvertedManifest"),
    "partitioned": ("PartitionedIndex", "PartitionedManifest", "open_index"),
    "product_keys": ("id_key", "id_keys", "shard_of"),
    "recall": ("RecallReport", "RecallTargetError", "tune_recall"),
    "scann_index": ("ScannIndex",),
    "searcher": ("Searcher", "SearchResult"),
}

__getattr__, __dir__, __all__ = exported_on_use(__name__, _EXPORTS)
