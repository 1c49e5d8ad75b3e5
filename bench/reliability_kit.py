"""The reliability suite's kit: the fixture, running `madr`, counting records, and the helpers cases share.

The cases live in bench/reliability_cases.py (accidents: issue 13) and bench/reliability_binding.py
(artifacts that must belong together, one writer at a time, errors that name their cause: issue 24);
bench/reliability.py runs them and prints the table.
"""

from __future__ import annotations

import contextlib
import glob
import io
import json
import os
from dataclasses import dataclass
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from bench.support import tiny_model
from index_builder.artifact import file_entry
from index_builder.partitioned import shard_dir_name
from jobs.cli import main
from pipelines.io.parquet_reading import read_embeddings
from product_data.synthetic import SyntheticConfig, generate_benchmark
from schemas import PRODUCT_SCHEMA
from schemas.manifest import MANIFEST_FILE, FileEntry, files_digest

REPO = Path(__file__).resolve().parents[1]
WEIGHTS = "model.safetensors"
NUM_PRODUCTS = 200


@dataclass(frozen=True)
class Outcome:
    """One row of the table."""

    case: str
    expected: str
    observed: str
    records_lost: int

    @property
    def passed(self) -> bool:
        return self.observed == self.expected and self.records_lost == 0


@dataclass(frozen=True)
class Run:
    """What one `madr` command did: its exit code and what it printed."""

    code: int
    stdout: str
    stderr: str


@dataclass(frozen=True)
class Fixture:
    """The inputs every case starts from, made once: a tiny model and a synthetic benchmark."""

    root: Path
    model: Path
    products: str  # glob of the catalog's Parquet files
    queries: str
    judgments: str
    # How hard the races are tried: `make reliability` runs the full counts, the test a quick share.
    concurrent_tries: int = 10
    planted_loads: int = 1000

    def folder(self, name: str) -> Path:
        return self.root / name


def madr(*argv: str) -> Run:
    """`madr ARGV` in this process, through the real entry point, with its output captured."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["--log_level", "ERROR", *argv])
    return Run(code, out.getvalue(), err.getvalue())


def make_fixture(root: Path, quick: bool = False) -> Fixture:
    """The tiny model and the benchmark under `root`; `quick` tries the races 1 and 200 times, not 10 and
    1,000 (the suite as a test)."""
    data = root / "benchmark"
    generate_benchmark(SyntheticConfig(num_products=NUM_PRODUCTS, num_queries=20, seed=1), str(data))
    return Fixture(
        root=root,
        model=tiny_model(root / "model", 16, "reliability"),
        products=str(data / "products" / "*.parquet"),
        queries=str(data / "queries.parquet"),
        judgments=str(data / "judgments.parquet"),
        concurrent_tries=1 if quick else 10,
        planted_loads=200 if quick else 1000,
    )


# --- counting ---------------------------------------------------------------------------------------


def rows_in(pattern: str) -> int:
    return sum(pq.read_metadata(path).num_rows for path in sorted(glob.glob(pattern)))


def catalog_rows(pattern: str) -> list[dict]:
    return [row for path in sorted(glob.glob(pattern)) for row in pq.read_table(path).to_pylist()]


def rows_out(embeddings: Path) -> int:
    return len(read_embeddings(str(embeddings))[0])


def dead_lettered(folder: Path, rows_of_file: dict[str, int]) -> int:
    """Records the dead letters under `folder` account for: one per row, or every row of a file's letter."""
    total = 0
    for path in folder.glob("dead_letters*.jsonl"):
        for line in path.read_text().splitlines():
            record = json.loads(json.loads(line)["record_json"])
            if isinstance(record, dict) and {"file", "rows"} <= record.keys():
                # A file or row group that could not be read; rows None: the footer itself is gone.
                total += record["rows"] if record["rows"] is not None else rows_of_file[record["file"]]
            else:
                total += 1
    return total


