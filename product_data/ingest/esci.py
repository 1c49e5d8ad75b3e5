"""Amazon ESCI (Shopping Queries Dataset) → madr products, queries and judgments.

Source format (amazon-science/esci-data, ``shopping_queries_dataset/README.md``):

* ``shopping_queries_dataset_products.parquet``: product_id, product_title, product_description,
  product_bullet_point, product_brand, product_color, product_locale. A product id is unique only
  within a locale (the README joins examples to products on (product_locale, product_id)).
* ``shopping_queries_dataset_examples.parquet``: example_id, query, query_id, product_id,
  product_locale, esci_label (E/S/C/I), small_version, large_version (0/1), split (train/test).
  One row per judged (query, product) pair, so a query repeats on ~20 rows.

ESCI has no category, so ``category_path`` stays empty; brand and color become both fields and
aspects. The MA-Amazon data of madral-reproducibility-ecir24 adds categories from elsewhere;
that is a separate join, not this loader's business.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from product_data.ingest.common import (
    FirstWins,
    IngestResult,
    Record,
    Skip,
    StreamTally,
    build_result,
    drop_dangling_judgments,
)
from product_data.ingest.readers import read_parquet
from product_data.ingest.splits import HashSplit
from schemas import InvalidRecord, validate_judgment, validate_product, validate_query

ESCI_LOCALES: tuple[str, ...] = ("es", "jp", "us")
PRODUCT_COLUMNS: tuple[str, ...] = (
    "product_id",
    "product_title",
    "product_description",
    "product_bullet_point",
    "product_brand",
    "product_color",
    "product_locale",
)
EXAMPLE_COLUMNS: tuple[str, ...] = (
    "example_id",
    "query",
    "query_id",
    "product_id",
    "product_locale",
    "esci_label",
    "small_version",
    "large_version",
    "split",
)

# Graded relevance, highest first; the letter itself is kept in the judgment's ``label``.
ESCI_GRADES: Mapping[str, int] = {"E": 3, "S": 2, "C": 1, "I": 0}
# Only Exact is relevant for recall and training positives (madral-reproducibility-ecir24 §7).
ESCI_POSITIVE_MIN_GRADE = 3
# The float gains of madral-reproducibility-ecir24 §7 (after Reddy et al. and MA-Amazon):
# E 1.0, S 0.1, C 0.01, I 0. trec_eval parses qrels relevance with atol(), truncating 0.1 and
# 0.01 to 0 and turning NDCG into an Exact-only measure; we keep the gains as floats.
ESCI_FLOAT_GAINS: Mapping[int, float] = {3: 1.0, 2: 0.1, 1: 0.01, 0: 0.0}
# ESCI ships train/test only. Valid is carved out of train by query-id hash; 0.17 mirrors the
# MA-Amazon proportions (17k train / 3.5k valid out of ESCI small-US's 20.9k train queries).
DEFAULT_VALID_FRACTION = 0.17


@dataclass(frozen=True)
class EsciConfig:
    """Which slice of ESCI to load and how its labels become gains.

    ``catalog="judged"`` keeps only products judged in the selected slice: the products file
    serves every locale and both versions, so much of a locale's catalog is never judged in the
    small version, and holding it all in memory is the costliest part of a load.
    """

    locale: str = "us"
    version: Literal["small", "large"] = "small"
    gains: Literal["grades", "esci_float"] = "grades"
    valid_fraction: float = DEFAULT_VALID_FRACTION
    catalog: Literal["all", "judged"] = "all"
    batch_size: int = 65_536

    def __post_init__(self) -> None:
        if self.locale not in ESCI_LOCALES:
            raise ValueError(f"ESCI locale must be one of {ESCI_LOCALES}, got {self.locale!r}")
        if self.version not in ("small", "large"):
            raise ValueError(f"version must be 'small' (task 1) or 'large' (tasks 2-3), got {self.version!r}")
        if self.gains not in ("grades", "esci_float"):
            raise ValueError(f"gains must be 'grades' or 'esci_float', got {self.gains!r}")
        if self.catalog not in ("all", "judged"):
            raise ValueError(f"catalog must be 'all' or 'judged', got {self.catalog!r}")
        if isinstance(self.batch_size, bool) or not isinstance(self.batch_size, int) or self.batch_size <= 0:
            raise ValueError(f"batch_size must be a positive int, got {self.batch_size!r}")
        HashSplit(valid_fraction=self.valid_fraction)  # validates the fraction

    @property
    def valid_split(self) -> HashSplit:
        return HashSplit(valid_fraction=self.valid_fraction)


def esci_product(row: Mapping[str, Any]) -> Record:
    """One products-file row as a product; bullet points are newline-separated in ESCI."""
    bullets = row.get("product_bullet_point")
    record = validate_product(
        {
            "product_id": row.get("product_id"),
            "title": row.get("product_title"),
            "description": row.get("product_description"),
            "bullet_points": bullets.splitlines() if isinstance(bullets, str) else bullets,
            "brand": row.get("product_brand"),
            "color": row.get("product_color"),
            "category_path": [],
            "locale": row.get("product_locale"),
        }
    )
    record["aspects"] = {name: [record[name]] for name in ("brand", "color") if record[name]}
    return record


def esci_grade(label: Any, record_id: str | None) -> int:
    if not isinstance(label, str) or label not in ESCI_GRADES:
        raise InvalidRecord("judgment", record_id, f"'esci_label' must be one of E, S, C, I, got {label!r}")
    return ESCI_GRADES[label]


class _EsciScope:
    """Row filters and repeat detection for one load; converters raise `Skip` or `InvalidRecord`."""

    def __init__(self, config: EsciConfig) -> None:
        self.config = config
        self.flag = f"{config.version}_version"
        self.queries: dict[str, tuple[str, str]] = {}
        self.unique_pairs = FirstWins.of("judgments")
        self.unique_products = FirstWins.of("products")
        self.judged: set[str] = set()

    def check_example(self, row: Mapping[str, Any]) -> None:
        locale = row.get("product_locale")
        if locale is None:
            raise InvalidRecord("example", _text(row.get("example_id")), "'product_locale' is missing")
        if locale != self.config.locale:
            raise Skip(f"product_locale is not {self.config.locale!r}")
        flag = row.get(self.flag)
        if flag not in (0, 1):  # bools compare equal to 0/1, so True/False pass too
            raise InvalidRecord(
                "example", _text(row.get("example_id")), f"'{self.flag}' must be 0 or 1, got {flag!r}"
            )
        if flag != 1:
            raise Skip(f"not in the {self.config.version} version")

    def judgment(self, row: Mapping[str, Any]) -> Record:
        self.check_example(row)
        qid, pid = row.get("query_id"), row.get("product_id")
        label = row.get("esci_label")
        record = validate_judgment(
            {"query_id": qid, "product_id": pid, "grade": esci_grade(label, f"{qid}/{pid}"), "label": label}
        )
        self.unique_pairs(record)
        self.judged.add(record["product_id"])
        return record

    def query(self, row: Mapping[str, Any]) -> Record:
        self.check_example(row)
        source_split = row.get("split")
        if source_split not in ("train", "test"):
            raise InvalidRecord(
                "query", _text(row.get("query_id")), f"'split' must be train or test, got {source_split!r}"
            )
        record = validate_query({"query_id": row.get("query_id"), "text": row.get("query"), "split": "test"})
        qid = record["query_id"]
        record["split"] = "test" if source_split == "test" else self.config.valid_split.assign(qid)
        first = self.queries.get(qid)
        if first is None:
            self.queries[qid] = (record["text"], source_split)
            return record
        if first != (record["text"], source_split):
            raise InvalidRecord(
                "query",
                qid,
                f"(text, split) {(record['text'], source_split)} differs from an earlier row's {first}",
            )
        raise Skip("repeat of a query already emitted")

    def product(self, row: Mapping[str, Any]) -> Record:
        locale = row.get("product_locale")
        if locale is not None and locale != self.config.locale:
            raise Skip(f"product_locale is not {self.config.locale!r}")
        record = esci_product(row)
        if record["locale"] is None:
            raise InvalidRecord("product", record["product_id"], "'product_locale' is missing")
        if self.config.catalog == "judged" and record["product_id"] not in self.judged:
            raise Skip(f"not judged in the {self.config.version} version")
        return self.unique_products(record)


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def load_esci(
    products_path: str | Path, examples_path: str | Path, config: EsciConfig | None = None
) -> IngestResult:
    """Load one locale and version of ESCI; examples first, so ``catalog="judged"`` knows what was judged.

    An examples row feeds two streams (its query and its judgment), so a row bad for both yields
    one dead letter per stream. Judgments of rejected queries or products are dead-lettered last.
    """
    config = config or EsciConfig()
    scope = _EsciScope(config)
    tallies = {
        stream: StreamTally(f"ingest.esci.{stream}") for stream in ("products", "queries", "judgments")
    }
    records: dict[str, list[Record]] = {stream: [] for stream in tallies}
    for row in read_parquet(
        examples_path, EXAMPLE_COLUMNS, required=EXAMPLE_COLUMNS, batch_size=config.batch_size
    ):
        for stream, convert in (("judgments", scope.judgment), ("queries", scope.query)):
            record = tallies[stream].attempt(row, convert)
            if record is not None:
                records[stream].append(record)
    products = read_parquet(
        products_path, PRODUCT_COLUMNS, required=PRODUCT_COLUMNS, batch_size=config.batch_size
    )
    records["products"] = list(tallies["products"].route(products, scope.product))
    result = build_result(
        "esci",
        tallies,
        records,
        positive_min_grade=ESCI_POSITIVE_MIN_GRADE,
        gain_map=dict(ESCI_FLOAT_GAINS) if config.gains == "esci_float" else None,
        provenance={
            "products_path": str(products_path),
            "examples_path": str(examples_path),
            "config": asdict(config),
            "grades": dict(ESCI_GRADES),
            "valid_split": config.valid_split.describe(),
        },
    )
    return drop_dangling_judgments(result)
