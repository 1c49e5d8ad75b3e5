"""A store's export as a folder: products, optional queries and judgments, each with its column mapping.

    FOLDER/products.jsonl   (or .csv, .tsv, .parquet)   FOLDER/mapping_products.json
    FOLDER/queries.jsonl    (optional)                  FOLDER/mapping_queries.json
    FOLDER/judgments.jsonl  (optional)                  FOLDER/mapping_judgments.json

Each file is read by `load_generic` with its own `ColumnMapping` (a missing mapping file means the
columns already carry madr's names). `examples/store_export/` is one such folder, written by hand in a
real shop's style; `madr demo` adapts the shipped model to it.
"""

from __future__ import annotations

import json
from pathlib import Path

from product_data.ingest.common import IngestResult, combine_results, drop_dangling_judgments
from product_data.ingest.generic import ColumnMapping, Kind, load_generic
from product_data.ingest.writer import write_dataset

EXTENSIONS = (".jsonl", ".ndjson", ".csv", ".tsv", ".parquet")


def _stream_file(folder: Path, kind: str) -> Path | None:
    found = [
        folder / f"{kind}{extension}" for extension in EXTENSIONS if (folder / f"{kind}{extension}").is_file()
    ]
    if len(found) > 1:
        raise ValueError(f"{folder} has several {kind} files ({', '.join(p.name for p in found)}); keep one")
    return found[0] if found else None


def load_export_folder(folder: str | Path, positive_min_grade: int = 2) -> IngestResult:
    """Every stream the folder has, validated; judgments of unknown queries or products are dropped."""
    root = Path(folder)
    parts = []
    for kind in ("products", "queries", "judgments"):
        path = _stream_file(root, kind)
        if path is None:
            if kind == "products":
                raise FileNotFoundError(f"{root} has no products file ({', '.join(EXTENSIONS)})")
            continue
        mapping_path = root / f"mapping_{kind}.json"
        mapping = (
            ColumnMapping(**json.loads(mapping_path.read_text()))
            if mapping_path.is_file()
            else ColumnMapping()
        )
        grade = {"positive_min_grade": positive_min_grade} if kind == "judgments" else {}
        kind_name: Kind = kind  # type: ignore[assignment]
        parts.append(load_generic(path, mapping, kind_name, **grade))
    return drop_dangling_judgments(combine_results(*parts, source="generic"))


def ingest_export_folder(
    folder: str | Path, output: str | Path, positive_min_grade: int = 2, overwrite: bool = False
) -> Path:
    """`load_export_folder` written as a dataset folder; returns its manifest path."""
    return write_dataset(load_export_folder(folder, positive_min_grade), output, overwrite=overwrite)
