"""A store's export as a folder: products, optional queries and judgments, each with its column mapping.

    FOLDER/products.jsonl   (or .csv, .tsv, .parquet)
    FOLDER/queries.jsonl    (optional)
    FOLDER/judgments.jsonl  (optional)
    FOLDER/mapping.json     a section per file (`product_data.ingest.mapping_file`)

Each file is read by `load_generic` with its section's `ColumnMapping`. Without mapping.json, a file's
mapping is FOLDER/mapping_<kind>.json (earlier releases' layout), and without that the columns already
carry madr's names. `examples/store_export/` is one such folder, written by hand in a
real shop's style; `madr demo` adapts the shipped model to it.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from product_data.ingest.common import (
    DEFAULT_MAX_DEAD_LETTER_FRACTION,
    IngestResult,
    check_dead_letter_share,
    combine_results,
    drop_dangling_judgments,
)
from product_data.ingest.generic import ColumnMapping, Kind, load_generic
from product_data.ingest.mapping_file import SECTIONS, read_mapping_file
from product_data.ingest.writer import write_dataset

EXTENSIONS = (".jsonl", ".ndjson", ".csv", ".tsv", ".parquet")
MAPPING_FILE = "mapping.json"


def _stream_file(folder: Path, kind: str) -> Path | None:
    found = [
        folder / f"{kind}{extension}" for extension in EXTENSIONS if (folder / f"{kind}{extension}").is_file()
    ]
    if len(found) > 1:
        raise ValueError(f"{folder} has several {kind} files ({', '.join(p.name for p in found)}); keep one")
    return found[0] if found else None


def folder_mappings(root: Path) -> dict[Kind, ColumnMapping]:
    """Each kind's mapping: mapping.json's sections, else mapping_<kind>.json, else madr's own names."""
    if (root / MAPPING_FILE).is_file():
        return read_mapping_file(root / MAPPING_FILE)
    mappings: dict[Kind, ColumnMapping] = {}
    for kind in SECTIONS:
        path = root / f"mapping_{kind}.json"
        mappings[kind] = read_mapping_file(path)[kind] if path.is_file() else ColumnMapping()
    return mappings


def load_export_folder(
    folder: str | Path,
    positive_min_grade: int = 2,
    *,
    encoding: str = "utf-8",
    delimiter: str | None = None,
    keep_html: bool = False,
    max_dead_letter_fraction: float = DEFAULT_MAX_DEAD_LETTER_FRACTION,
) -> IngestResult:
    """Every stream the folder has, validated; judgments of unknown queries or products are dropped.

    `keep_html` keeps descriptions' and bullets' markup whatever the mapping says; a stream with more
    than `max_dead_letter_fraction` of its rows dead-lettered is refused (`check_dead_letter_share`).
    """
    root = Path(folder)
    mappings = folder_mappings(root)
    parts = []
    for kind in SECTIONS:
        path = _stream_file(root, kind)
        if path is None:
            if kind == "products":
                raise FileNotFoundError(f"{root} has no products file ({', '.join(EXTENSIONS)})")
            continue
        mapping = mappings.get(kind, ColumnMapping())
        if keep_html:
            mapping = dataclasses.replace(mapping, strip_html=False)
        grade = {"positive_min_grade": positive_min_grade} if kind == "judgments" else {}
        parts.append(load_generic(path, mapping, kind, delimiter=delimiter, encoding=encoding, **grade))
    result = drop_dangling_judgments(combine_results(*parts, source="generic"))
    check_dead_letter_share(result, max_dead_letter_fraction)
    return result


def ingest_export_folder(
    folder: str | Path,
    output: str | Path,
    positive_min_grade: int = 2,
    overwrite: bool = False,
    **options: Any,
) -> Path:
    """`load_export_folder` (with its keyword `options`) written as a dataset folder; returns its manifest
    path."""
    result = load_export_folder(folder, positive_min_grade, **options)
    return write_dataset(result, output, overwrite=overwrite)
