"""Issue 69: what a new user met on a store's first week, each case typed as the user typed it.

A published run is never rerun or discarded once a later one is LATEST, filters are case- and
accent-blind, and the messages name the cause and a flag the command has: a semicolon CSV, a queries
file given as the catalog, a header-only export, an empty catalog.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from jobs.cli import main
from pipelines.embed.gap_fill import FilledAspect
from schemas.value_folding import filter_key
from serving.catalog import Catalog
from tests.test_embed_pipeline import catalog, write_catalog, write_test_queries


@pytest.fixture(scope="module")
def two_nights(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    folder = tmp_path_factory.mktemp("first-week")
    products = write_catalog(folder / "catalog.parquet", catalog(12))
    root = folder / "nightly"
    argv = ["nightly", "--model", str(tiny_model_dir), "--products", products, "--output", str(root)]
    assert main([*argv, "--run_id", "n1"]) == 0
    assert main([*argv, "--run_id", "n2"]) == 0
    return {"root": str(root), "products": products, "model": str(tiny_model_dir), "folder": str(folder)}


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("restart", [False, True])
def test_a_run_published_before_latest_is_never_rerun_or_discarded(two_nights, capsys, restart: bool) -> None:
    root = Path(two_nights["root"])
    before = _files(root)
    other = write_catalog(Path(two_nights["folder"]) / "other.parquet", catalog(14))
    argv = ["nightly", "--model", two_nights["model"], "--products", other, "--output", str(root)]
    assert main([*argv, "--run_id", "n1", *(["--restart_run"] if restart else [])]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "run n1 was published before n2 (LATEST) and is kept as it is: pass a new --run_id" in err
    assert _files(root) == before
    assert json.loads((root / "LATEST").read_text())["run_id"] == "n2"


def test_a_changed_catalog_on_the_published_run_is_not_offered_restart_run(two_nights, capsys) -> None:
    root = Path(two_nights["root"])
    other = write_catalog(Path(two_nights["folder"]) / "other2.parquet", catalog(15))
    argv = ["nightly", "--model", two_nights["model"], "--products", other, "--output", str(root)]
    assert main([*argv, "--run_id", "n2"]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "pass another --run_id (e.g. --run_id n2-2) to keep it (it was published, so it is kept)" in err
    assert "--restart_run" not in err


def test_filters_are_case_and_accent_blind_on_catalog_values_and_predictions() -> None:
    assert filter_key("Crème") == filter_key("creme") == filter_key("CREME")
    assert filter_key("T-Shirt") == filter_key("t shirt") and filter_key("Wüsthof") == "wusthof"
    aspects = [
        {"color": FilledAspect(("Crème",), "catalog")},
        {"color": FilledAspect(("Bleu foncé",), "predicted", 0.9)},
        {"color": FilledAspect(("Black",), "catalog")},
    ]
    shop = Catalog(["a", "b", "c"], ["a", "b", "c"], aspects, load_vectors=lambda: np.zeros((3, 1)))
    assert shop.matching([("color", "creme")]).tolist() == [0]
    assert shop.matching([("color", "BLEU FONCE")]).tolist() == [1]
    with pytest.raises(ValueError, match="nearest known values: Crème"):
        shop.matching([("color", "cremes")])
    assert np.array_equal(shop.matching([("color", "black")]), [2])


def test_madr_search_filters_accent_blind_as_typed(tmp_path, tiny_model_dir, capsys) -> None:
    rows = catalog(8)
    for i, row in enumerate(rows):
        row["aspects"] = {"brand": ["Nike"], "color": ["Crème" if i % 2 else "Noir"]}
    products = write_catalog(tmp_path / "catalog.parquet", rows)
    embed = ["embed", "--model", str(tiny_model_dir), "--products", products, "--output", str(tmp_path / "e")]
    assert main(embed) == 0
    assert main(["build-index", "--embeddings", str(tmp_path / "e"), "--output", str(tmp_path / "i")]) == 0
    capsys.readouterr()
    search = ["search", "--index", str(tmp_path / "i"), "--model", str(tiny_model_dir), "--query", "sock"]
    assert main([*search, "--filter", "color=creme", "--k", "8"]) == 0
    out = capsys.readouterr().out
    assert "4 products match the filters" in out and "color=Crème (catalog)" in out


def test_a_semicolon_csv_is_told_the_delimiter_flag(tmp_path, capsys) -> None:
    (tmp_path / "products.csv").write_text("product_id;title;brand\np1;Kettle;Smeg\np2;Toaster;Smeg\n")
    argv = ["ingest", "generic", f"--products={tmp_path / 'products.csv'}", "--out", str(tmp_path / "shop")]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "its fields are separated by ';', not ','; pass --delimiter ';'" in err
    assert main([*argv, "--delimiter", ";"]) == 0


def test_a_header_only_export_is_refused_not_written_empty(tmp_path, capsys) -> None:
    (tmp_path / "products.csv").write_text("product_id,title,brand\n")
    argv = ["ingest", "generic", f"--products={tmp_path / 'products.csv'}", "--out", str(tmp_path / "shop")]
    assert main(argv) == 2
    assert "products: the file has no row (a header line alone" in capsys.readouterr().err
    assert not (tmp_path / "shop").exists()


def test_a_queries_file_given_as_the_catalog_is_told_why_its_rows_are_dead_letters(
    tmp_path, tiny_model_dir, capsys
) -> None:
    queries, _ = write_test_queries(tmp_path)
    argv = ["nightly", "--model", str(tiny_model_dir), "--products", queries, "--output", str(tmp_path / "n")]
    assert main([*argv, "--run_id", "n1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "product" in err and "commonest reasons:" in err and "--max_dead_letter_fraction" in err


def test_an_empty_catalog_is_told_to_check_the_flag_the_user_gave(tmp_path, tiny_model_dir, capsys) -> None:
    empty = write_catalog(tmp_path / "empty.parquet", [])
    argv = ["nightly", "--model", str(tiny_model_dir), "--products", empty, "--output", str(tmp_path / "n")]
    assert main([*argv, "--run_id", "n1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "its catalog has 0 products" in err and "check --products" in err and "--catalog" not in err
