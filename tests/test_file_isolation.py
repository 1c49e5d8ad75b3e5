"""One broken catalog file, row group or string never stops `madr embed` (issue 13, item 4).

Each case writes a real broken Parquet file beside a good one and runs the whole embed stage on
Beam's local runner: the job must finish, the broken part must become dead letters whose reason
names the file, and products read = embedded + dead-lettered must still hold, by the counting
rule of pipelines/io/catalog_io.py (a file whose footer cannot be read counts as a file, not as
products; rows the footer vouches for count as read and dead-lettered).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from jobs.cli import parse_command
from pipelines.embed.stage import embed_catalog
from pipelines.io.parquet_reading import read_embeddings
from pipelines.storage.stage_manifests import verify_stage_folder
from schemas import PRODUCT_SCHEMA
from tests.test_embed_pipeline import catalog, write_catalog

GOOD_ROWS = 12


def _products(prefix: str, count: int) -> list[dict]:
    return [
        {**row, "product_id": f"{prefix}{i}", "title": f"Acme lamp {prefix}{i}"}
        for i, row in enumerate(catalog(count))
    ]


def _table(rows: list[dict]) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=PRODUCT_SCHEMA)


def truncated(path: Path) -> None:
    """A Parquet file cut in half, as an interrupted copy leaves it: no footer."""
    write_catalog(path, _products("b", 6))
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def random_bytes(path: Path) -> None:
    """Not Parquet at all, under a .parquet name."""
    path.write_bytes(np.random.default_rng(7).integers(0, 256, 4096, dtype=np.uint8).tobytes())


def without_product_id(path: Path) -> None:
    pq.write_table(_table(_products("b", 5)).drop_columns(["product_id"]), path)


def corrupt_row_group(path: Path) -> None:
    """Two row groups of 4; the second one's title column chunk is overwritten, its footer intact.

    That group also holds a copy of the good file's p0: its id column still decodes, so the duplicate
    pass sees the id twice, and the good copy must still be embedded (not dropped as a duplicate).
    """
    rows = _products("b", 7)
    rows.append({**catalog(1)[0], "product_id": "p0", "title": "a copy of p0 in the broken group"})
    pq.write_table(_table(rows), path, row_group_size=4, use_dictionary=False)
    chunk = pq.ParquetFile(path).metadata.row_group(1).column(PRODUCT_SCHEMA.get_field_index("title"))
    assert chunk.path_in_schema == "title"
    data = bytearray(path.read_bytes())
    start = chunk.dictionary_page_offset or chunk.data_page_offset
    data[start : start + chunk.total_compressed_size] = b"\xab" * chunk.total_compressed_size
    path.write_bytes(bytes(data))


def invalid_utf8_relabelled(path: Path) -> None:
    """b2's title holds bytes that are not UTF-8: written as binary, then relabelled string (Arrow does
    not check, and neither does its Parquet writer or reader)."""
    table = _table(_products("b", 4))
    titles = [title.encode() for title in table.column("title").to_pylist()]
    titles[2] = b"Acme lamp \xff\xfe broken"
    column = pa.array(titles, pa.binary()).view(pa.string())
    pq.write_table(table.set_column(table.schema.get_field_index("title"), "title", column), path)


def invalid_utf8_patched(path: Path) -> None:
    """b2's title patched byte for byte in the written file (value and statistics alike)."""
    rows = _products("b", 4)
    rows[2]["title"] = "Acme lamp MARKER"
    pq.write_table(_table(rows), path, compression="none", use_dictionary=False)
    data = path.read_bytes()
    assert b"MARKER" in data
    path.write_bytes(data.replace(b"MARKER", b"MAR\xff\xfeR"))


def wrong_types(path: Path) -> None:
    """A catalog whose columns have the wrong types: integer titles and string aspects."""
    table = pa.table(
        {
            "product_id": pa.array([f"b{i}" for i in range(3)]),
            "title": pa.array([1, 2, 3], pa.int64()),
            "aspects": pa.array(["brand", "color", "size"]),
        }
    )
    pq.write_table(table, path)


@dataclass(frozen=True)
class Case:
    write: Callable[[Path], None]
    # (files, row groups) dead-lettered, then products read, embedded and dead-lettered
    files: int
    row_groups: int
    read: int
    embedded: int
    dead: int
    reason: str  # in every dead letter of the broken file, after its path
    embedded_from_broken: frozenset[str] = frozenset()


CASES = {
    "truncated": Case(truncated, 1, 0, GOOD_ROWS, GOOD_ROWS, 0, " cannot be read as Parquet"),
    "random bytes": Case(random_bytes, 1, 0, GOOD_ROWS, GOOD_ROWS, 0, " cannot be read as Parquet"),
    "without product_id": Case(
        without_product_id, 1, 0, GOOD_ROWS + 5, GOOD_ROWS, 5, " has no column 'product_id'"
    ),
    "corrupt row group": Case(
        corrupt_row_group,
        0,
        1,
        GOOD_ROWS + 8,
        GOOD_ROWS + 4,
        4,
        ": row group 1 cannot be decoded",
        frozenset({"b0", "b1", "b2", "b3"}),
    ),
    "invalid UTF-8 (relabelled binary)": Case(
        invalid_utf8_relabelled,
        0,
        0,
        GOOD_ROWS + 4,
        GOOD_ROWS + 3,
        1,
        " row 2: 'title' is not valid UTF-8",
        frozenset({"b0", "b1", "b3"}),
    ),
    "invalid UTF-8 (byte patch)": Case(
        invalid_utf8_patched,
        0,
        0,
        GOOD_ROWS + 4,
        GOOD_ROWS + 3,
        1,
        " row 2: 'title' is not valid UTF-8",
        frozenset({"b0", "b1", "b3"}),
    ),
    "wrong types": Case(wrong_types, 0, 0, GOOD_ROWS + 3, GOOD_ROWS, 3, ""),
}


