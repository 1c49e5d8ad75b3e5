"""The top-level manifest of a partitioned index, the recall of its shards searched as one, and what
an earlier build of each shard measured.

`build_partitioned` calls these on the driver once every shard exists: the manifest is written last
(temp file + rename), so a reader never sees a manifest over missing shards.
"""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path
from typing import Any

from apache_beam.io.filesystems import FileSystems

from index_builder.artifact import IndexManifest
from index_builder.partitioned import PartitionedManifest, ShardEntry, shard_dir_name
from index_builder.schedule import SearchSchedule
from pipelines.index.union_recall import measure_union_recall
from pipelines.storage.staged_output import is_local
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


def measured_recall(folder: str, embeddings: str, depth: int) -> dict[str, Any] | None:
    """recall@depth of the built shards searched as one index, against exact search over every
    embedding, on 1,000 held-out vectors, one shard in memory at a time
    (`pipelines.index.union_recall`); None off local disk."""
    if not (is_local(folder) and is_local(embeddings)):
        LOGGER.info("recall not measured: %s or %s is not on local disk", folder, embeddings)
        return None
    return measure_union_recall(folder, embeddings, depth).to_dict()


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


def previous_shard(index_dir: str | None, shard: int, num_shards: int) -> str | None:
    """The local folder of one shard of `index_dir` whose tree a build may update (a single index is
    shard 0 of 1, in its own folder or in shard-00000-of-00001/), or None: none there, or not local."""
    if not index_dir or FileSystems.get_scheme(index_dir) not in (None, "file"):
        return None
    candidates = [FileSystems.join(index_dir, shard_dir_name(shard, num_shards))]
    if num_shards == 1:
        candidates.append(index_dir)
    for folder in candidates:
        if FileSystems.exists(FileSystems.join(folder, MANIFEST_FILE)):
            return folder
    return None


def serving_schedule(index_dir: str | None) -> list[dict[str, Any]]:
    """What a server searching `index_dir` gets per depth, from the build's schedules: which searcher
    serves it ("tree", "exact", or "tree in n of m shards"), the recall the build measured (the lowest of
    any shard's; exact scoring 1.0), its loss against exact search, and the speed-up over exact scoring
    (the lowest of any shard's). Empty for an index without schedules (older, untuned, or absent)."""
    if not index_dir:
        return []
    path = FileSystems.join(index_dir, MANIFEST_FILE)
    try:
        top = json.loads(_read_json(path)[0])
    except (OSError, ValueError):
        return []
    count = len(top.get("shards") or ()) or 1
    shards = [shard_recall(index_dir, shard, count) or {} for shard in range(count)]
    schedules = [SearchSchedule.from_list(recall.get("schedule")) for recall in shards]
    if any(schedule is None for schedule in schedules):
        return []
    rows = []
    for depth in (entry.depth for entry in schedules[0].entries):
        entries = [schedule.entry_for(depth) for schedule in schedules]
        trees = sum(entry.searcher == "tree" for entry in entries)
        searcher = f"tree in {trees} of {count} shards"
        if trees in (0, count):
            searcher = "tree" if trees else "exact"
        recall = min(entry.recall for entry in entries if entry.recall is not None)
        speedups = [entry.speedup for entry in entries if entry.speedup is not None]
        rows.append(
            {
                "depth": depth,
                "searcher": searcher,
                "recall": round(recall, 4),
                "recall_loss": round(1 - recall, 4),
                "speedup_over_exact": round(min(speedups), 2) if speedups else None,
            }
        )
    return rows


def format_serving(rows: list[dict[str, Any]]) -> str:
    """One line for the evaluation's table: what the server sees at each serving depth."""
    parts = []
    for row in rows:
        speed = f", {row['speedup_over_exact']:.1f}x exact" if row["speedup_over_exact"] else ""
        parts.append(f"k<={row['depth']:,} {row['searcher']} recall {row['recall']:.3f}{speed}")
    return "index at serving depths (as built): " + "; ".join(parts)


def union_recall(folder: str, embeddings: str, depth: int, num_shards: int) -> dict[str, Any] | None:
    """recall@depth of the built shards searched as one. One shard's build measured it already, and
    shards that all score exactly find every true neighbour: only other layouts are measured again
    (`measured_recall`, one shard at a time)."""
    shards = [shard_recall(folder, shard, num_shards) for shard in range(num_shards)]
    if num_shards == 1 and shards[0] is not None:
        return shards[0]
    if all(recall is not None and recall.get("exact") for recall in shards):
        reason = "every shard scores exactly: recall is 1 by construction"
        return {"k": depth, "queries": 0, "recall_at_k": 1.0, "exact": True, "reason": reason}
    return measured_recall(folder, embeddings, depth)


def shard_search_settings(folder: str, num_shards: int) -> tuple[str, ...]:
    """Each shard's ScaNN search settings as its build saved them (`ScannIndexConfig.__str__`)."""
    settings = []
    for shard in range(num_shards):
        path = FileSystems.join(folder, shard_dir_name(shard, num_shards), MANIFEST_FILE)
        settings.append(str(IndexManifest.from_json(_read_json(path)[0], Path(path)).config))
    return tuple(settings)
