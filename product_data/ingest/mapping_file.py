"""One mapping file for a store export: a section per file it describes.

    {
      "products":  {"fields": {"product_id": "sku", "title": "name", "category_path": "breadcrumbs"},
                    "aspects": {"brand": "manufacturer", "color": "colour"},
                    "separators": {"category_path": " > "}},
      "queries":   {"fields": {"query_id": "qid", "text": "query"}},
      "judgments": {"fields": {"query_id": "qid", "product_id": "sku", "grade": "relevance"}}
    }

Each section is a `ColumnMapping` (its keys: `MAPPING_KEYS`). A file without sections is one
`ColumnMapping` for every file, as earlier releases read it.
"""

from __future__ import annotations

import json
from pathlib import Path

from product_data.ingest.generic import MAPPING_KEYS, TARGET_FIELDS, ColumnMapping, Kind

SECTIONS: tuple[Kind, ...] = tuple(TARGET_FIELDS)  # type: ignore[assignment]


def read_mapping_file(path: str | Path) -> dict[Kind, ColumnMapping]:
    """The mapping of each kind of file (products, queries, judgments) that `path` describes."""
    source = Path(path)
    try:
        data = json.loads(source.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FileNotFoundError(f"mapping file {source} does not exist") from None
    except json.JSONDecodeError as error:
        raise ValueError(f"{source} is not valid JSON: {error}") from None
    if not isinstance(data, dict):
        raise ValueError(f"{source}: a mapping file holds a JSON object with sections {list(SECTIONS)}")
    sections = [key for key in data if key in SECTIONS]
    unknown = sorted(key for key in data if key not in SECTIONS and key not in MAPPING_KEYS)
    if unknown or (sections and len(sections) != len(data)):
        stray = unknown or sorted(key for key in data if key not in SECTIONS)
        raise ValueError(
            f"{source}: unknown key(s) {stray}. A mapping file has one section per file, "
            f"{list(SECTIONS)}, each with the keys {list(MAPPING_KEYS)} (README, 'Your own catalog')"
        )
    if sections:
        return {kind: ColumnMapping.from_dict(data[kind], f"{source} [{kind}]") for kind in sections}
    flat = ColumnMapping.from_dict(data, str(source))
    return dict.fromkeys(SECTIONS, flat)
