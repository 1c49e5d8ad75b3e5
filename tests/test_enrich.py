"""`madr enrich`: the catalog's aspect gaps filled by sure predictions, with provenance, on a real runner."""

from __future__ import annotations

import json
from pathlib import Path

import apache_beam as beam
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from jobs.cli import main
from pipelines.embed.enrich import EnrichConfig, FillAspectGaps, enrich_catalog, format_counts
from pipelines.embed.gap_fill import FilledAspect, fill_aspects
from pipelines.io.catalog_io import DEAD_LETTERS
from pipelines.settings.options import PredictionThreshold
from pipelines.storage.stage_manifests import write_stage_manifest
from schemas import EMBEDDING_ANNOTATION_COLUMNS, ENRICHED_PRODUCT_SCHEMA, PRODUCT_SCHEMA, embedding_schema
from tests.test_file_isolation import random_bytes, without_product_id

ASPECTS = ("category", "brand", "color")


def test_catalog_values_are_never_overwritten() -> None:
    filled = fill_aspects({"brand": ["Nike"]}, {"brand": "Adidas"}, {"brand": 0.99}, ASPECTS, 0.5)
    assert filled == {"brand": FilledAspect(("Nike",), "catalog")}


def test_a_prediction_fills_a_gap_only_at_or_above_min_confidence() -> None:
    predicted = {"category": "socks", "brand": "nike", "color": "red"}
    confidences = {"category": 0.5, "brand": 0.49999, "color": 0.9}
    filled = fill_aspects({}, predicted, confidences, ASPECTS, 0.5)
    assert filled == {
        "category": FilledAspect(("socks",), "predicted", 0.5),
        "color": FilledAspect(("red",), "predicted", 0.9),
    }


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("catalog", {"brand": FilledAspect(("Nike",), "catalog")}),
        (
            "predicted",
            {
                "brand": FilledAspect(("adidas",), "predicted", 0.8),
                "color": FilledAspect(("red",), "predicted", 0.7),
            },
        ),
        (
            "both",
            {"brand": FilledAspect(("Nike",), "catalog"), "color": FilledAspect(("red",), "predicted", 0.7)},
        ),
    ],
)
def test_sources(source: str, expected: dict) -> None:
    predicted, confidences = {"brand": "adidas", "color": "red"}, {"brand": 0.8, "color": 0.7}
    assert fill_aspects({"brand": ["Nike"]}, predicted, confidences, ASPECTS, 0.5, source) == expected


def test_unknown_source_is_refused() -> None:
    with pytest.raises(ValueError, match="source must be one of"):
        fill_aspects({}, {}, {}, ASPECTS, 0.5, "guess")


def test_fill_transform_on_a_real_runner_dead_letters_bad_rows() -> None:
    products = [
        {"product_id": "p1", "aspects": [("brand", ["Nike"])]},
        {"product_id": "p2", "aspects": None},
        {"product_id": "", "aspects": None},  # no id: a dead letter, not a crash
    ]
    predictions = [
        {"product_id": "p1", "aspect_values": [("color", "red")], "aspect_confidences": [("color", 0.9)]},
        {"product_id": "p2", "aspect_values": [("brand", "puma")], "aspect_confidences": [("brand", 0.3)]},
    ]
    with TestPipeline() as pipeline:
        out = {
            "products": pipeline | "P" >> beam.Create(products),
            "predictions": pipeline | "E" >> beam.Create(predictions),
        } | FillAspectGaps(ASPECTS, PredictionThreshold(0.5))
        expected = [
            {
                "product_id": "p1",
                "aspects": [
                    {"aspect": "brand", "values": ["Nike"], "provenance": "catalog", "confidence": None},
                    {"aspect": "color", "values": ["red"], "provenance": "predicted", "confidence": 0.9},
                ],
            },
            {"product_id": "p2", "aspects": []},
        ]
        assert_that(out["rows"], equal_to(expected), label="rows")
        reasons = out[DEAD_LETTERS] | beam.Map(lambda d: "product_id" in d["reason"])
        assert_that(reasons, equal_to([True]), label="dead")


