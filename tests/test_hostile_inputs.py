"""Issue 63: what a user or a hostile catalog gives is held to one rule, typed as a user types it.

A run id never leaves the root (with or without --restart_run), catalog and query text reaches the
terminal escaped and cut, an evaluation that would score nothing is refused before anything is embedded
(and the nightly publishes nothing), and a catalog with no readable row is refused like an empty one.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from jobs.cli import main
from schemas import JUDGMENT_SCHEMA, PRODUCT_SCHEMA, validate_product
from schemas.names import UnsafeName, checked_name, require_inside
from schemas.terminal_text import (
    for_terminal,
    has_unsafe_characters,
    record_has_unsafe_text,
    rows_with_unsafe_text,
)
from tests.test_embed_pipeline import catalog, write_catalog, write_test_queries

ESCAPES = "\x1b[2J\x1b[31mred\x1b[0m \x1b]8;;https://evil.example\x1b\\link\x1b]8;;\x1b\\ \u202eevil\x9b"


def _tree(folder: Path) -> dict[str, bytes]:
    """Every file under `folder` with its bytes: what must not change."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("run_id", ["..", ".", "/tmp/elsewhere", "n1 ", "a\\b", "a\x00b", "../n1", ""])
@pytest.mark.parametrize("restart", [False, True])
def test_a_run_id_that_is_not_one_name_is_refused_and_nothing_outside_the_root_changes(
    tmp_path, tiny_model_dir, capsys, run_id: str, restart: bool
) -> None:
    parent = tmp_path / "parent"
    root = parent / "root"
    (root / "n1").mkdir(parents=True)
    (root / "LATEST").write_text(json.dumps({"run_id": "n1"}))
    (parent / "unrelated.txt").write_text("keep me")
    products = write_catalog(tmp_path / "products.parquet", catalog(10))
    before = _tree(tmp_path)
    argv = ["nightly", "--model", str(tiny_model_dir), "--products", products, "--output", str(root)]
    argv += ["--run_id", run_id, *(["--restart_run"] if restart else [])]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "--run_id" in err and "letters, digits" in err and "\x00" not in err
    assert _tree(tmp_path) == before


def test_a_latest_pointer_that_names_no_run_is_refused(tmp_path, tiny_model_dir, capsys) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "LATEST").write_text(json.dumps({"run_id": ".."}))
    (tmp_path / "unrelated.txt").write_text("keep me")
    products = write_catalog(tmp_path / "products.parquet", catalog(10))
    before = _tree(tmp_path)
    argv = ["nightly", "--model", str(tiny_model_dir), "--products", products, "--output", str(root)]
    assert main([*argv, "--run_id", "n2"]) == 2
    assert "is not a LATEST pointer madr wrote" in capsys.readouterr().err
    changed = {name for name, data in _tree(tmp_path).items() if before.get(name) != data}
    assert all(name.startswith("root/") for name in changed), changed


def test_the_name_rule_and_the_containment_check() -> None:
    assert checked_name("2026-12-02", "--run_id") == "2026-12-02"
    assert checked_name("night_1.b", "--run_id") == "night_1.b"
    for bad in ("..", ".", "", " n", "n ", "a/b", "a\\b", "c:", "a\x00", "x" * 129, None, 3):
        with pytest.raises(UnsafeName):
            checked_name(bad, "--run_id")
    with pytest.raises(UnsafeName, match="is not inside"):
        require_inside("/tmp/root", "/tmp/root/..", "the run folder")
    with pytest.raises(UnsafeName, match="is not inside"):
        require_inside("/tmp/root", "/tmp/root", "the run folder")
    assert require_inside("/tmp/root", "/tmp/root/n1", "the run folder") == "/tmp/root/n1"


def test_terminal_text_escapes_control_and_bidi_characters_and_cuts_long_values() -> None:
    shown = for_terminal(ESCAPES)
    assert not has_unsafe_characters(shown) and "\\x1b[2J" in shown and "\\u202e" in shown
    assert "\\x9b" in shown  # the one-byte CSI of C1
    long = for_terminal("x" * 1_000_000)
    assert len(long) < 400 and long.endswith("… [999,700 more characters]")
    assert for_terminal("Crème brûlée, 20 cm") == "Crème brûlée, 20 cm"  # letters are letters
    assert record_has_unsafe_text({"title": "ok", "aspects": {"brand": ["A\u202e"]}})
    assert not record_has_unsafe_text({"title": "Crème", "bullet_points": ["a"], "aspects": {"b": ["c"]}})
    # The morning report's cells: HTML-escaped, and a browser gets no bidi override either.
    from pipelines.report.page import _e

    assert _e(f"<b>{ESCAPES}</b>").startswith("&lt;b&gt;\\x1b[2J") and "\u202e" not in _e(ESCAPES)


