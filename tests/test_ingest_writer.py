"""write_dataset: the on-disk layout later stages read, with dead letters and a manifest."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from product_data.ingest import DATASET_KIND, EsciConfig, load_esci, load_wands, write_dataset
from schemas import DEAD_LETTER_SCHEMA, JUDGMENT_SCHEMA, PRODUCT_SCHEMA, QUERY_SCHEMA
from schemas.manifest import ArtifactError, verify_manifest, write_manifest

FIXTURES = Path(__file__).parent / "fixtures" / "ingest"
WANDS = FIXTURES / "wands"
ESCI = FIXTURES / "esci"


def _wands():
    return load_wands(WANDS / "query.csv", WANDS / "product.csv", WANDS / "label.csv")


def test_layout_schemas_and_manifest(tmp_path: Path) -> None:
    result = _wands()
    out = tmp_path / "wands"
    write_dataset(result, out, rows_per_shard=2)
    shards = sorted(p.name for p in (out / "products").iterdir())
    assert shards == [f"products-0000{i}-of-00003.parquet" for i in range(3)]
    products = [row for shard in shards for row in pq.read_table(out / "products" / shard).to_pylist()]
    assert pq.read_schema(out / "products" / shards[0]).remove_metadata() == PRODUCT_SCHEMA
    assert [p["product_id"] for p in products] == [p["product_id"] for p in result.products]
    assert dict(products[2]["aspects"]) == result.products[2]["aspects"]  # Arrow maps read back as pairs
    queries = pq.read_table(out / "queries.parquet")
    judgments = pq.read_table(out / "judgments.parquet")
    assert queries.schema.remove_metadata() == QUERY_SCHEMA
    assert judgments.schema.remove_metadata() == JUDGMENT_SCHEMA
    assert judgments.to_pylist() == list(result.judgments)
    letters = [
        json.loads(line) for line in (out / "dead_letters.jsonl").read_text(encoding="utf-8").splitlines()
    ]
    assert len(letters) == len(result.dead_letters) == 12
    assert all(list(letter) == DEAD_LETTER_SCHEMA.names for letter in letters)
    assert json.loads(letters[0]["record_json"]) == dict(result.dead_letters[0].raw)

    manifest = verify_manifest(out, DATASET_KIND)  # every file listed with its sha256
    assert manifest["source"] == "wands"
    assert manifest["streams"] == ["products", "queries", "judgments"]
    assert manifest["counts"]["products"] == {"rows_in": 9, "records_out": 5, "rejected": 4, "skipped": {}}
    assert manifest["rows"] == {"products": 5, "queries": 5, "judgments": 5, "dead_letters": 12}
    assert manifest["positive_min_grade"] == 2 and manifest["gain_map"] is None
    assert sum(manifest["query_splits"].values()) == 5
    assert "products/products-00002-of-00003.parquet" in manifest["files"]


def test_float_gains_reach_the_manifest(tmp_path: Path) -> None:
    result = load_esci(
        ESCI / "shopping_queries_dataset_products.parquet",
        ESCI / "shopping_queries_dataset_examples.parquet",
        EsciConfig(gains="esci_float"),
    )
    manifest = json.loads(write_dataset(result, tmp_path / "esci").read_text())
    assert manifest["gain_map"] == {"0": 0.0, "1": 0.01, "2": 0.1, "3": 1.0}
    assert manifest["positive_min_grade"] == 3
    assert manifest["provenance"]["config"]["locale"] == "us"


def test_streams_not_loaded_are_written_empty(tmp_path: Path) -> None:
    write_dataset(load_wands(WANDS / "query.csv"), tmp_path / "q")
    assert [p.name for p in (tmp_path / "q" / "products").iterdir()] == ["products-00000-of-00001.parquet"]
    assert pq.read_table(tmp_path / "q" / "products" / "products-00000-of-00001.parquet").num_rows == 0
    manifest = verify_manifest(tmp_path / "q", DATASET_KIND)
    assert manifest["streams"] == ["queries"] and set(manifest["counts"]) == {"queries"}


def test_refuses_to_overwrite_by_accident(tmp_path: Path) -> None:
    out = tmp_path / "ds"
    write_dataset(_wands(), out)
    with pytest.raises(FileExistsError, match="overwrite=True"):
        write_dataset(_wands(), out)
    write_dataset(load_wands(WANDS / "query.csv"), out, overwrite=True)
    assert verify_manifest(out, DATASET_KIND)["streams"] == ["queries"]

    stranger = tmp_path / "notes"
    stranger.mkdir()
    (stranger / "todo.txt").write_text("keep me")
    with pytest.raises(FileExistsError, match="no dataset manifest"):
        write_dataset(_wands(), stranger, overwrite=True)
    model = tmp_path / "model"
    model.mkdir()
    (model / "weights.bin").write_bytes(b"\0")
    write_manifest(model, "model", {})
    with pytest.raises(ArtifactError, match="model"):
        write_dataset(_wands(), model, overwrite=True)
    assert (model / "weights.bin").exists() and (stranger / "todo.txt").exists()
