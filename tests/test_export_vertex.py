"""Vertex AI Vector Search export: JSON records with aspect restricts, on a real Beam runner."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import apache_beam as beam
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from jobs.cli import parse_command
from pipelines.embed.export import (
    ExportVertexConfig,
    ExportVertexJsonl,
    export_vertex,
    vertex_record,
    vertex_restricts,
)
from pipelines.settings.options import ExportSettings, PredictionThreshold
from pipelines.settings.stage_config import config_from_values
from pipelines.storage.stage_manifests import write_stage_manifest
from schemas import EMBEDDING_ANNOTATION_COLUMNS, PRODUCT_SCHEMA, embedding_schema
from tests.test_file_isolation import random_bytes, without_product_id

DIM = 4


def product(pid: str, aspects: dict[str, list[str]] | None) -> dict:
    return {
        "product_id": pid,
        "title": f"title {pid}",
        "description": None,
        "bullet_points": [],
        "brand": None,
        "color": None,
        "category_path": [],
        "aspects": aspects,
        "locale": "us",
    }


PRODUCTS = [
    product("p-full", {"category": ["Socks", "Clothing"], "brand": ["Nike"], "color": ["navy"]}),
    product("p-brand", {"brand": ["Adidas", "Adidas"], "color": []}),  # repeats and empty values dropped
    product("p-none", None),
    product("p-empty", {}),
    product("p-other", {"size": ["XL"]}),  # not an exported aspect
    product("p-unicode", {"brand": ['Café "Noir"']}),
    product("p-not-embedded", {"brand": ["Puma"]}),
]
EXPECTED_RESTRICTS = {
    "p-full": [
        {"namespace": "category", "allow": ["Socks", "Clothing"]},
        {"namespace": "brand", "allow": ["Nike"]},
        {"namespace": "color", "allow": ["navy"]},
    ],
    "p-brand": [{"namespace": "brand", "allow": ["Adidas"]}],
    "p-unicode": [{"namespace": "brand", "allow": ['Café "Noir"']}],
    "p-orphan": None,  # embedded, but not in the catalog: exported without restricts
}
EMBEDDED = ["p-full", "p-brand", "p-none", "p-empty", "p-other", "p-unicode", "p-orphan"]
# What `madr embed` wrote beside some vectors: (value, confidence) per aspect.
PREDICTIONS = {
    "p-brand": {"brand": ("Reebok", 0.9), "color": ("red", 0.8)},  # catalog brand wins; color fills
    "p-none": {"category": ("Shoes", 0.4), "brand": ("Nike", 0.95)},  # category below 0.5: left empty
    "p-orphan": {"color": ("blue", 0.7)},
}


@pytest.fixture(scope="module")
def vectors() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(11)
    matrix = rng.normal(size=(len(EMBEDDED), DIM)).astype(np.float32)
    return dict(zip(EMBEDDED, matrix / np.linalg.norm(matrix, axis=1, keepdims=True), strict=True))


@pytest.fixture(scope="module")
def inputs(vectors: dict[str, np.ndarray], tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    root = tmp_path_factory.mktemp("vertex-inputs")
    pq.write_table(pa.Table.from_pylist(PRODUCTS, schema=PRODUCT_SCHEMA), root / "products.parquet")
    embeddings = root / "embeddings"
    embeddings.mkdir()
    rows = [
        {
            "product_id": pid,
            "embedding": vectors[pid].tolist(),
            "model_id": "m",
            "model_version": "1",
            "content_hash": "0" * 64,
            **dict.fromkeys(EMBEDDING_ANNOTATION_COLUMNS),
            "aspect_values": {a: v for a, (v, _) in PREDICTIONS[pid].items()} if pid in PREDICTIONS else None,
            "aspect_confidences": {a: c for a, (_, c) in PREDICTIONS[pid].items()}
            if pid in PREDICTIONS
            else None,
        }
        for pid in EMBEDDED
    ]
    pq.write_table(
        pa.Table.from_pylist(rows, schema=embedding_schema(DIM)),
        embeddings / "embeddings-00000-of-00001.parquet",
    )
    info = {
        "model_id": "m",
        "model_version": "1",
        "dimension": DIM,
        "counts": {"products_embedded": len(rows)},
    }
    write_stage_manifest(str(embeddings), kind="madr-embeddings", info=info)
    return str(root / "products.parquet"), str(embeddings)


def export(inputs: tuple[str, str], output: Path, *extra: str) -> dict[str, int]:
    products, embeddings = inputs
    flags = ["--products", products, "--embeddings", embeddings, "--output", str(output), *extra]
    return export_vertex(*parse_command("export-vertex", flags))


def test_one_line_per_embedded_product_with_its_restricts(inputs, vectors, tmp_path: Path) -> None:
    output = tmp_path / "vertex"
    counts = export(inputs, output, "--vertex_num_files", "2")
    files = sorted(output.iterdir())
    # Only the data files, directly under the batch root: no Beam temp folder, no manifest, no staging.
    assert [f.name for f in files] == ["vectors-00000-of-00002.json", "vectors-00001-of-00002.json"]
    assert all(f.is_file() for f in files)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["vertex"]
    records = [json.loads(line) for f in files for line in f.read_text(encoding="utf-8").splitlines()]
    assert sorted(r["id"] for r in records) == sorted(EMBEDDED)
    for record in records:
        assert set(record) <= {"id", "embedding", "restricts"}
        assert np.array_equal(np.asarray(record["embedding"], np.float32), vectors[record["id"]])
        assert record.get("restricts") == EXPECTED_RESTRICTS.get(record["id"]), record["id"]
    assert counts == {
        "vertex_records_written": 7,
        "vertex_records_with_restricts": 3,
        "vertex_embeddings_without_product": 1,
        "vertex_products_without_embedding": 1,
        "vertex_products_rejected": 0,
        "vertex_restricts_from_catalog": 5,
        "vertex_restricts_from_predictions": 0,
        "vertex_restricts_withheld": 0,
        "vertex_files": 2,
    }


def test_refuses_a_non_empty_target_and_bad_flags(inputs, tmp_path: Path) -> None:
    output = tmp_path / "vertex"
    output.mkdir()
    (output / "old.json").write_text("{}\n")
    with pytest.raises(FileExistsError, match="not empty"):
        export(inputs, output)
    with pytest.raises(ValueError, match="5000"):
        export(inputs, tmp_path / "new", "--vertex_num_files", "5001")
    with pytest.raises(ValueError, match="snake_case"):
        export(inputs, tmp_path / "new", "--vertex_aspects", "Brand")
    with pytest.raises(ValueError, match=r"missing required flag\(s\): --products, --embeddings"):
        config_from_values(ExportVertexConfig, {"output": str(tmp_path / "new")})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["vertex"]  # nothing staged was left behind


def test_restricts_and_record_helpers() -> None:
    aspects = {"brand": ["Nike", "", "Nike"], "color": [], "category": ["Socks"]}
    assert vertex_restricts(aspects, ["color", "brand", "category"]) == [
        {"namespace": "brand", "allow": ["Nike"]},
        {"namespace": "category", "allow": ["Socks"]},
    ]
    assert vertex_restricts({}, ["brand"]) == []
    line = vertex_record('a"b', np.array([0.1, -2.5e-8], np.float32), [])
    assert line == '{"id": "a\\"b", "embedding": [0.1, -2.5e-08]}' and json.loads(line)["id"] == 'a"b'
    with pytest.raises(ValueError, match="finite"):
        vertex_record("x", [float("nan")], [])


def test_transform_joins_by_product_id(local_runner) -> None:
    products = [{"product_id": "a", "aspects": [("brand", ["Nike"])]}, {"product_id": "b", "aspects": None}]
    embeddings = [{"product_id": "a", "embedding": [1.0, 0.0]}, {"product_id": "b", "embedding": [0.0, 1.0]}]
    with TestPipeline(runner=local_runner) as pipeline:
        lines = {
            "products": pipeline | "P" >> beam.Create(products),
            "embeddings": pipeline | "E" >> beam.Create(embeddings),
        } | ExportVertexJsonl(["brand"], dimension=2)
        assert_that(
            lines,
            equal_to(
                [
                    '{"id": "a", "embedding": [1.0, 0.0], '
                    '"restricts": [{"namespace": "brand", "allow": ["Nike"]}]}',
                    '{"id": "b", "embedding": [0.0, 1.0]}',
                ]
            ),
        )


def test_duplicate_embedding_ids_fail_the_export(local_runner) -> None:
    rows = [{"product_id": "a", "embedding": [1.0, 0.0]}, {"product_id": "a", "embedding": [0.0, 1.0]}]
    with pytest.raises(Exception, match="ids must be unique"), TestPipeline(runner=local_runner) as pipeline:
        _ = {
            "products": pipeline | "P" >> beam.Create([]),
            "embeddings": pipeline | "E" >> beam.Create(rows),
        } | ExportVertexJsonl(["brand"])


@pytest.mark.parametrize(
    ("source", "expected", "from_catalog", "from_predictions"),
    [
        (
            "both",
            {
                "p-brand": [
                    {"namespace": "brand", "allow": ["Adidas"]},
                    {"namespace": "color", "allow": ["red"]},
                ],
                "p-none": [{"namespace": "brand", "allow": ["Nike"]}],
                "p-orphan": [{"namespace": "color", "allow": ["blue"]}],
            },
            5,
            3,
        ),
        (
            "predicted",
            {
                "p-full": None,
                "p-brand": [
                    {"namespace": "brand", "allow": ["Reebok"]},
                    {"namespace": "color", "allow": ["red"]},
                ],
                "p-none": [{"namespace": "brand", "allow": ["Nike"]}],
                "p-unicode": None,
                "p-orphan": [{"namespace": "color", "allow": ["blue"]}],
            },
            0,
            4,
        ),
    ],
)
def test_predicted_restricts_fill_gaps_at_min_confidence(
    inputs, tmp_path: Path, source: str, expected: dict, from_catalog: int, from_predictions: int
) -> None:
    output = tmp_path / "vertex"
    counts = export(inputs, output, "--restricts", source, "--min_confidence", "0.5")
    records = {
        r["id"]: r.get("restricts")
        for f in sorted(output.iterdir())
        for r in map(json.loads, f.read_text(encoding="utf-8").splitlines())
    }
    for pid, restricts in {**EXPECTED_RESTRICTS, **expected}.items():
        assert records[pid] == restricts, pid
    assert counts["vertex_restricts_from_catalog"] == from_catalog
    assert counts["vertex_restricts_from_predictions"] == from_predictions


def test_broken_catalog_files_never_stop_the_export(
    inputs, vectors, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 13 item 4: an unreadable catalog file or one without product_id is counted and logged
    by name (Vertex's folder holds only data files), and the good file's products are all exported."""
    products, embeddings = inputs
    catalog = tmp_path / "catalog"
    catalog.mkdir()
    shutil.copy(products, catalog / "a-good.parquet")
    random_bytes(catalog / "b-random.parquet")
    without_product_id(catalog / "c-no-id.parquet")
    output = tmp_path / "vertex"
    with caplog.at_level(logging.WARNING, logger="pipelines.embed.export"):
        counts = export((str(catalog / "*.parquet"), embeddings), output)
    assert [f.name for f in output.iterdir()] == ["vectors-00000-of-00001.json"]
    records = [json.loads(line) for line in (output / "vectors-00000-of-00001.json").read_text().splitlines()]
    assert sorted(r["id"] for r in records) == sorted(EMBEDDED)
    for record in records:
        assert record.get("restricts") == EXPECTED_RESTRICTS.get(record["id"]), record["id"]
    assert counts["vertex_products_rejected"] == 2  # one per unreadable file
    assert counts["vertex_records_written"] == 7 and counts["vertex_products_without_embedding"] == 1
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(str(catalog / "b-random.parquet") in w and "cannot be read as Parquet" in w for w in warnings)
    assert any(str(catalog / "c-no-id.parquet") in w and "'product_id'" in w for w in warnings)


