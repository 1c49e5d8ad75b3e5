"""`madr ingest` writes dataset folders the other commands read."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from jobs.cli import main
from pipelines.layout import DatasetLayout

REAL_WANDS_QUERIES = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "wands" / "query.csv"


@pytest.mark.skipif(
    not REAL_WANDS_QUERIES.is_file(), reason="../shared/data/wands/query.csv is not beside the repo"
)
def test_ingest_the_real_wands_queries(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    main(["ingest", "wands", "--queries", str(REAL_WANDS_QUERIES), "--out", str(tmp_path / "wands")])
    queries = pq.read_table(DatasetLayout(str(tmp_path / "wands")).queries).to_pylist()
    assert len(queries) == 480
    assert {q["split"] for q in queries} == {"train", "valid", "test"}
    assert json.loads(capsys.readouterr().out.split("\ndataset written")[0])["queries"]["rows_in"] == 480


def test_ingest_generic_files_with_a_mapping(tmp_path: Path) -> None:
    (tmp_path / "catalog.jsonl").write_text(
        "\n".join(
            json.dumps(row)
            for row in [
                {"sku": "S1", "name": "Oak side table", "maker": "Woodly", "crumbs": "Home > Tables"},
                {"sku": "S2", "name": "", "maker": "Lumo", "crumbs": "Home > Lighting"},
            ]
        )
    )
    mapping = {
        "fields": {"product_id": "sku", "title": "name", "brand": "maker", "category_path": "crumbs"},
        "aspects": {"brand": "maker"},
        "separators": {"category_path": " > "},
    }
    (tmp_path / "mapping.json").write_text(json.dumps(mapping))
    out = tmp_path / "shop"
    main(
        [
            "ingest",
            "generic",
            "--products",
            str(tmp_path / "catalog.jsonl"),
            "--mapping",
            str(tmp_path / "mapping.json"),
            "--out",
            str(out),
        ]
    )
    products = pq.read_table(str(out / "products")).to_pylist()
    assert [(p["product_id"], p["category_path"], dict(p["aspects"])) for p in products] == [
        ("S1", ["Home", "Tables"], {"brand": ["Woodly"]})
    ]
    letters = (out / "dead_letters.jsonl").read_text().splitlines()
    assert len(letters) == 1 and "'title' is missing" in json.loads(letters[0])["reason"]
