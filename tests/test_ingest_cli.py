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
    # The category aspect is the category path's leaf unless a column maps one.
    assert [(p["product_id"], p["category_path"], dict(p["aspects"])) for p in products] == [
        ("S1", ["Home", "Tables"], {"brand": ["Woodly"], "category": ["Tables"]})
    ]
    letters = (out / "dead_letters.jsonl").read_text().splitlines()
    assert len(letters) == 1 and "'title' is missing" in json.loads(letters[0])["reason"]


STORE_MAPPING = {
    "products": {
        "fields": {
            "product_id": "sku",
            "title": "name",
            "brand": "manufacturer",
            "category_path": "breadcrumbs",
            "description": "description_html",
            "bullet_points": "bullets",
        },
        "aspects": {"brand": "manufacturer"},
        "separators": {"category_path": " > "},
    },
    "queries": {"fields": {"query_id": "qid", "text": "query"}},
    "judgments": {"fields": {"query_id": "qid", "product_id": "sku", "grade": "relevance"}},
}
STORE_PRODUCTS = [
    {
        "sku": "KT-1",
        "name": "Wüsthof Classic Chef's Knife 20 cm",
        "manufacturer": "Wüsthof",
        "breadcrumbs": "Home & Kitchen > Knives > Chef's Knives",
        "description_html": "<p>Forged from <b>one piece</b> of steel &amp; honed by hand.</p>",
        "bullets": ["<li>Full tang</li>", "Dishwasher safe"],
    },
    {
        "sku": "KT-2",
        "name": "Fissler Original-Profi Stew Pot 24 cm",
        "manufacturer": "Fissler",
        "breadcrumbs": "Home & Kitchen > Cookware > Stock Pots",
        "description_html": "Stainless steel, 6.3 L",
        "bullets": [],
    },
]


def _write_store(folder: Path, mapping: dict, encoding: str = "utf-8") -> None:
    folder.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps(row, ensure_ascii=False) for row in STORE_PRODUCTS]
    (folder / "products.jsonl").write_bytes("\n".join(lines).encode(encoding))
    (folder / "queries.jsonl").write_text(json.dumps({"qid": "q1", "query": "chef knife"}))
    (folder / "judgments.jsonl").write_text(json.dumps({"qid": "q1", "sku": "KT-1", "relevance": 3}))
    (folder / "mapping.json").write_text(json.dumps(mapping))


def _generic(folder: Path, out: Path, *extra: str) -> int:
    files = [f"--{kind}={folder / f'{kind}.jsonl'}" for kind in ("products", "queries", "judgments")]
    mapping = ["--mapping", str(folder / "mapping.json")]
    return main(["ingest", "generic", *files, *mapping, "--out", str(out), *extra])


def test_one_mapping_file_with_a_section_per_file_ingests_a_store_export(tmp_path: Path) -> None:
    _write_store(tmp_path / "export", STORE_MAPPING)
    assert _generic(tmp_path / "export", tmp_path / "shop") == 0
    data = DatasetLayout(str(tmp_path / "shop"))
    products = {p["product_id"]: p for p in pq.read_table(str(tmp_path / "shop" / "products")).to_pylist()}
    knife = products["KT-1"]
    # HTML is read as plain text by default; the category aspect is the breadcrumbs' leaf.
    assert knife["description"] == "Forged from one piece of steel & honed by hand."
    assert knife["bullet_points"] == ["Full tang", "Dishwasher safe"]
    assert dict(knife["aspects"]) == {"brand": ["Wüsthof"], "category": ["Chef's Knives"]}
    assert pq.read_table(data.queries).num_rows == 1 and pq.read_table(data.judgments).num_rows == 1

    # --keep_html keeps the export's markup; category_level 0 takes the top of the path instead.
    top = json.loads(json.dumps(STORE_MAPPING))
    top["products"]["category_level"] = 0
    _write_store(tmp_path / "top", top)
    assert _generic(tmp_path / "top", tmp_path / "kept", "--keep_html") == 0
    kept = {p["product_id"]: p for p in pq.read_table(str(tmp_path / "kept" / "products")).to_pylist()}
    assert kept["KT-1"]["description"] == STORE_PRODUCTS[0]["description_html"]
    assert dict(kept["KT-2"]["aspects"])["category"] == ["Home & Kitchen"]


@pytest.mark.parametrize(
    ("mapping", "named"),
    [
        ({**STORE_MAPPING, "product": {}}, "unknown key(s) ['product']"),
        ({"products": {"fields": {}, "seperators": {}}}, "unknown mapping key(s) ['seperators']"),
        ({"fields": {}, "colums": {}}, "unknown key(s) ['colums']"),
    ],
)
def test_a_mapping_error_names_the_bad_key_and_the_valid_ones(
    tmp_path: Path, mapping: dict, named: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _write_store(tmp_path / "export", mapping)
    assert _generic(tmp_path / "export", tmp_path / "shop") != 0
    error = capsys.readouterr().err
    assert named in error and "separators" in error and "category_level" in error


def test_a_non_utf8_export_reads_with_its_encoding_and_fails_loudly_without(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _write_store(tmp_path / "export", STORE_MAPPING, encoding="cp1252")
    assert _generic(tmp_path / "export", tmp_path / "shop", "--max_dead_letter_fraction", "0.4") != 0
    error = capsys.readouterr().err
    assert "products: 1 of 2 rows dead-lettered" in error  # the Fissler line is ASCII
    assert "not valid UTF-8" in error and "--encoding" in error
    assert not (tmp_path / "shop").exists()  # refused before anything is written
    assert _generic(tmp_path / "export", tmp_path / "shop", "--encoding", "cp1252") == 0
    titles = {p["title"] for p in pq.read_table(str(tmp_path / "shop" / "products")).to_pylist()}
    assert "Wüsthof Classic Chef's Knife 20 cm" in titles
    capsys.readouterr()
    assert _generic(tmp_path / "export", tmp_path / "other", "--encoding", "latin-9x") != 0
    assert "unknown encoding 'latin-9x'" in capsys.readouterr().err