def _embed(products: str, model: Path, output: Path) -> dict[str, int]:
    flags = ["--products", products, "--model", str(model), "--output", str(output)]
    return embed_catalog(*parse_command("embed", [*flags, "--max_dead_letter_fraction", "1"]))


def _dead_letters(folder: Path) -> list[dict]:
    return [
        json.loads(line)
        for path in folder.glob("dead_letters*.jsonl")
        for line in path.read_text().splitlines()
    ]


@pytest.mark.parametrize("name", CASES)
def test_a_broken_catalog_file_is_dead_lettered_and_the_job_finishes(name, tmp_path, tiny_model_dir) -> None:
    case = CASES[name]
    (tmp_path / "catalog").mkdir()
    write_catalog(tmp_path / "catalog" / "good.parquet", _products("p", GOOD_ROWS))
    broken = tmp_path / "catalog" / "broken.parquet"
    case.write(broken)

    counts = _embed(str(tmp_path / "catalog" / "*.parquet"), tiny_model_dir, tmp_path / "out")

    found = (
        counts["files_dead_lettered"],
        counts["row_groups_dead_lettered"],
        counts["products_read"],
        counts["products_embedded"],
        counts["products_dead_lettered"],
    )
    assert found == (case.files, case.row_groups, case.read, case.embedded, case.dead)
    assert counts["products_read"] == counts["products_embedded"] + counts["products_dead_lettered"]
    verify_stage_folder(str(tmp_path / "out"), "madr-embeddings", "rerun the embed stage")
    ids, _, manifest = read_embeddings(str(tmp_path / "out"))
    assert sorted(ids) == sorted({f"p{i}" for i in range(GOOD_ROWS)} | case.embedded_from_broken)
    assert manifest["counts"] == counts
    letters = _dead_letters(tmp_path / "out")
    assert len(letters) == case.files + case.row_groups + (
        case.dead if not case.files + case.row_groups else 0
    )
    for letter in letters:
        assert letter["reason"].startswith(f"{broken}{case.reason}") or (
            name == "wrong types" and letter["stage"] == "validate_product"
        ), letter


def test_the_dead_letter_of_a_file_or_row_group_says_where_and_how_many_rows(
    tmp_path, tiny_model_dir
) -> None:
    (tmp_path / "catalog").mkdir()
    write_catalog(tmp_path / "catalog" / "good.parquet", _products("p", GOOD_ROWS))
    without_product_id(tmp_path / "catalog" / "no_id.parquet")
    corrupt_row_group(tmp_path / "catalog" / "rg.parquet")
    truncated(tmp_path / "catalog" / "cut.parquet")
    _embed(str(tmp_path / "catalog" / "*.parquet"), tiny_model_dir, tmp_path / "out")
    records = {
        Path(r["file"]).name: r
        for r in (json.loads(x["record_json"]) for x in _dead_letters(tmp_path / "out"))
    }
    assert records == {
        "no_id.parquet": {
            "file": str(tmp_path / "catalog" / "no_id.parquet"),
            "row_group": None,
            "first_row": 0,
            "rows": 5,
        },
        "rg.parquet": {
            "file": str(tmp_path / "catalog" / "rg.parquet"),
            "row_group": 1,
            "first_row": 4,
            "rows": 4,
        },
        "cut.parquet": {
            "file": str(tmp_path / "catalog" / "cut.parquet"),
            "row_group": None,
            "first_row": 0,
            "rows": None,
        },
    }


def test_a_row_group_that_breaks_midway_keeps_the_records_read_before(tmp_path, tiny_model_dir) -> None:
    # One row group of 1,500 rows read in batches of 1,024: a PLAIN string's length prefix at row 1,200
    # is made absurd, so the first batch decodes and the second fails.
    rows = [{**row, "title": f"ROW{i:05d} lamp"} for i, row in enumerate(_products("m", 1500))]
    path = tmp_path / "mid.parquet"
    pq.write_table(_table(rows), path, compression="none", use_dictionary=False, data_page_size=4096)
    data = bytearray(path.read_bytes())
    at = data.find(b"ROW01200 lamp")
    assert at > 4 and data[at - 4 : at] == len(b"ROW01200 lamp").to_bytes(4, "little")
    data[at - 4 : at] = b"\xff\xff\xff\x7f"
    path.write_bytes(bytes(data))

    counts = _embed(str(path), tiny_model_dir, tmp_path / "out")
    assert (counts["products_read"], counts["products_embedded"], counts["products_dead_lettered"]) == (
        1500,
        1024,
        476,
    )
    assert counts["row_groups_dead_lettered"] == 1
    (letter,) = _dead_letters(tmp_path / "out")
    assert json.loads(letter["record_json"]) == {
        "file": str(path),
        "row_group": 0,
        "first_row": 1024,
        "rows": 476,
    }
    ids, _, _ = read_embeddings(str(tmp_path / "out"))
    assert sorted(ids) == sorted(f"m{i}" for i in range(1024))