def folder_digest(folder: Path) -> dict[str, str]:
    """relative path -> sha256 of every file under `folder`: has anything in it changed?"""
    return {
        str(path.relative_to(folder)): file_entry(path).sha256
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


def named(run: Run, text: str, label: str | None = None) -> str:
    """ "names LABEL" when the error message holds `text`, else what it said instead."""
    label = label or text
    return (
        f"names {label}" if text in run.stderr else f"does not name {label} ({run.stderr.strip()[-200:]!r})"
    )


# --- the cases ----------------------------------------------------------------------------------------


def embed(fixture: Fixture, products: str, output: Path, *extra: str) -> Run:
    return madr(
        "embed", "--products", products, "--model", str(fixture.model), "--output", str(output), *extra
    )


class Touch:
    """Unpickling this creates the marker file: what an attacker's code would do, made visible."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[object, ...]]:
        return Path.touch, (self.marker,)


def build_index(fixture: Fixture, name: str, embeddings: Path | None = None) -> Path:
    """A fresh ScaNN index artifact over `embeddings` (the shared ones by default), by `madr build-index`."""
    index = fixture.folder(name)
    source = embeddings or fixture.folder("embeddings")
    run = madr("build-index", "--embeddings", str(source), "--out", str(index), "--depth", "50")
    if run.code != 0:
        raise RuntimeError(f"build-index failed: {run.stderr}")
    return index


def shard_of(index: Path) -> Path:
    """The one shard of a `madr build-index` artifact (a "madr-scann-index"): the ScaNN files and ids a
    case alters."""
    return index / shard_dir_name(0, 1)


def relist(index: Path, *names: str) -> None:
    """Record the named files of the index's shard as they are now in the shard's manifest, and that
    manifest in the top-level one, digests too: what someone who can write the manifests does, so that
    only the checks beyond the hashes are left to catch it."""
    shard = shard_of(index)
    # No names: the shard's manifest as it now is (changed by hand) listed in the top-level one alone.
    levels = ((shard, names),) if names else ()
    for folder, listed in (*levels, (index, (f"{shard.name}/{MANIFEST_FILE}",))):
        manifest = json.loads((folder / MANIFEST_FILE).read_text())
        for name in listed:
            manifest["files"][name] = FileEntry.of(folder / name).to_dict()
        manifest["files_digest"] = files_digest(manifest["files"])
        (folder / MANIFEST_FILE).write_text(json.dumps(manifest))


def evaluate(fixture: Fixture, index: Path, output: Path, model: Path | None = None) -> Run:
    return madr(
        "evaluate",
        "--queries",
        fixture.queries,
        "--judgments",
        fixture.judgments,
        "--model",
        str(model or fixture.model),
        "--index",
        str(index),
        "--output",
        str(output),
        "--depth",
        "50",
        "--metrics",
        "recall@10,ndcg@10",
    )


def nightly_argv(fixture: Fixture, catalog: str, root: Path, run_id: str) -> list[str]:
    return [
        *("nightly", "--catalog", catalog, "--model", str(fixture.model), "--out", str(root)),
        *("--run_id", run_id, "--depth", "50"),
    ]


def nightly(fixture: Fixture, catalog: str, root: Path, run_id: str) -> Run:
    return madr(*nightly_argv(fixture, catalog, root, run_id))


def changed_catalog(fixture: Fixture) -> str:
    """Tonight's catalog: the synthetic one with 10 titles changed (so some rows are re-embedded)."""
    rows = catalog_rows(fixture.products)
    for row in rows[:10]:
        row["title"] = f"{row['title']} (new)"
    path = fixture.folder("tonight.parquet")
    pq.write_table(pa.Table.from_pylist(rows, schema=PRODUCT_SCHEMA), path)
    return str(path)


def sorted_embeddings(folder: Path) -> tuple[list[str], np.ndarray]:
    ids, matrix, _ = read_embeddings(str(folder))
    order = np.argsort(ids)
    return [ids[i] for i in order], matrix[order]


# When each kill -9 lands: as soon as tonight's run folder appears (during embed), then as soon as its
