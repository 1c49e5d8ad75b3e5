"""WANDS (Wayfair ANnotation DataSet) → madr queries, products and judgments.

Source format (wayfair/WANDS README and ``read_dataset.ipynb``, which reads each file with
``pd.read_csv(..., sep='\\t')``); all three files are tab-separated with a header line:

* ``query.csv``: query_id, query, query_class (480 queries; 6 have an empty query_class).
  Fields use standard CSV quoting: query 208 is stored as ``"fawkes 36"" blue vanity"``.
* ``product.csv``: product_id, product_name, product_class, ``category hierarchy`` (with a space
  in the real header, though the README writes category_hierarchy; both are accepted),
  product_description, product_features, rating_count, average_rating, review_count.
  product_class may hold several classes joined by ``|`` ("Teen Lounge Furniture|Accent Chairs");
  the hierarchy is joined by `` / ``; product_features is ``|``-joined ``key:value`` pairs, text
  values written ``key : value``, with repeated keys ("color : white|...|color : blue") and
  empty-key noise segments (" : no").
* ``label.csv``: id, query_id, product_id, label ∈ {Exact, Partial, Irrelevant}.

WANDS has no splits; queries are assigned by `HashSplit` (default 60/20/20 train/valid/test).
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from pathlib import Path
from typing import Any

from product_data.ingest.common import (
    Converter,
    FirstWins,
    IngestResult,
    Record,
    StreamTally,
    build_result,
    drop_dangling_judgments,
)
from product_data.ingest.readers import read_delimited
from product_data.ingest.splits import HashSplit
from schemas import InvalidRecord, validate_judgment, validate_product, validate_query

QUERY_COLUMNS: tuple[str, ...] = ("query_id", "query", "query_class")
PRODUCT_REQUIRED: tuple[str, ...] = ("product_id", "product_name")
LABEL_COLUMNS: tuple[str, ...] = ("id", "query_id", "product_id", "label")
HIERARCHY_COLUMNS: tuple[str, ...] = ("category hierarchy", "category_hierarchy")

# Exact 2, Partial 1, Irrelevant 0. With positive_min_grade 2 only Exact is relevant for recall and
# training positives, the analogue of ESCI's Exact-only rule (madral-reproducibility-ecir24 §7);
# Partial still earns NDCG gain (2^1 - 1 = 1 against Exact's 3 under the default gain).
WANDS_GRADES: Mapping[str, int] = {"Exact": 2, "Partial": 1, "Irrelevant": 0}
WANDS_POSITIVE_MIN_GRADE = 2
# Feature keys naming the product's own colour, in order of preference; all seen in real product_features
# rows. Part colours (basecolor, topcolor, legcolor) are left out: a gold-based white table is white.
COLOR_KEYS: tuple[str, ...] = ("color", "colorfinish", "upholsterycolor", "primarycolor")
DEFAULT_WANDS_SPLIT = HashSplit(valid_fraction=0.2, test_fraction=0.2)


def _unique(values: list[str]) -> list[str]:
    return list(dict.fromkeys(value for value in values if value))


def split_classes(value: Any) -> list[str]:
    """``"Teen Lounge Furniture|Accent Chairs"`` → both classes; query_class uses the same vocabulary."""
    return _unique([part.strip() for part in value.split("|")]) if isinstance(value, str) else []


def split_hierarchy(value: Any) -> list[str]:
    """``"Furniture / Bedroom Furniture / Beds"`` → its levels, root first."""
    return _unique([part.strip() for part in value.split(" / ")]) if isinstance(value, str) else []


def parse_features(value: Any) -> list[tuple[str, str]]:
    """``product_features`` as (key, value) pairs in source order.

    Segments with an empty key or value carry nothing a reader could use and are dropped; a
    segment without a colon is kept whole as a value with an empty key.
    """
    if not isinstance(value, str):
        return []
    pairs: list[tuple[str, str]] = []
    for segment in value.split("|"):
        key, colon, text = segment.partition(":")
        key, text = key.strip(), text.strip()
        if not colon:
            key, text = "", key
            if text:
                pairs.append((key, text))
        elif key and text:
            pairs.append((key, text))
    return pairs


def feature_colors(pairs: list[tuple[str, str]]) -> list[str]:
    """Values of the first colour key present; several values when the key repeats."""
    for key in COLOR_KEYS:
        values = _unique([text for name, text in pairs if name == key])
        if values:
            return values
    return []


def wands_query(row: Mapping[str, Any], splits: HashSplit) -> Record:
    record = validate_query({"query_id": row.get("query_id"), "text": row.get("query"), "split": "test"})
    record["split"] = splits.assign(record["query_id"])  # validation first: hash the normalised id
    classes = split_classes(row.get("query_class"))
    record["aspects"] = {"category": classes} if classes else {}
    return record


def wands_product(row: Mapping[str, Any]) -> Record:
    pairs = parse_features(row.get("product_features"))
    colors = feature_colors(pairs)
    classes = split_classes(row.get("product_class"))
    hierarchy = next((row[name] for name in HIERARCHY_COLUMNS if name in row), None)
    record = validate_product(
        {
            "product_id": row.get("product_id"),
            "title": row.get("product_name"),
            "description": row.get("product_description"),
            "bullet_points": _unique([f"{key}: {text}" if key else text for key, text in pairs]),
            "color": colors[0] if colors else None,
            "category_path": split_hierarchy(hierarchy),
        }
    )
    record["aspects"] = {
        name: values for name, values in (("category", classes), ("color", colors)) if values
    }
    return record


def wands_judgment(row: Mapping[str, Any]) -> Record:
    label = row.get("label")
    if not isinstance(label, str) or label.strip() not in WANDS_GRADES:
        record_id = f"{row.get('query_id')}/{row.get('product_id')}"
        raise InvalidRecord(
            "judgment", record_id, f"'label' must be one of {list(WANDS_GRADES)}, got {label!r}"
        )
    label = label.strip()
    return validate_judgment(
        {
            "query_id": row.get("query_id"),
            "product_id": row.get("product_id"),
            "grade": WANDS_GRADES[label],
            "label": label,
        }
    )


def _read_stream(
    stream: str, path: str | Path, required: tuple[str, ...], convert: Converter
) -> tuple[StreamTally, list[Record]]:
    """One WANDS file through its converter; ids are unique in WANDS, so a repeat is dead-lettered."""
    tally = StreamTally(f"ingest.wands.{stream}")
    unique = FirstWins.of(stream)
    rows = read_delimited(path, delimiter="\t", required=required)
    return tally, list(tally.route(rows, lambda row: unique(convert(row))))


def load_wands(
    query_csv: str | Path,
    product_csv: str | Path | None = None,
    label_csv: str | Path | None = None,
    *,
    splits: HashSplit = DEFAULT_WANDS_SPLIT,
) -> IngestResult:
    """Load the WANDS files given; queries are required, products and labels optional."""
    files: dict[str, tuple[str | Path | None, tuple[str, ...], Converter]] = {
        "queries": (query_csv, QUERY_COLUMNS[:2], partial(wands_query, splits=splits)),
        "products": (product_csv, PRODUCT_REQUIRED, wands_product),
        "judgments": (label_csv, LABEL_COLUMNS[1:], wands_judgment),
    }
    tallies: dict[str, StreamTally] = {}
    records: dict[str, list[Record]] = {}
    provenance: dict[str, Any] = {"splits": splits.describe(), "grades": dict(WANDS_GRADES)}
    provenance["color_keys"] = list(COLOR_KEYS)
    for stream, (path, required, convert) in files.items():
        if path is not None:
            tallies[stream], records[stream] = _read_stream(stream, path, required, convert)
            provenance[f"{stream}_path"] = str(path)
    result = build_result(
        "wands", tallies, records, positive_min_grade=WANDS_POSITIVE_MIN_GRADE, provenance=provenance
    )
    return drop_dangling_judgments(result)