def test_the_column_screen_marks_every_row_the_record_search_finds_and_reads_slices() -> None:
    """`rows_with_unsafe_text` lets the embed stage skip `record_has_unsafe_text` for rows it clears:
    it must clear none that the search per record would count, in any column type or slice."""
    rows = _hostile_catalog(12)
    rows[5]["bullet_points"] = ["fine", "bad\x1b"]
    rows[6]["category_path"] = ["Home", "Kitchen\u2066"]
    rows[7]["description"] = "line one\nline two"
    rows[8]["aspects"] = {"colo\tr": ["red"]}  # a name: marked, though validated names are not searched
    batch = pa.RecordBatch.from_pylist(rows, schema=PRODUCT_SCHEMA)
    counted = [record_has_unsafe_text(validate_product(row)) for row in batch.to_pylist()]
    assert sum(counted) == 5
    for start, stop in ((0, 12), (3, 12), (4, 9)):
        marked = rows_with_unsafe_text(batch.slice(start, stop - start))
        assert all(marked[counted[start:stop]]), (start, stop)
        assert marked.tolist() == [bool(c) or i + start == 8 for i, c in enumerate(counted[start:stop])]


def _hostile_catalog(count: int = 30) -> list[dict]:
    rows = catalog(count)
    rows[0]["title"] = f"Nike sock {ESCAPES}"
    rows[1]["title"] = "Nike sock " + "very long " * 100_000  # a 1 MB title
    rows[2]["product_id"] = "../../etc/passwd"
    rows[3]["aspects"] = {"brand": [f"Nike{ESCAPES}"]}
    rows[3]["brand"] = f"Nike{ESCAPES}"
    return rows


def test_a_hostile_catalog_reaches_the_terminal_escaped_through_embed_index_and_search(
    tmp_path, tiny_model_dir, capsys
) -> None:
    products = write_catalog(tmp_path / "hostile.parquet", _hostile_catalog())
    embed = ["embed", "--model", str(tiny_model_dir), "--products", products, "--output", str(tmp_path / "e")]
    assert main(embed) == 0
    manifest = json.loads((tmp_path / "e" / "manifest.json").read_text())
    # Kept as data (the text is the catalog's), and counted.
    assert manifest["counts"]["products_with_control_characters"] == 2
    assert manifest["counts"]["products_dead_lettered"] == 0
    index = ["build-index", "--embeddings", str(tmp_path / "e"), "--output", str(tmp_path / "i")]
    assert main([*index, "--products", products]) == 0
    queries = tmp_path / "queries.txt"
    queries.write_text(f"nike sock {ESCAPES}\n")
    capsys.readouterr()
    search = ["search", "--index", str(tmp_path / "i"), "--model", str(tiny_model_dir), "--k", "30"]
    assert main([*search, "--queries", str(queries), "--query", "sock \u202ereversed"]) == 0
    out = capsys.readouterr().out
    assert not has_unsafe_characters(out.replace("\n", "").replace("\t", ""))
    assert "\\x1b[2J" in out and "\\u202e" in out and "../../etc/passwd" in out
    assert max(len(line) for line in out.splitlines()) < 1_000 and "more characters]" in out
    # --output keeps the data as it is.
    run = tmp_path / "run.parquet"
    assert main([*search, "--query", "nike", "--output", str(run)]) == 0
    assert "../../etc/passwd" in pq.read_table(run).column("product_id").to_pylist()
    # Nothing was written beside the given folders.
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "e",
        "hostile.parquet",
        "i",
        "queries.txt",
        "run.parquet",
    ]


def _bad_judgments(folder: Path) -> str:
    """Grades stored as strings: every judgment a dead letter."""
    rows = [{"query_id": f"q{i}", "product_id": f"p{i}", "grade": "3", "label": None} for i in range(4)]
    schema = pa.schema([f if f.name != "grade" else pa.field("grade", pa.string()) for f in JUDGMENT_SCHEMA])
    path = folder / "string-grades.parquet"
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path)
    return str(path)


def _queries_without_text(folder: Path) -> str:
    path = folder / "no-text.parquet"
    pq.write_table(pa.Table.from_pylist([{"query_id": f"q{i}", "split": "test"} for i in range(4)]), path)
    return str(path)


