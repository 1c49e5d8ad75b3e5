"""The top-level manifest of a partitioned index, the recall of its shards searched as one, and what
an earlier build of each shard measured.

`run_build_index` calls these on the driver once every shard exists: the manifest is written last
(temp file + rename), so a reader never sees a manifest over missing shards.
"""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path
from typing import Any

from apache_beam.io.filesystems import FileSystems

from index_builder import open_index
from index_builder.artifact import IndexManifest
from index_builder.partitioned import PartitionedManifest, ShardEntry, shard_dir_name
from index_builder.recall import measure_recall, recall_summary
from pipelines.artifacts import is_local, read_embeddings
from schemas.manifest import MANIFEST_FILE, FileEntry

LOGGER = logging.getLogger(__name__)


def _read_json(path: str) -> tuple[str, FileEntry]:
    with FileSystems.open(path) as handle:
        data = handle.read()
    return data.decode("utf-8"), FileEntry(hashlib.sha256(data).hexdigest(), len(data))


def write_partitioned_manifest(
    output_dir: str,
    num_shards: int,
    model_id: str,
    model_version: str,
    dimension: int | None = None,
    extra: dict[str, Any] | None = None,
) -> PartitionedManifest:
    """Check every shard's manifest, then write the top-level manifest last (temp file + rename).

    ``dimension``, when given, must be every shard's: checked before anything is written, so
    a finished-looking artifact is never a wrong one.
    """
    shards = []
    dimensions = set()
    for shard in range(num_shards):
        name = shard_dir_name(shard, num_shards)
        path = FileSystems.join(output_dir, name, MANIFEST_FILE)
        if not FileSystems.exists(path):
            raise RuntimeError(
                f"{path} is missing: no product hashed to shard {shard} (fewer products than shards?) "
                "or its build failed; use fewer --num_index_shards or rerun"
            )
        text, entry = _read_json(path)
        inner = IndexManifest.from_json(text, Path(path))
        if (inner.model_id, inner.model_version) != (model_id, model_version):
            raise RuntimeError(
                f"{path} is for {inner.model_id}/{inner.model_version}, not {model_id}/{model_version}"
            )
        dimensions.add(inner.dimension)
        shards.append(ShardEntry(path=name, count=inner.count, manifest=entry))
    if len(dimensions) != 1 or (dimension is not None and dimensions != {dimension}):
        raise RuntimeError(
            f"shards of {output_dir} have dimensions {sorted(dimensions)}, "
            f"expected one ({dimension or 'any'})"
        )
    manifest = PartitionedManifest(
        model_id=model_id,
        model_version=model_version,
        dimension=dimensions.pop(),
        shards=tuple(shards),
        extra=dict(extra or {}),
    )
    temporary = FileSystems.join(output_dir, f".{MANIFEST_FILE}.tmp")
    with FileSystems.create(temporary) as handle:
        handle.write(manifest.to_json().encode("utf-8"))
    FileSystems.rename([temporary], [FileSystems.join(output_dir, MANIFEST_FILE)])
    return manifest


def measured_recall(folder: str, embeddings: str, max_k: int) -> dict[str, Any] | None:
    """recall@max_k of the built shards searched as one index, against exact search over every
    embedding, on 1,000 held-out vectors (`index_builder.recall.measure_recall`); None off local disk."""
    if not (is_local(folder) and is_local(embeddings)):
        LOGGER.info("recall not measured: %s or %s is not on local disk", folder, embeddings)
        return None
    searcher = open_index(folder)
    ids, matrix, _ = read_embeddings(embeddings)
    row_of = {product_id: row for row, product_id in enumerate(ids)}
    report = measure_recall(searcher, matrix[[row_of[i] for i in searcher.ids]], max_k)
    LOGGER.info("partitioned index: %s", recall_summary(report))
    return report.to_dict()


def shard_recall(index_dir: str | None, shard: int, num_shards: int) -> dict[str, Any] | None:
    """The ``recall`` entry a build wrote for one shard of `index_dir` (a single index is shard 0 of 1),
    or None: no such folder, another shard count, or a manifest that cannot be read (logged: the nightly
    reads last night's to save time, never to fail)."""
    if not index_dir:
        return None
    paths = [FileSystems.join(index_dir, shard_dir_name(shard, num_shards), MANIFEST_FILE)]
    if num_shards == 1:
        paths.append(FileSystems.join(index_dir, MANIFEST_FILE))
    for path in paths:
        try:
            if not FileSystems.exists(path):
                continue
            recall = json.loads(_read_json(path)[0]).get("recall")
        except (OSError, ValueError) as error:
            LOGGER.warning("%s unreadable, its build's choice not reused: %s", path, error)
            return None
        if recall is not None:
            return dict(recall)
    return None


def union_recall(folder: str, embeddings: str, max_k: int, num_shards: int) -> dict[str, Any] | None:
    """recall@max_k of the built shards searched as one. One shard's build measured it already, and
    shards that all score exactly find every true neighbour: only other layouts are measured again
    (`measured_recall`, which loads the index and the embeddings a second time)."""
    shards = [shard_recall(folder, shard, num_shards) for shard in range(num_shards)]
    if num_shards == 1 and shards[0] is not None:
        return shards[0]
    if all(recall is not None and recall.get("exact") for recall in shards):
        reason = "every shard scores exactly: recall is 1 by construction"
        return {"k": max_k, "queries": 0, "recall_at_k": 1.0, "exact": True, "reason": reason}
    return measured_recall(folder, embeddings, max_k)
