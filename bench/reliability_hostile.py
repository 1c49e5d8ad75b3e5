"""The reliability cases of hostile input (issue 63): a run id that would leave the root, a catalog whose
text drives the terminal, judgments nothing can be scored with, a catalog with no readable row, a mapping
of the wrong type, and a catalog rewritten under its index."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from bench.reliability_kit import (
    Fixture,
    Outcome,
    build_index,
    catalog_rows,
    embed,
    madr,
    named,
    nightly_argv,
    rows_out,
)
from schemas import JUDGMENT_SCHEMA, PRODUCT_SCHEMA
from schemas.terminal_text import has_unsafe_characters

# What a hostile title holds: clear screen, colour, an OSC 8 link to another site, a right-to-left
# override and a one-byte CSI.
ESCAPES = "\x1b[2J\x1b[31mred\x1b[0m \x1b]8;;https://evil.example\x1b\\link\x1b]8;;\x1b\\ \u202eevil\x9b"


def _tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def escaping_run_id(fixture: Fixture) -> Outcome:
    """`madr nightly --run_id .. --restart_run`: once it deleted the root's parent."""
    parent = fixture.folder("run-id-parent")
    root = parent / "root"
    (root / "n1").mkdir(parents=True)
    (root / "LATEST").write_text(json.dumps({"run_id": "n1"}))
    (parent / "unrelated.txt").write_text("keep me")
    before = _tree(parent)
    codes = [
        madr(*nightly_argv(fixture, fixture.products, root, run_id), *restart).code
        for run_id in ("..", ".", str(parent), "n1 ", "a\\b")
        for restart in ((), ("--restart_run",))
    ]
    changed = "nothing outside the root changed" if _tree(parent) == before else "files changed"
    return Outcome(
        "nightly --run_id '..', '.', an absolute path, a trailing space, a backslash (with and without "
        "--restart_run)",
        "exit 2 every time; nothing outside the root changed",
        f"exit {'/'.join(sorted({str(c) for c in codes}))} every time; {changed}",
        0,
    )


def hostile_catalog(fixture: Fixture) -> Outcome:
    """Titles and values with escape sequences, a 1 MB title and a path-like id, through embed, index
    and search: nothing raw on the terminal, every record in the output."""
    rows = catalog_rows(fixture.products)[:50]
    rows[0]["title"] = f"{rows[0]['title']} {ESCAPES}"
    rows[1]["title"] = f"{rows[1]['title']} " + "very long " * 100_000
    rows[2]["product_id"] = "../../etc/passwd"
    rows[3]["brand"] = f"Acme{ESCAPES}"
    path = fixture.folder("hostile.parquet")
    pq.write_table(pa.Table.from_pylist(rows, schema=PRODUCT_SCHEMA), path)
    output = fixture.folder("hostile-embeddings")
    run = embed(fixture, str(path), output)
    index = build_index(fixture, "hostile-index", output)
    search = madr(
        *("search", "--index", str(index), "--model", str(fixture.model), "--k", "50"),
        *("--query", f"shoe {ESCAPES}"),
    )
    shown = (search.stdout + search.stderr).replace("\n", "")
    raw = (
        "control characters on the terminal"
        if has_unsafe_characters(shown)
        else "nothing raw on the terminal"
    )
    longest = max(len(line) for line in search.stdout.splitlines())
    counts = json.loads((output / "manifest.json").read_text())["counts"]
    return Outcome(
        "a catalog of escape sequences, a 1 MB title and a path-like id: embed, build-index, search",
        "exit 0, 0, 0; nothing raw on the terminal; lines under 1,000 characters",
        f"exit {run.code}, 0, {search.code}; {raw}; lines {'under' if longest < 1000 else 'over'} 1,000 "
        "characters",
        len(rows) - counts["products_embedded"] - counts["products_dead_lettered"],
    )


