"""The reliability suite (issue 13, item 10): break things the way users and accidents do, through `madr`.

Each case runs the real command line (`jobs.cli.main`, or `python -m jobs.cli` in a
subprocess for the kill) on a tiny random model and a small synthetic catalog, observes what
happened (exit code, the one-line message, whether the output or LATEST changed, the counts), and
prints one table row: case | expected | observed | records lost. A case passes when the observed
text equals the expected text and no record was lost.

Records lost = records in - records in the output - records in dead letters, where "the output"
is what a reader can use after the case: the stage's new output when it ran, the output or
published run that was already there when the stage was refused (a refusal must leave it whole),
and a dead letter for a whole file or row group covers every row of it. It must be 0 everywhere.

    python -m bench.reliability            # or: make reliability
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import io
import json
import os
import pickle
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
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
from jobs.cli import main
from pipelines.artifacts import read_embeddings
from product_data.synthetic import SyntheticConfig, generate_benchmark
from schemas import PRODUCT_SCHEMA
from schemas.manifest import files_digest

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

    def folder(self, name: str) -> Path:
        return self.root / name


def madr(*argv: str) -> Run:
    """`madr ARGV` in this process, through the real entry point, with its output captured."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["--log_level", "ERROR", *argv])
    return Run(code, out.getvalue(), err.getvalue())


