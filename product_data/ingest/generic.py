"""Any catalog, query set or judgment file → madr records, described by a `ColumnMapping`.

For sources without a dedicated loader (a retailer's own export): the mapping names,
for each target field, the source column that holds it, and how to split a string
into a list (``"Home > Decor > Lamps"`` into a category path). A target field that is
not mapped is read from the column of the same name, so a file already in madr's
vocabulary needs an empty mapping. Queries without a ``split`` column get "test", as
`schemas.validate_query` decides for every stage.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from product_data.ingest.common import FirstWins, IngestResult, Record, StreamTally, build_result
from product_data.ingest.html_text import plain_text
from product_data.ingest.readers import (
    RawRow,
    missing_columns_message,
    parquet_columns,
    read_delimited,
    read_jsonl,
    read_parquet,
)
from schemas import AspectSchema, InvalidRecord, validate_judgment, validate_product, validate_query

Kind = Literal["products", "queries", "judgments"]
FileFormat = Literal["jsonl", "csv", "parquet"]

TARGET_FIELDS: Mapping[str, tuple[str, ...]] = {
    "products": (
        "product_id",
        "title",
        "description",
        "bullet_points",
        "brand",
        "color",
        "category_path",
        "locale",
    ),
    "queries": ("query_id", "text", "split"),
    "judgments": ("query_id", "product_id", "grade", "label"),
}
REQUIRED_FIELDS: Mapping[str, tuple[str, ...]] = {
    "products": ("product_id", "title"),
    "queries": ("query_id", "text"),
    "judgments": ("query_id", "product_id", "grade"),
}
LIST_FIELDS: tuple[str, ...] = ("bullet_points", "category_path")
HTML_FIELDS: tuple[str, ...] = ("description", "bullet_points")  # where exports put markup
MAPPING_KEYS: tuple[str, ...] = (
    "fields",
    "aspects",
    "separators",
    "label_grades",
    "category_level",
    "strip_html",
)
# What each mapping key holds in JSON, as said in an error, and the check of it.
_KEY_TYPES: Mapping[str, tuple[str, Any]] = {
    "fields": ("an object of target field -> source column name", lambda v: _object_of(v, str)),
    "aspects": ("an object of aspect name -> source column name", lambda v: _object_of(v, str)),
    "separators": ("an object of field or aspect -> separator string", lambda v: _object_of(v, str)),
    "label_grades": ("an object of label -> integer grade", lambda v: _object_of(v, int)),
    "category_level": ("an integer (-1: the leaf, 0: the top) or null", lambda v: v is None or _is_int(v)),
    "strip_html": ("true or false", lambda v: isinstance(v, bool)),
}


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _object_of(value: Any, kind: type) -> bool:
    """A JSON object whose keys are strings and whose values are of `kind` (ints that are not bools)."""
    if not isinstance(value, Mapping):
        return False
    check = _is_int if kind is int else (lambda item: isinstance(item, kind))
    return all(isinstance(key, str) and check(item) for key, item in value.items())


_VALIDATORS = {"products": validate_product, "queries": validate_query, "judgments": validate_judgment}
_EXTENSIONS: Mapping[str, FileFormat] = {
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".csv": "csv",
    ".tsv": "csv",
    ".parquet": "parquet",
    ".pq": "parquet",
}


@dataclass(frozen=True)
class ColumnMapping:
    """Where each target field lives in the source, and how to split strings into lists.

    ``fields``: target field → source column, e.g. ``{"product_id": "sku", "title": "name",
    "brand": "manufacturer", "category_path": "breadcrumbs"}``.
    ``aspects``: aspect name → source column (a column may feed a field and an aspect).
    ``separators``: list field (bullet_points, category_path) or aspect name → the separator
    that splits a string value; a string without one becomes a one-item list, and a column that
    already holds lists (JSON arrays, Parquet lists) is taken as it is.
    ``label_grades``: for judgments whose grade column holds text labels, label → grade.
    ``category_level``: when no ``category`` aspect is mapped, the category aspect is this level of
    the product's category path: -1 (default) its leaf, 0 its top; null: no category aspect from it.
    ``strip_html``: description and bullets are read as plain text (tags dropped, entities decoded);
    false keeps them as the export has them.
    """

    fields: Mapping[str, str] = field(default_factory=dict)
    aspects: Mapping[str, str] = field(default_factory=dict)
    separators: Mapping[str, str] = field(default_factory=dict)
    label_grades: Mapping[str, int] = field(default_factory=dict)
    category_level: int | None = -1
    strip_html: bool = True

    def __post_init__(self) -> None:
        known = {name for names in TARGET_FIELDS.values() for name in names}
        for target, column in self.fields.items():
            if target not in known:
                raise ValueError(f"unknown target field {target!r}; targets are {sorted(known)}")
            if not isinstance(column, str) or not column:
                raise ValueError(f"source column of {target!r} must be a non-empty string, got {column!r}")
        if self.aspects:
            AspectSchema(tuple(self.aspects))  # names must be snake_case, unique, not reserved
        for name, column in self.aspects.items():
            if name in LIST_FIELDS:
                raise ValueError(f"aspect {name!r} would be ambiguous with the list field of that name")
            if not isinstance(column, str) or not column:
                raise ValueError(
                    f"source column of aspect {name!r} must be a non-empty string, got {column!r}"
                )
        for target, separator in self.separators.items():
            if target not in LIST_FIELDS and target not in self.aspects:
                raise ValueError(
                    f"separator for {target!r}: only {LIST_FIELDS} or a mapped aspect can be split"
                )
            if not isinstance(separator, str) or not separator:
                raise ValueError(f"separator for {target!r} must be a non-empty string, got {separator!r}")
        for label, grade in self.label_grades.items():
            if isinstance(grade, bool) or not isinstance(grade, int) or grade < 0:
                raise ValueError(f"grade of label {label!r} must be an int >= 0, got {grade!r}")
        level = self.category_level
        if level is not None and (isinstance(level, bool) or not isinstance(level, int)):
            raise ValueError(f"category_level must be an int (-1: the leaf, 0: the top) or null: {level!r}")
        if not isinstance(self.strip_html, bool):
            raise ValueError(f"strip_html must be true or false, got {self.strip_html!r}")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], where: str = "mapping") -> ColumnMapping:
        """A mapping from its JSON form; an unknown key is named with the valid ones."""
        if not isinstance(data, Mapping):
            raise ValueError(f"{where}: a mapping is a JSON object with keys {list(MAPPING_KEYS)}")
        unknown = sorted(set(data) - set(MAPPING_KEYS))
        if unknown:
            raise ValueError(f"{where}: unknown mapping key(s) {unknown}; the keys are {list(MAPPING_KEYS)}")
        for key, value in data.items():
            expected, accepts = _KEY_TYPES[key]
            if not accepts(value):
                raise ValueError(
                    f"{where}: {key!r} must be {expected}, got {type(value).__name__} {value!r} (README, "
                    "'Your own catalog')"
                )
        try:
            return cls(**data)
        except ValueError as error:
            raise ValueError(f"{where}: {error}") from None

    def column(self, target: str) -> str:
        return self.fields.get(target, target)

    def source_columns(self, kind: Kind) -> list[str]:
        """Every column this mapping reads for ``kind``, in a stable order."""
        wanted = [self.column(target) for target in TARGET_FIELDS[kind]] + list(self.aspects.values())
        return list(dict.fromkeys(wanted))

    def named_columns(self, kind: Kind) -> list[str]:
        """The source columns this mapping names explicitly for ``kind`` (its fields and aspects)."""
        return [column for target, column in self.fields.items() if target in TARGET_FIELDS[kind]] + list(
            self.aspects.values()
        )

    def check_kind(self, kind: Kind) -> None:
        stray = [target for target in self.fields if target not in TARGET_FIELDS[kind]]
        if stray:
            raise ValueError(f"{stray} are not fields of {kind}; its fields are {TARGET_FIELDS[kind]}")
        if self.label_grades and kind != "judgments":
            raise ValueError("label_grades only applies to judgments")

    def split(self, target: str, value: Any) -> Any:
        if isinstance(value, str):
            separator = self.separators.get(target)
            return value.split(separator) if separator else [value]
        return value  # None, or a list already; anything else is for validation to name

    def grade(self, value: Any) -> Any:
        """Text labels through ``label_grades``; integral strings and floats from CSV/Parquet to int."""
        if self.label_grades and isinstance(value, str):
            if value.strip() not in self.label_grades:
                raise ValueError(f"grade label {value!r} is not one of {sorted(self.label_grades)}")
            return self.label_grades[value.strip()]
        if isinstance(value, str) and value.strip().isdigit():
            return int(value.strip())
        if isinstance(value, float) and value.is_integer():
            return int(value)
        return value

    def category_aspect(self, path: Any) -> list[str] | None:
        """The category aspect from a category path (`category_level`), when no column maps one."""
        if "category" in self.aspects or self.category_level is None or not isinstance(path, list):
            return None
        levels = [level.strip() for level in path if isinstance(level, str) and level.strip()]
        if not -len(levels) <= self.category_level < len(levels):
            return None
        return [levels[self.category_level]]

    def convert(self, row: Mapping[str, Any], kind: Kind, placeholders: Counter[str] | None = None) -> Record:
        """One source row as a validated record of ``kind``. An export's placeholder value in a field that
        may be missing (`PLACEHOLDER_FIELDS`, the aspects) is read as missing, counted in `placeholders`."""
        raw: dict[str, Any] = {}
        placeholders = placeholders if placeholders is not None else Counter()
        for target in TARGET_FIELDS[kind]:
            value = row.get(self.column(target))
            raw[target] = self.split(target, value) if target in LIST_FIELDS else value
            if target in PLACEHOLDER_FIELDS:
                raw[target] = _without_placeholders(raw[target], target, placeholders)
            if self.strip_html and target in HTML_FIELDS:
                raw[target] = _without_html(raw[target])
        if kind == "judgments":
            if self.label_grades and raw["label"] is None and isinstance(raw["grade"], str):
                raw["label"] = raw["grade"]
            try:
                raw["grade"] = self.grade(raw["grade"])
            except ValueError as error:
                raise InvalidRecord(
                    "judgment", f"{raw['query_id']}/{raw['product_id']}", str(error)
                ) from None
        else:
            raw["aspects"] = {
                name: _without_placeholders(
                    self.split(name, row.get(column)), f"aspects.{name}", placeholders
                )
                for name, column in self.aspects.items()
            }
            category = self.category_aspect(raw.get("category_path")) if kind == "products" else None
            if category:
                raw["aspects"]["category"] = category
        return _VALIDATORS[kind](raw)


# Values exports write for "none": Shopify's variant option "Default Title", "N/A", a dash. Read as
# missing in fields that may be missing, never in ids, titles or text.
PLACEHOLDERS = frozenset({"default title", "n/a", "n.a.", "-", "--", "—", "–"})
PLACEHOLDER_FIELDS = frozenset({"brand", "color", "category_path", "bullet_points", "locale"})


def _without_placeholders(value: Any, name: str, counted: Counter[str]) -> Any:
    def placeholder(item: Any) -> bool:
        return isinstance(item, str) and " ".join(item.split()).casefold() in PLACEHOLDERS

    if placeholder(value):
        counted[name] += 1
        return None
    if isinstance(value, list) and any(placeholder(item) for item in value):
        kept = [item for item in value if not placeholder(item)]
        counted[name] += len(value) - len(kept)
        return kept or None
    return value


def _without_html(value: Any) -> Any:
    if isinstance(value, str):
        return plain_text(value)
    if isinstance(value, list):
        return [plain_text(item) if isinstance(item, str) else item for item in value]
    return value  # None, or a type for validation to name


def infer_format(path: str | Path) -> FileFormat:
    suffix = Path(path).suffix.lower()
    if suffix not in _EXTENSIONS:
        raise ValueError(
            f"cannot tell the format of {path} from {suffix!r}; pass file_format ('jsonl', 'csv', 'parquet')"
        )
    return _EXTENSIONS[suffix]


def _rows(
    path: Path, file_format: FileFormat, delimiter: str, required: list[str], wanted: list[str], encoding: str
) -> Iterator[RawRow]:
    if file_format == "parquet":
        present = parquet_columns(path)
        message = missing_columns_message(path, present, required)
        if message:
            raise ValueError(message)
        return read_parquet(path, wanted)
    if file_format == "csv":
        return read_delimited(path, delimiter=delimiter, required=required, encoding=encoding)
    return read_jsonl(path, encoding)  # no header to check: a row without a required key is dead-lettered


def _noting_keys(rows: Iterator[RawRow], seen: set[str]) -> Iterator[RawRow]:
    for row in rows:
        if row.problem is None:
            seen.update(row.fields)
        yield row


def load_generic(
    path: str | Path,
    mapping: ColumnMapping,
    kind: Kind,
    *,
    file_format: FileFormat | None = None,
    delimiter: str | None = None,
    positive_min_grade: int | None = None,
    encoding: str = "utf-8",
) -> IngestResult:
    """Load one stream from JSONL, CSV/TSV or Parquet; the format comes from the extension unless given.

    ``delimiter`` defaults to a tab for ``.tsv`` and a comma otherwise. ``positive_min_grade``
    (judgments only) records from which grade the source's labels mean relevant. ``encoding`` is the
    text files' character set (Parquet carries its own).
    """
    if kind not in TARGET_FIELDS:
        raise ValueError(f"kind must be one of {tuple(TARGET_FIELDS)}, got {kind!r}")
    mapping.check_kind(kind)
    if positive_min_grade is not None and kind != "judgments":
        raise ValueError("positive_min_grade describes judgments; it does not apply to " + kind)
    source = Path(path)
    file_format = file_format or infer_format(source)
    if file_format not in ("jsonl", "csv", "parquet"):
        raise ValueError(f"file_format must be 'jsonl', 'csv' or 'parquet', got {file_format!r}")
    delimiter = delimiter or ("\t" if source.suffix.lower() == ".tsv" else ",")
    required = [mapping.column(target) for target in REQUIRED_FIELDS[kind]]
    # A column the mapping names (optional or not) must exist: a misspelt one would leave a field null
    # on every record without a word.
    named = list(dict.fromkeys([*required, *mapping.named_columns(kind)]))
    rows = _rows(source, file_format, delimiter, named, mapping.source_columns(kind), encoding)
    seen: set[str] = set()
    if file_format == "jsonl":  # no header: the keys of the rows read stand for it
        rows = _noting_keys(rows, seen)
    unique = FirstWins.of(kind)
    tally = StreamTally(f"ingest.generic.{kind}")
    records = list(tally.route(rows, lambda row: unique(mapping.convert(row, kind, tally.placeholders))))
    if file_format == "jsonl" and seen:
        message = missing_columns_message(source, sorted(seen), named)
        if message:
            raise ValueError(message.replace("its columns are", "its rows' keys are"))
    provenance = {"path": str(source), "format": file_format, "kind": kind, "mapping": asdict(mapping)}
    if file_format == "csv":
        provenance["delimiter"] = delimiter
    if file_format != "parquet":
        provenance["encoding"] = encoding
    return build_result(
        "generic",
        {kind: tally},
        {kind: records},
        positive_min_grade=positive_min_grade,
        provenance=provenance,
    )