def unscorable_judgments(fixture: Fixture) -> Outcome:
    """Grades stored as strings: every judgment a dead letter. The nightly once published such a night."""
    rows = pq.read_table(fixture.judgments).to_pylist()
    schema = pa.schema([f if f.name != "grade" else pa.field("grade", pa.string()) for f in JUDGMENT_SCHEMA])
    judgments = fixture.folder("string-grades.parquet")
    pq.write_table(
        pa.Table.from_pylist([{**r, "grade": str(r["grade"])} for r in rows], schema=schema), judgments
    )
    root = fixture.folder("nightly-unscorable")
    argv = nightly_argv(fixture, fixture.products, root, "n1")
    run = madr(*argv, "--queries", fixture.queries, "--judgments", str(judgments))
    published = "LATEST written" if (root / "LATEST").exists() else "nothing published"
    embedded = "products embedded" if (root / "n1" / "embeddings").exists() else "nothing embedded"
    return Outcome(
        "nightly whose every judgment is rejected (grades as strings)",
        "exit 2; names --judgments; nothing embedded; nothing published",
        f"exit {run.code}; {named(run, f'--judgments {judgments}', '--judgments')}; {embedded}; {published}",
        0,
    )


def unreadable_catalog(fixture: Fixture) -> Outcome:
    """A catalog whose only file is 0 bytes once embedded to an empty output with exit 0."""
    folder = fixture.folder("unreadable-catalog")
    folder.mkdir()
    (folder / "products.parquet").write_bytes(b"")
    run = embed(fixture, str(folder / "*.parquet"), fixture.folder("unreadable-embeddings"))
    return Outcome(
        "a catalog whose only file is 0 bytes",
        "exit 2; names no product could be read",
        f"exit {run.code}; {named(run, 'no product could be read')}",
        0,
    )


def wrong_mapping(fixture: Fixture) -> Outcome:
    """`"fields": ["sku"]` once gave a traceback and "this is a bug in madr"."""
    folder = fixture.folder("wrong-mapping")
    folder.mkdir()
    (folder / "products.jsonl").write_text(json.dumps({"sku": "a1", "name": "Shoe"}) + "\n")
    mapping = folder / "mapping.json"
    mapping.write_text(json.dumps({"products": {"fields": ["sku"]}}))
    run = madr(
        *("ingest", "generic", f"--products={folder / 'products.jsonl'}", "--mapping", str(mapping)),
        *("--out", str(folder / "out")),
    )
    lines = len(run.stderr.strip().splitlines())
    return Outcome(
        'a mapping file with "fields": ["sku"]',
        "exit 2; one line; names 'fields' must be an object",
        f"exit {run.code}; {'one line' if lines == 1 else f'{lines} lines'}; "
        + named(run, "'fields' must be an object"),
        0,
    )


def rewritten_catalog(fixture: Fixture) -> Outcome:
    """The catalog rewritten in place after the index was built: search once showed new titles beside
    last night's vectors without a word."""
    path = fixture.folder("rewritten.parquet")
    rows = catalog_rows(fixture.products)[:40]
    pq.write_table(pa.Table.from_pylist(rows, schema=PRODUCT_SCHEMA), path)
    output = fixture.folder("rewritten-embeddings")
    embed(fixture, str(path), output)
    index = build_index(fixture, "rewritten-index", output)
    pq.write_table(pa.Table.from_pylist(rows[:30], schema=PRODUCT_SCHEMA), path)
    run = madr("search", "--index", str(index), "--model", str(fixture.model), "--query", "shoe")
    return Outcome(
        "search after the catalog was rewritten (10 of 40 products gone)",
        "exit 0; names 10 of the index's 40 products are no longer in it",
        f"exit {run.code}; " + named(run, "10 of the index's 40 products are no longer in it"),
        len(rows) - rows_out(output),
    )


__all__ = [
    "escaping_run_id",
    "hostile_catalog",
    "rewritten_catalog",
    "unreadable_catalog",
    "unscorable_judgments",
    "wrong_mapping",
]
