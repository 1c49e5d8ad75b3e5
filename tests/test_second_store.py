"""The second store fixture: a generated Swiss shop's Shopify export with the power for significance tests.

examples/second_store/make_export.py writes it from a seed (stdlib only, nothing generated is committed):
>= 2,000 products as Shopify variant rows in German, French and English, a 4-level category tree with
few products per leaf, near-duplicates, and >= 200 queries with rule-decided graded judgments. These tests
check that the script is deterministic, that the export has what makes it a useful fixture, and that
`madr ingest folder` takes it whole.
"""

from __future__ import annotations

import csv
import itertools
import json
import statistics
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from jobs.cli import main

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "examples" / "second_store" / "make_export.py"
FILES = ("products.csv", "queries.csv", "judgments.csv", "mapping.json", "summary.json")


def _generate(output: Path, seed: int = 7) -> None:
    # As a user runs it: a script beside its vocabulary modules, not an importable package.
    subprocess.run(
        [sys.executable, str(SCRIPT), "--output", str(output), "--seed", str(seed)],
        check=True,
        capture_output=True,
    )


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


@pytest.fixture(scope="module")
def export(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("second_store")
    _generate(folder)
    return folder


def test_the_script_writes_the_same_bytes_for_a_seed(export: Path, tmp_path: Path) -> None:
    _generate(tmp_path / "again")
    for name in FILES:
        assert (export / name).read_bytes() == (tmp_path / "again" / name).read_bytes(), name
    _generate(tmp_path / "other", seed=8)
    assert (tmp_path / "other" / "products.csv").read_bytes() != (export / "products.csv").read_bytes()


def test_the_catalog_is_large_multilingual_deep_and_foreign(export: Path) -> None:
    products = _rows(export / "products.csv")
    assert len(products) >= 2000
    assert len({row["Variant SKU"] for row in products}) == len(products)
    languages = Counter(row["Language (product.metafields.custom.language)"] for row in products)
    assert len(languages) >= 2 and min(languages.values()) >= 200, languages
    paths = [row["Product Category"].split(" > ") for row in products]
    assert min(len(path) for path in paths) >= 4
    assert all(path[-1] == row["Type"] for path, row in zip(paths, products, strict=True))
    per_leaf = Counter(row["Type"] for row in products)
    assert len(per_leaf) >= 60 and statistics.median(per_leaf.values()) <= 30, per_leaf
    assert sum(5 <= count <= 30 for count in per_leaf.values()) >= len(per_leaf) / 2
    # Shopify's placeholder for a product without variants, and HTML bodies.
    assert sum(row["Option1 Value"] == "Default Title" for row in products) >= 100
    assert all(row["Body (HTML)"].startswith("<p>") for row in products)
    # Brands the demo never saw: none of the hand-written store export's.
    store = ROOT / "examples" / "store_export" / "products.jsonl"
    seen = {json.loads(line)["manufacturer"] for line in store.read_text(encoding="utf-8").splitlines()}
    assert not seen & {row["Vendor"] for row in products}


def _words(title: str) -> set[str]:
    return {word.strip(",–-:|()").lower() for word in title.split()} - {"", "–", "-"}


def test_the_catalog_has_near_duplicates(export: Path) -> None:
    products = _rows(export / "products.csv")
    # Variant rows of one handle: the same title, another colour or size.
    titles = defaultdict(set)
    for row in products:
        titles[row["Handle"]].add((row["Title"], row["Option1 Value"], row["Option2 Value"]))
    assert (
        sum(len(variants) > 1 and len({t for t, _, _ in variants}) == 1 for variants in titles.values())
        >= 100
    )
    # Listings of one model under slightly different titles (another colour, size, pack, a re-listing).
    by_type = defaultdict(dict)
    for row in products:
        by_type[(row["Vendor"], row["Type"])][row["Handle"]] = _words(row["Title"])
    close = 0
    for handles in by_type.values():
        for first, second in itertools.combinations(handles.values(), 2):
            close += first != second and len(first & second) / len(first | second) >= 0.6
    assert close >= 100


def test_every_query_has_relevant_products_and_hard_negatives(export: Path) -> None:
    queries = _rows(export / "queries.csv")
    judgments = _rows(export / "judgments.csv")
    assert len(queries) >= 200
    assert len(Counter(row["Language"] for row in queries)) >= 2
    assert {"de", "fr", "en"} <= {row["Language"] for row in queries}
    grades = defaultdict(list)
    for row in judgments:
        grades[row["Search ID"]].append(int(row["Grade"]))
    assert set(grades) == {row["Search ID"] for row in queries}
    for query_id, judged in grades.items():
        assert sum(grade >= 2 for grade in judged) >= 2, query_id
        assert 8 <= len(judged) <= 15 and min(judged) <= 1, query_id
    assert {int(row["Grade"]) for row in judgments} == {0, 1, 2, 3}
    kinds = Counter(row["Query kind"].split("+")[0] for row in queries)
    assert {"brand", "feature", "size", "need", "model", "colour"} <= set(kinds)
    assert sum(row["Query kind"].endswith("+typo") for row in queries) >= 10
    # Queries are not titles: no query is a product's title.
    titles = {row["Title"].lower() for row in _rows(export / "products.csv")}
    assert not titles & {row["Search term"].lower() for row in queries}


def test_madr_ingest_folder_takes_it_whole(export: Path, tmp_path: Path) -> None:
    out = tmp_path / "dataset"
    assert main(["ingest", "folder", str(export), "--output", str(out)]) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    for stream, counts in manifest["counts"].items():
        assert counts["rejected"] == 0 and counts["rows_in"] == counts["records_out"], (stream, counts)
    assert (out / "dead_letters.jsonl").read_text() == ""
    products = _rows(export / "products.csv")
    assert manifest["rows"]["products"] == len(products)
    # Evaluation scores the test split: without a split column every query is in it.
    assert manifest["query_splits"] == {"test": len(_rows(export / "queries.csv"))}
    # "Default Title" is read as a missing colour, not as a colour.
    placeholders = manifest["counts"]["products"]["placeholders_read_as_missing"]
    assert placeholders["color"] == sum(row["Option1 Value"] == "Default Title" for row in products)
    records = pq.read_table(sorted((out / "products").glob("*.parquet"))).to_pylist()
    for record in records[:500]:
        assert dict(record["aspects"])["category"] == [record["category_path"][-1]]
        assert len(record["category_path"]) >= 4 and "<" not in (record["description"] or "")
    assert {record["locale"] for record in records} == {"de-CH", "fr-CH", "en"}