def _catalog(root: Path, count: int) -> tuple[str, str, dict]:
    rng = np.random.default_rng(5)
    rows, embedded, truth = [], [], {}
    for i in range(count):
        pid = f"p{i:03d}"
        aspects = {"category": ["socks"]} if i % 2 else {"category": ["shoes"], "brand": ["nike"]}
        rows.append({"product_id": pid, "title": f"t {pid}", "aspects": aspects})
        confidence = float(rng.uniform())
        truth[pid] = confidence
        embedded.append(
            {
                "product_id": pid,
                "embedding": [1.0, 0.0],
                "model_id": "m",
                "model_version": "1",
                "content_hash": "0" * 64,
                **dict.fromkeys(EMBEDDING_ANNOTATION_COLUMNS),
                "aspect_values": {"brand": "adidas", "color": "red"},
                "aspect_confidences": {"brand": confidence, "color": confidence},
            }
        )
    # A row whose aspects are of the wrong type, in a file of its own (Parquet holds one type per column).
    bad = pa.table(
        {
            "product_id": ["p-bad"],
            "title": ["x"],
            "aspects": pa.array([[("brand", [7])]], pa.map_(pa.string(), pa.list_(pa.int64()))),
        }
    )
    good = pa.Table.from_pylist(
        rows, schema=pa.schema([PRODUCT_SCHEMA.field(n) for n in ("product_id", "title", "aspects")])
    )
    (root / "catalog").mkdir()
    pq.write_table(good, root / "catalog" / "a.parquet")
    pq.write_table(bad, root / "catalog" / "b.parquet")
    embeddings = root / "embeddings"
    embeddings.mkdir()
    pq.write_table(
        pa.Table.from_pylist(embedded, schema=embedding_schema(2)), embeddings / "embeddings-0.parquet"
    )
    write_stage_manifest(
        str(embeddings), "madr-embeddings", {"model_id": "m", "model_version": "1", "dimension": 2}
    )
    return str(root / "catalog" / "*.parquet"), str(embeddings), truth


def _enrich(products: str, embeddings: str, output: Path, confidence: float, **threshold: float) -> dict:
    """`enrich_catalog` of the test's aspects at `confidence` (and any other threshold setting)."""
    config = EnrichConfig(
        products=products,
        embeddings=embeddings,
        output=str(output),
        aspects=ASPECTS,
        threshold=PredictionThreshold(min_confidence=confidence, **threshold),
    )
    return enrich_catalog(config)


def test_enrich_catalog_counts_reconcile_and_provenance_is_written(tmp_path: Path) -> None:
    products, embeddings, confidence = _catalog(tmp_path, 40)
    counts = _enrich(products, embeddings, tmp_path / "out", 0.6)
    sure = sum(c >= 0.6 for c in confidence.values())
    sure_without_brand = sum(c >= 0.6 for pid, c in confidence.items() if int(pid[1:]) % 2)
    assert counts["products_read"] == 41 and counts["embeddings_without_product"] == 0
    assert counts["products_dead_lettered"] == 1
    assert counts["enriched_products_written"] == 40
    assert (counts["category_from_catalog"], counts["category_predicted"], counts["category_empty"]) == (
        40,
        0,
        0,
    )
    assert counts["brand_from_catalog"] == 20
    assert counts["brand_predicted"] == sure_without_brand
    assert counts["color_predicted"] == sure
    assert counts["color_empty"] == 40 - sure
    table = pa.concat_tables(pq.read_table(f) for f in sorted((tmp_path / "out").glob("enriched-*.parquet")))
    assert table.schema.equals(ENRICHED_PRODUCT_SCHEMA, check_metadata=False)
    rows = {r["product_id"]: {a["aspect"]: a for a in r["aspects"]} for r in table.to_pylist()}
    assert rows["p000"]["brand"] == {
        "aspect": "brand",
        "values": ["nike"],
        "provenance": "catalog",
        "confidence": None,
    }
    for pid, c in confidence.items():
        color = rows[pid].get("color")
        assert (color is not None) == (c >= 0.6)
        if color:
            assert color["provenance"] == "predicted" and color["confidence"] == pytest.approx(c, abs=1e-6)
    dead = [
        json.loads(line)
        for f in (tmp_path / "out").glob("dead_letters*")
        for line in f.read_text().splitlines()
    ]
    assert [d["record_id"] for d in dead] == ["p-bad"]
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["kind"] == "madr-enriched-catalog" and manifest["counts"] == counts