def test_predicted_restricts_of_an_aspect_that_contradicts_the_catalog_are_withheld(tmp_path: Path) -> None:
    """As in enrich: the model says "adidas" wherever the catalog says "nike", so its brand guesses do not
    fill the gaps (counted), while colour, which the catalog never gives, is filled."""
    from tests.test_enrich import _catalog

    products, embeddings, _ = _catalog(tmp_path, 60)
    aspects = ("category", "brand", "color")
    config = ExportVertexConfig(
        products=products,
        embeddings=embeddings,
        output=str(tmp_path / "vertex"),
        export=ExportSettings(vertex_aspects=aspects, restricts="both"),
        threshold=PredictionThreshold(min_confidence=0.0),
    )
    counts = export_vertex(config)
    assert counts["vertex_restricts_withheld"] == 30
    records = [
        json.loads(line) for f in (tmp_path / "vertex").iterdir() for line in f.read_text().splitlines()
    ]
    brands = [r for rec in records for r in rec.get("restricts") or [] if r["namespace"] == "brand"]
    assert len(brands) == 30 and all(r["allow"] == ["nike"] for r in brands)
    colours = [r for rec in records for r in rec.get("restricts") or [] if r["namespace"] == "color"]
    assert len(colours) == 60


def test_min_agreement_reaches_the_export(tmp_path: Path) -> None:
    """`--min_agreement` is export-vertex's too (it was parsed and then ignored: the transform used its own
    default): at 0 the contradicting brand predictions fill the gaps they were withheld from above."""
    from tests.test_enrich import _catalog

    products, embeddings, _ = _catalog(tmp_path, 60)
    config = ExportVertexConfig(
        products=products,
        embeddings=embeddings,
        output=str(tmp_path / "vertex"),
        export=ExportSettings(vertex_aspects=("category", "brand", "color"), restricts="both"),
        threshold=PredictionThreshold(min_confidence=0.0, min_agreement=0.0),
    )
    counts = export_vertex(config)
    assert counts["vertex_restricts_withheld"] == 0
    records = [
        json.loads(line) for f in (tmp_path / "vertex").iterdir() for line in f.read_text().splitlines()
    ]
    brands = [r["allow"] for rec in records for r in rec.get("restricts") or [] if r["namespace"] == "brand"]
    assert len(brands) == 60 and ["adidas"] in brands