def make_fixture(root: Path) -> Fixture:
    data = root / "benchmark"
    generate_benchmark(SyntheticConfig(num_products=NUM_PRODUCTS, num_queries=20, seed=1), str(data))
    return Fixture(
        root=root,
        model=tiny_model(root / "model", 16, "reliability"),
        products=str(data / "products" / "*.parquet"),
        queries=str(data / "queries.parquet"),
        judgments=str(data / "judgments.parquet"),
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


def corrupted_model(fixture: Fixture) -> Outcome:
    """One bit of the first weight flipped: embed must refuse before reading a product."""
    model = Path(shutil.copytree(fixture.model, fixture.folder("corrupted-model")))
    data = bytearray((model / WEIGHTS).read_bytes())
    (header,) = struct.unpack("<Q", data[:8])  # safetensors: u64 header length, JSON header, tensors
    data[8 + header] ^= 0x01
    (model / WEIGHTS).write_bytes(bytes(data))
    output = fixture.folder("corrupted-model-out")
    run = madr("embed", "--products", fixture.products, "--model", str(model), "--output", str(output))
    written = "output written" if output.exists() else "no output"
    hashes = (
        "both hashes" if len(set(re.findall(r"\b[0-9a-f]{64}\b", run.stderr))) == 2 else "not both hashes"
    )
    return Outcome(
        "corrupted model (1 bit of the weights)",
        f"exit 2; names {WEIGHTS} and both hashes; no output",
        f"exit {run.code}; {named(run, f'{WEIGHTS}: sha256', WEIGHTS)} and {hashes}; {written}",
        0,  # refused before reading: no record entered
    )


class _Touch:
    """Unpickling this creates the marker file: what an attacker's code would do, made visible."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[object, ...]]:
        return Path.touch, (self.marker,)


def _index(fixture: Fixture, name: str) -> Path:
    """A fresh ScaNN index artifact over the shared embeddings, built by `madr build-index`."""
    index = fixture.folder(name)
    run = madr(
        "build-index", "--embeddings", str(fixture.folder("embeddings")), "--out", str(index), "--max_k", "50"
    )
    if run.code != 0:
        raise RuntimeError(f"build-index failed: {run.stderr}")
    return index


def _evaluate(fixture: Fixture, index: Path, output: Path) -> Run:
    return madr(
        "evaluate",
        "--queries",
        fixture.queries,
        "--judgments",
        fixture.judgments,
        "--model",
        str(fixture.model),
        "--index",
        str(index),
        "--output",
        str(output),
        "--depth",
        "50",
        "--metrics",
        "recall@10,ndcg@10",
    )


def planted_pickle(fixture: Fixture) -> Outcome:
    """A pickle planted as scann/scann_docids.pkl (which ScaNN unpickles) and listed in the manifest."""
    index = _index(fixture, "pickled-index")
    marker = fixture.folder("payload-ran")
    planted = index / "scann" / "scann_docids.pkl"
    planted.write_bytes(pickle.dumps(_Touch(marker)))
    manifest = json.loads((index / "manifest.json").read_text())
    entry = file_entry(planted)  # re-listed, as an attacker who can write the manifest would
    manifest["files"]["scann/scann_docids.pkl"] = {"sha256": entry.sha256, "size": entry.size}
    manifest["files_digest"] = files_digest(manifest["files"])
    (index / "manifest.json").write_text(json.dumps(manifest))
    output = fixture.folder("pickled-index-eval")
    run = _evaluate(fixture, index, output)
    ran = "payload ran" if marker.exists() else "payload never ran"
    written = "output written" if output.exists() else "no output"
    return Outcome(
        "planted pickle (listed scann_docids.pkl)",
        "exit 2; names scann_docids.pkl; payload never ran; no output",
        f"exit {run.code}; {named(run, 'scann_docids.pkl')}; {ran}; {written}",
        0,  # refused before reading: no record entered
    )


def stale_output(fixture: Fixture) -> Outcome:
    """`madr embed` into a folder that already holds shards: refused, the old shards untouched."""
    output = fixture.folder("embeddings")
    before, count = folder_digest(output), rows_out(output)
    run = embed(fixture, fixture.products, output)
    unchanged = "old output unchanged" if folder_digest(output) == before else "old output changed"
    return Outcome(
        "stale output folder (embed again)",
        "exit 2; names --overwrite; old output unchanged",
        f"exit {run.code}; {named(run, '--overwrite')}; {unchanged}",
        count - rows_out(output),
    )


BAD_IDS = {"newline": "bad\nid", "RLO U+202E": "bad\u202eid", "10,000 chars": "x" * 10_000}
BAD_TITLES = {"NUL": "\x00\x00", "zero-width": "\u200b\u200b", "whitespace": "   ", "empty": ""}


def bad_input(fixture: Fixture) -> Outcome:
    """The catalog plus bad rows, a file without product_id and a file cut in half: all dead letters."""
    catalog = fixture.folder("bad-catalog")
    catalog.mkdir()
    template = catalog_rows(fixture.products)
    pq.write_table(pa.Table.from_pylist(template, schema=PRODUCT_SCHEMA), catalog / "good.parquet")
    bad = [{**template[0], "product_id": value} for value in BAD_IDS.values()]
    bad += [
        {**template[1], "product_id": f"bad-title-{i}", "title": t} for i, t in enumerate(BAD_TITLES.values())
    ]
    pq.write_table(pa.Table.from_pylist(bad, schema=PRODUCT_SCHEMA), catalog / "bad-rows.parquet")
    no_id = pa.Table.from_pylist(template[:5], schema=PRODUCT_SCHEMA).drop_columns(["product_id"])
    pq.write_table(no_id, catalog / "no-id.parquet")
    cut = catalog / "cut.parquet"
    pq.write_table(pa.Table.from_pylist(template[:6], schema=PRODUCT_SCHEMA), cut)
    cut.write_bytes(cut.read_bytes()[: cut.stat().st_size // 2])  # an interrupted copy: no footer
    rows_of_file = {
        str(catalog / "good.parquet"): len(template),
        str(catalog / "bad-rows.parquet"): len(bad),
        str(catalog / "no-id.parquet"): 5,
        str(cut): 6,
    }
    output = fixture.folder("bad-catalog-out")
    run = embed(fixture, str(catalog / "*.parquet"), output, "--max_dead_letter_fraction", "1")
    records_in = sum(rows_of_file.values())
    if run.code != 0:
        return Outcome("bad-input corpus", "", f"exit {run.code}; {run.stderr.strip()[-200:]}", records_in)
    out, dead = rows_out(output), dead_lettered(output, rows_of_file)
    return Outcome(
        f"bad-input corpus ({len(bad)} bad rows, 2 broken files)",
        f"exit 0; {len(template)} of {records_in} embedded, the rest dead-lettered",
        f"exit {run.code}; {out} of {records_in} embedded, "
        + ("the rest dead-lettered" if out + dead == records_in else f"{dead} dead-lettered"),
        records_in - out - dead,
    )


def _nightly_argv(fixture: Fixture, catalog: str, root: Path, run_id: str) -> list[str]:
    return [
        *("nightly", "--catalog", catalog, "--model", str(fixture.model), "--out", str(root)),
        *("--run_id", run_id, "--max_k", "50"),
    ]


def _nightly(fixture: Fixture, catalog: str, root: Path, run_id: str) -> Run:
    return madr(*_nightly_argv(fixture, catalog, root, run_id))


def _changed_catalog(fixture: Fixture) -> str:
    """Tonight's catalog: the synthetic one with 10 titles changed (so some rows are re-embedded)."""
    rows = catalog_rows(fixture.products)
    for row in rows[:10]:
        row["title"] = f"{row['title']} (new)"
    path = fixture.folder("tonight.parquet")
    pq.write_table(pa.Table.from_pylist(rows, schema=PRODUCT_SCHEMA), path)
    return str(path)


def _sorted_embeddings(folder: Path) -> tuple[list[str], np.ndarray]:
    ids, matrix, _ = read_embeddings(str(folder))
    order = np.argsort(ids)
    return [ids[i] for i in order], matrix[order]


# When each kill -9 lands: as soon as tonight's run folder appears (during embed), then as soon as its
# embeddings are finished (during the index build).
KILL_WHEN = ("tue", "tue/embeddings/manifest.json")


def kill_and_rerun(fixture: Fixture) -> Outcome:
    """kill -9 `madr nightly` at each of KILL_WHEN; LATEST must stay put, the rerun match a clean run."""
    kills = len(KILL_WHEN)
    tonight = _changed_catalog(fixture)
    reference, killed = fixture.folder("nightly-clean"), fixture.folder("nightly-killed")
    for root in (reference, killed):
        if _nightly(fixture, fixture.products, root, "mon").code != 0:
            raise RuntimeError("the first night failed")
    if _nightly(fixture, tonight, reference, "tue").code != 0:
        raise RuntimeError("the uninterrupted second night failed")
    latest_before = (killed / "LATEST").read_bytes()
    killed_mid_run, latest_intact = 0, True
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    argv = [sys.executable, "-m", "jobs.cli", "--log_level", "ERROR"]
    for trigger in KILL_WHEN:
        process = subprocess.Popen(
            [*argv, *_nightly_argv(fixture, tonight, killed, "tue")],
            cwd=REPO,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 300
        while not (killed / trigger).exists() and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        if process.poll() is None:
            process.kill()  # SIGKILL: no cleanup of any kind
            killed_mid_run += 1
        process.wait()
        latest_intact &= (killed / "LATEST").read_bytes() == latest_before
    rerun = _nightly(fixture, tonight, killed, "tue")
    published = json.loads((killed / "LATEST").read_text())["run_id"] if rerun.code == 0 else None
    clean_ids, clean = _sorted_embeddings(reference / "tue" / "embeddings")
    ids, vectors = _sorted_embeddings(killed / "tue" / "embeddings")
    # Same ids, and vectors equal up to float rounding: Beam may cut bundles (and so inference batches
    # and their padding) differently from run to run, which changes the last bits of a vector.
    same = ids == clean_ids and vectors.shape == clean.shape and np.allclose(vectors, clean, atol=1e-5)
    records_in = rows_in(tonight)
    dead = dead_lettered(killed / "tue" / "embeddings", {})
    return Outcome(
        f"kill -9 of nightly mid-run ({kills}x), then rerun",
        f"killed {kills}x mid-run; LATEST intact; rerun exit 0, publishes tue; output = clean run's",
        f"killed {killed_mid_run}x mid-run; LATEST {'intact' if latest_intact else 'changed'}; rerun exit "
        f"{rerun.code}, publishes {published}; output {'=' if same else '!='} clean run's",
        records_in - len(ids) - dead,
    )


def tampered_index(fixture: Fixture) -> Outcome:
    """One byte of the ScaNN index changed: evaluate must refuse it, naming the file."""
    index = _index(fixture, "tampered-index")
    target = max(
        (path for path in (index / "scann").iterdir() if path.is_file()), key=lambda p: p.stat().st_size
    )
    data = bytearray(target.read_bytes())
    data[len(data) // 2] ^= 0x01
    target.write_bytes(bytes(data))
    output = fixture.folder("tampered-index-eval")
    run = _evaluate(fixture, index, output)
    written = "output written" if output.exists() else "no output"
    return Outcome(
        f"tampered index (1 bit of scann/{target.name})",
        f"exit 2; names {target.name}; no output",
        f"exit {run.code}; {named(run, target.name)}; {written}",
        0,  # refused before reading: no record entered
    )


def shrunk_catalog(fixture: Fixture) -> Outcome:
    """Tonight's catalog lost half its products: the nightly job must not publish it."""
    root = fixture.folder("nightly-shrunk")
    if _nightly(fixture, fixture.products, root, "mon").code != 0:
        raise RuntimeError("the first night failed")
    half = fixture.folder("half.parquet")
    rows = catalog_rows(fixture.products)
    pq.write_table(pa.Table.from_pylist(rows[: len(rows) // 2], schema=PRODUCT_SCHEMA), half)
    latest_before = (root / "LATEST").read_bytes()
    run = _nightly(fixture, str(half), root, "tue")
    latest = "LATEST intact" if (root / "LATEST").read_bytes() == latest_before else "LATEST moved"
    return Outcome(
        "shrunk catalog (50% of products gone)",
        "exit 2; names --allow_shrink; LATEST intact",
        f"exit {run.code}; {named(run, '--allow_shrink')}; {latest}",
        len(rows) - rows_out(root / "mon" / "embeddings"),  # the published run still holds them all
    )


CASES: dict[str, Callable[[Fixture], Outcome]] = {
    "corrupted-model": corrupted_model,
    "planted-pickle": planted_pickle,
    "stale-output": stale_output,
    "bad-input": bad_input,
    "kill-and-rerun": kill_and_rerun,
    "tampered-index": tampered_index,
    "shrunk-catalog": shrunk_catalog,
}


def run_suite(
    root: Path, names: list[str] | None = None, progress: Callable[[str], None] = print
) -> list[Outcome]:
    """Every case (or those `names`) on one fixture under `root`; the shared embeddings are built first."""
    fixture = make_fixture(root)
    first = embed(fixture, fixture.products, fixture.folder("embeddings"))
    if first.code != 0:
        raise RuntimeError(f"the baseline embed failed: {first.stderr}")
    outcomes = []
    for name in names or list(CASES):
        started = time.perf_counter()
        outcomes.append(CASES[name](fixture))
        progress(f"{name}: {time.perf_counter() - started:.1f}s")
    return outcomes


def format_table(outcomes: list[Outcome]) -> str:
    """A Markdown table: case | expected | observed | records lost (observed marked FAIL when it differs)."""
    lines = ["| case | expected | observed | records lost |", "|---|---|---|---|"]
    for outcome in outcomes:
        observed = outcome.observed if outcome.passed else f"FAIL: {outcome.observed}"
        lines.append(f"| {outcome.case} | {outcome.expected} | {observed} | {outcome.records_lost} |")
    return "\n".join(lines)


def run_cli(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--case", action="append", choices=list(CASES), help="Run only this case (repeatable)"
    )
    parser.add_argument(
        "--keep", default=None, help="Work in this folder and keep it (default: a temporary one)"
    )
    args = parser.parse_args(argv)
    with contextlib.ExitStack() as stack:
        root = Path(args.keep) if args.keep else Path(stack.enter_context(tempfile.TemporaryDirectory()))
        root.mkdir(parents=True, exist_ok=True)
        started = time.perf_counter()
        outcomes = run_suite(root, args.case, progress=lambda line: print(line, file=sys.stderr))
        print(format_table(outcomes))
        failed = [outcome.case for outcome in outcomes if not outcome.passed]
        print(
            f"\n{len(outcomes) - len(failed)} of {len(outcomes)} cases as expected, "
            f"{sum(o.records_lost for o in outcomes)} records lost, {time.perf_counter() - started:.0f}s"
        )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(run_cli())