@pytest.fixture(scope="module")
def evaluated(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("hostile-eval")
    products = write_catalog(root / "products.parquet", catalog(30))
    queries, judgments = write_test_queries(root)
    assert (
        main(["embed", "--model", str(tiny_model_dir), "--products", products, "--output", str(root / "e")])
        == 0
    )
    empty = root / "empty.parquet"
    empty.write_bytes(b"")
    return {
        "root": str(root),
        "products": products,
        "queries": queries,
        "judgments": judgments,
        "embeddings": str(root / "e"),
        "string_grades": _bad_judgments(root),
        "no_text": _queries_without_text(root),
        "empty": str(empty),
    }


@pytest.mark.parametrize(
    ("queries", "judgments", "expected"),
    [
        ("queries", "string_grades", "--judgments {string_grades}: 4 of 4 records rejected (first reasons: "),
        ("no_text", "judgments", "--queries {no_text}: 4 of 4 records rejected (first reasons: 'text'"),
        ("empty", "judgments", "--queries {empty} cannot be read as Parquet"),
    ],
)
def test_an_evaluation_that_would_score_nothing_is_refused_naming_the_file(
    evaluated, tiny_model_dir, tmp_path, capsys, queries: str, judgments: str, expected: str
) -> None:
    argv = ["evaluate", "--model", str(tiny_model_dir), "--embeddings", evaluated["embeddings"]]
    argv += ["--searcher", "exact", "--queries", evaluated[queries], "--judgments", evaluated[judgments]]
    assert main([*argv, "--depth", "10", "--output", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert expected.format(**evaluated) in err
    assert not (tmp_path / "out").exists()


def test_a_night_whose_evaluation_would_score_nothing_is_refused_before_embedding_and_not_published(
    evaluated, tiny_model_dir, tmp_path, capsys
) -> None:
    root = tmp_path / "nightly"
    argv = ["nightly", "--model", str(tiny_model_dir), "--products", evaluated["products"]]
    argv += ["--output", str(root), "--queries", evaluated["queries"], "--depth", "10", "--run_id", "n1"]
    assert main([*argv, "--judgments", evaluated["string_grades"]]) == 2
    err = capsys.readouterr().err
    assert "4 of 4 records rejected" in err and "--max_dead_letter_fraction" in err
    assert not (root / "LATEST").exists() and not (root / "n1" / "embeddings").exists()
    status = json.loads((root / "n1" / "status.json").read_text())
    assert status["state"] == "refused"
    assert "refused by the check of the evaluation" in (root / "n1" / "report.html").read_text()


def test_a_catalog_whose_only_file_is_unreadable_is_refused_like_an_empty_one(
    tmp_path, tiny_model_dir, capsys
) -> None:
    folder = tmp_path / "catalog"
    folder.mkdir()
    (folder / "products.parquet").write_bytes(b"")
    argv = ["embed", "--model", str(tiny_model_dir), "--products", str(folder / "*.parquet")]
    assert main([*argv, "--output", str(tmp_path / "e")]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "no product could be read: 1 file(s)" in err and "dead_letters" in err
    assert not (tmp_path / "e" / "manifest.json").exists()


@pytest.mark.parametrize(
    ("section", "expected"),
    [
        ({"fields": ["sku"]}, "'fields' must be an object of target field -> source column name, got list"),
        (
            {"separators": []},
            "'separators' must be an object of field or aspect -> separator string, got list",
        ),
        ({"aspects": "brand"}, "'aspects' must be an object of aspect name -> source column name, got str"),
        ({"fields": {"title": 3}}, "'fields' must be an object of target field -> source column name"),
        ({"category_level": "leaf"}, "'category_level' must be an integer"),
        ({"strip_html": "yes"}, "'strip_html' must be true or false, got str"),
        ({"fields": {"title": ""}}, "source column of 'title' must be a non-empty string"),
    ],
)
def test_a_mapping_of_the_wrong_type_is_one_line_naming_the_key_the_type_and_the_file(
    tmp_path, capsys, section: dict, expected: str
) -> None:
    (tmp_path / "products.jsonl").write_text(json.dumps({"sku": "a1", "name": "Nike sock"}) + "\n")
    mapping = tmp_path / "mapping.json"
    mapping.write_text(json.dumps({"products": section}))
    argv = ["ingest", "generic", f"--products={tmp_path / 'products.jsonl'}", "--mapping", str(mapping)]
    assert main([*argv, "--out", str(tmp_path / "shop")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert f"{mapping} [products]: " in err and expected in err


def test_a_search_over_a_catalog_rewritten_since_the_index_says_so_with_the_difference_counted(
    tmp_path, tiny_model_dir, capsys
) -> None:
    products = tmp_path / "catalog.parquet"
    write_catalog(products, catalog(20))
    embed = [
        "embed",
        "--model",
        str(tiny_model_dir),
        "--products",
        str(products),
        "--output",
        str(tmp_path / "e"),
    ]
    assert main(embed) == 0
    assert main(["build-index", "--embeddings", str(tmp_path / "e"), "--output", str(tmp_path / "i")]) == 0
    search = ["search", "--index", str(tmp_path / "i"), "--model", str(tiny_model_dir), "--query", "sock"]
    capsys.readouterr()
    assert main(search) == 0
    assert "warning" not in capsys.readouterr().err
    # Rewritten in place: 5 products gone, the rest retitled.
    write_catalog(products, [{**row, "title": f"Retitled {row['title']}"} for row in catalog(15)])
    assert main(search) == 0
    captured = capsys.readouterr()
    assert f"the catalog {products} changed since this index's products were embedded" in captured.err
    assert "5 of the index's 20 products are no longer in it" in captured.err and "--products" in captured.err
    assert "Retitled" in captured.out
    # --products names the catalog to show: no warning.
    assert main([*search, "--products", str(products)]) == 0
    assert "warning" not in capsys.readouterr().err


def test_a_cluster_that_keeps_losing_workers_ends_in_one_line_naming_the_runner_and_the_stage(
    tmp_path, tiny_model_dir, capsys, monkeypatch
) -> None:
    scheduler = pytest.importorskip("distributed.scheduler", reason="the Dask runner needs the dask extra")
    from pipelines.nightly import run

    def lose_workers(*args: object, **kwargs: object) -> None:
        worker = SimpleNamespace(address="tcp://10.0.0.7:40123")  # a WorkerState's one field it reads
        raise scheduler.KilledWorker("('embed-batch', 3)", worker, 3)

    monkeypatch.setattr(run, "embed_catalog", lose_workers)
    products = write_catalog(tmp_path / "products.parquet", catalog(10))
    root = tmp_path / "nightly"
    argv = ["nightly", "--model", str(tiny_model_dir), "--products", products, "--output", str(root)]
    assert main([*argv, "--run_id", "n1"]) == 1
    err = capsys.readouterr().err.strip()
    last = err.splitlines()[-1]
    assert last.startswith(
        "madr nightly: runner failure: in the embed stage: the Dask cluster lost its workers"
    )
    assert "KilledWorker" in last and "Traceback" not in err and "bug in madr" not in err
    status = json.loads((root / "n1" / "status.json").read_text())
    assert status["state"] == "failed" and status["stage"] == "the embed stage"
    assert not (root / "LATEST").exists()


def test_memory_exhausted_is_a_runner_failure_not_a_bug(monkeypatch, capsys) -> None:
    from jobs.commands import reports

    def exhausted(*args: object) -> None:
        raise MemoryError()

    monkeypatch.setattr(reports, "compare_runs", exhausted)
    assert main(["compare", "a", "b"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.splitlines()[-1].startswith("madr compare: runner failure: out of memory (MemoryError)")
    assert "Traceback" not in err


def test_a_hostile_catalog_through_ingest_nightly_report_and_search_as_processes(
    tmp_path, tiny_model_dir
) -> None:
    """The whole path in real processes (their log lines included): nothing raw on the terminal, nothing
    written outside the folders given, and the report's page holds the text escaped as HTML."""
    import subprocess
    import sys

    rows = _hostile_catalog(20)
    export = tmp_path / "export"
    export.mkdir()
    with (export / "products.jsonl").open("w") as handle:
        for row in rows:
            keep = {k: row[k] for k in ("product_id", "title", "description", "brand", "color", "locale")}
            handle.write(json.dumps(keep) + "\n")
    queries, judgments = write_test_queries(tmp_path, count=3, stride=4)
    table = pq.read_table(queries)
    texts = table.column("text").to_pylist()
    texts[0] = f"{texts[0]} {ESCAPES}"  # a query text the report and the logs show
    pq.write_table(table.set_column(table.schema.get_field_index("text"), "text", pa.array(texts)), queries)

    def madr(*argv: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "jobs.cli", *argv]
        done = subprocess.run(command, capture_output=True, text=True, check=False, cwd=tmp_path)
        assert done.returncode == 0, done.stderr[-2000:]
        return done

    shop, root = tmp_path / "shop", tmp_path / "nightly"
    runs = [madr("ingest", "generic", f"--products={export / 'products.jsonl'}", "--out", str(shop))]
    runs.append(
        madr(
            *("nightly", "--model", str(tiny_model_dir), "--products", str(shop / "products")),
            *("--output", str(root), "--queries", queries, "--judgments", judgments, "--run_id", "n1"),
            *("--depth", "10"),
        )
    )
    runs.append(madr("report", "--root", str(root)))
    runs.append(
        madr(
            "search", "--index", str(root / "n1" / "index"), "--model", str(tiny_model_dir), "--query", "sock"
        )
    )
    for done in runs:
        terminal = (done.stdout + done.stderr).replace("\n", "").replace("\t", "")
        assert not has_unsafe_characters(terminal), terminal[:2000]
        assert max(len(line) for line in (done.stdout + done.stderr).splitlines()) < 5_000
    assert "\\x1b[2J" in runs[-1].stdout
    page = (root / "n1" / "report.html").read_text()
    assert "../../etc/passwd" in page and "\x1b" not in page and "\u202e" not in page
    written = sorted(p.name for p in tmp_path.iterdir())
    assert written == ["export", "judgments.parquet", "nightly", "queries.parquet", "shop"]