def test_enrich_command_prints_the_counts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    products, embeddings, _ = _catalog(tmp_path, 6)
    assert (
        main(["enrich", "--products", products, "--embeddings", embeddings, "--output", str(tmp_path / "o")])
        == 0
    )
    printed = capsys.readouterr().out
    assert "products read 7, written 6, dead letters 1" in printed
    assert printed.splitlines()[-1].split()[0] == "color"


def _invalid_utf8_id(path: Path) -> None:
    """Two products, the second with a product_id that is not valid UTF-8 (written as binary, then
    relabelled string: neither Arrow nor its Parquet writer checks)."""
    ids = pa.array([b"p-utf8-ok", b"p-\xff\xfe"], pa.binary()).view(pa.string())
    aspects = pa.array([None, None], PRODUCT_SCHEMA.field("aspects").type)
    pq.write_table(pa.table({"product_id": ids, "aspects": aspects}), path)


def test_broken_catalog_files_are_dead_letters_naming_the_file(tmp_path: Path) -> None:
    """Issue 13 item 4: an unreadable file, a file without product_id and invalid UTF-8 never stop enrich."""
    products, embeddings, _ = _catalog(tmp_path, 40)
    folder = tmp_path / "catalog"
    random_bytes(folder / "c-random.parquet")
    without_product_id(folder / "d-no-id.parquet")  # 5 rows, known from the footer
    _invalid_utf8_id(folder / "e-utf8.parquet")
    counts = _enrich(products, embeddings, tmp_path / "out", 0.6)
    # Read: 40 good + p-bad + 5 rows without an id + 2 in e-utf8; the random file counts as a file only.
    assert counts["products_read"] == 48
    assert counts["enriched_products_written"] == 41  # all 40 of a.parquet, and p-utf8-ok
    assert counts["products_dead_lettered"] == 1 + 5 + 1
    assert counts["files_dead_lettered"] == 2
    rows = pa.concat_tables(pq.read_table(f) for f in (tmp_path / "out").glob("enriched-*.parquet"))
    assert sorted(rows.column("product_id").to_pylist()) == sorted(
        [f"p{i:03d}" for i in range(40)] + ["p-utf8-ok"]
    )
    dead = [
        json.loads(line)
        for f in (tmp_path / "out").glob("dead_letters*")
        for line in f.read_text().splitlines()
    ]
    reasons = [d["reason"] for d in dead]
    assert len(dead) == 4
    assert (
        sum(str(folder / "c-random.parquet") in r and "cannot be read as Parquet" in r for r in reasons) == 1
    )
    assert sum(str(folder / "d-no-id.parquet") in r and "'product_id'" in r for r in reasons) == 1
    assert sum(str(folder / "e-utf8.parquet") in r and "not valid UTF-8" in r for r in reasons) == 1
    assert [d["record_id"] for d in dead if d["record_id"]] == ["p-bad"]


def test_an_aspect_whose_predictions_contradict_the_catalog_is_not_filled(tmp_path: Path) -> None:
    """Every product with a catalog brand has "nike" and the model says "adidas": its brand guesses for
    the gaps are withheld, counted as such, while colour (which the catalog never gives) is filled."""
    products, embeddings, _ = _catalog(tmp_path, 60)
    counts = _enrich(products, embeddings, tmp_path / "out", 0.0)
    assert (counts["brand_checked"], counts["brand_agreed"]) == (30, 0)
    assert (counts["brand_from_catalog"], counts["brand_withheld"], counts["brand_predicted"]) == (30, 30, 0)
    assert counts["color_checked"] == 0 and counts["color_predicted"] == 60
    assert counts["color_withheld"] == counts["category_withheld"] == 0
    table = format_counts(counts, ASPECTS)
    assert "0/30 = 0.00" in table and "withheld" in table.splitlines()[1]
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["min_agreement"] == 0.8 and manifest["counts"]["brand_withheld"] == 30
    # A looser bar lets the same guesses through.
    loose = _enrich(products, embeddings, tmp_path / "loose", 0.0, min_agreement=0.0)
    assert (loose["brand_withheld"], loose["brand_predicted"]) == (0, 30)
