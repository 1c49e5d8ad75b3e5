"""Whether a model ever trained on some products, decided by their ids, never by where the files lie.

A model's manifest records the dataset it was trained on (`dataset`) and the model it started from
(`init_from`, `adapted_from`), whose manifest records its own. A catalog scored for annotation quality is
"unseen" as a whole only when none of the products scored is in any of those datasets, compared by
product id: a fresh export of the same shop in a new folder holds the same products, and the model's
held-out slice is then what is scored. When a dataset the model records cannot be read (moved, on
another machine), nothing is assumed: the held-out rule decides.
"""

from __future__ import annotations

import json
import os
from collections.abc import Collection, Iterator, Mapping
from pathlib import Path
from typing import Any

from pipelines.io.parquet_reading import parquet_rows
from pipelines.layout import DatasetLayout
from schemas.manifest import MANIFEST_FILE

# Keys of a model manifest that name the model it started from (a path, when it was one).
_START_MODEL_KEYS = ("init_from", "adapted_from")
# How far back a chain of start models is followed.
_MAX_DEPTH = 4


def trained_datasets(model_dir: str, manifest: Mapping[str, Any], depth: int = 0) -> Iterator[str]:
    """The datasets the model and the models it started from record, nearest first."""
    if manifest.get("dataset"):
        yield _resolved(str(manifest["dataset"]), model_dir)
    if depth >= _MAX_DEPTH:
        return
    for key in _START_MODEL_KEYS:
        start = manifest.get(key)
        path = Path(_resolved(str(start), model_dir)) / MANIFEST_FILE if start else None
        if path is not None and path.is_file():
            recorded = json.loads(path.read_text())
            yield from trained_datasets(str(path.parent), recorded.get("info", recorded), depth + 1)


def _resolved(path: str, model_dir: str) -> str:
    """A recorded path as it is when it exists where the reader runs, else beside the model's folder's
    parents (a manifest records the path it was given, relative to where training ran)."""
    if "://" in path or os.path.isabs(path) or os.path.exists(path):
        return path
    for parent in Path(model_dir).resolve().parents:
        if (parent / path).exists():
            return str(parent / path)
    return path


def never_trained_on(model_dir: str, manifest: Mapping[str, Any], product_ids: Collection[str]) -> bool:
    """True when the model records the datasets it was trained on, each can be read, and none of them
    holds any of `product_ids`; False otherwise (then only the held-out rule says what is unseen).
    Streams each dataset's id column: memory is that of `product_ids`."""
    wanted = set(product_ids)
    datasets = list(trained_datasets(model_dir, manifest))
    if not datasets or not wanted:
        return False
    for dataset in datasets:
        try:
            for row in parquet_rows(DatasetLayout(dataset).products, ["product_id"]):
                if row["product_id"] in wanted:
                    return False
        except (OSError, ValueError):  # gone, moved, or not a dataset any more: nothing is assumed
            return False
    return True


__all__ = ["never_trained_on", "trained_datasets"]
