"""The reliability cases of accidents (issue 13): a damaged model or index, a planted pickle, a stale
output, bad input, a killed nightly and a shrunk catalog."""

from __future__ import annotations

import json
import os
import pickle
import re
import shutil
import struct
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from bench.reliability_kit import (
    REPO,
    WEIGHTS,
    Fixture,
    Outcome,
    Touch,
    build_index,
    catalog_rows,
    changed_catalog,
    dead_lettered,
    embed,
    evaluate,
    folder_digest,
    madr,
    named,
    nightly,
    nightly_argv,
    relist,
    rows_in,
    rows_out,
    shard_of,
    sorted_embeddings,
)
from schemas import PRODUCT_SCHEMA


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


def planted_pickle(fixture: Fixture) -> Outcome:
    """A pickle planted as scann/scann_docids.pkl (which ScaNN unpickles) and listed in the manifest."""
    index = build_index(fixture, "pickled-index")
    marker = fixture.folder("payload-ran")
    planted = shard_of(index) / "scann" / "scann_docids.pkl"
    planted.write_bytes(pickle.dumps(Touch(marker)))
    relist(index, "scann/scann_docids.pkl")  # as an attacker who can write the manifests would
    output = fixture.folder("pickled-index-eval")
    run = evaluate(fixture, index, output)
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


# embeddings are finished (during the index build).
KILL_WHEN = ("tue", "tue/embeddings/manifest.json")


def kill_and_rerun(fixture: Fixture) -> Outcome:
    """kill -9 `madr nightly` at each of KILL_WHEN; LATEST must stay put, the rerun match a clean run."""
    kills = len(KILL_WHEN)
    tonight = changed_catalog(fixture)
    reference, killed = fixture.folder("nightly-clean"), fixture.folder("nightly-killed")
    for root in (reference, killed):
        if nightly(fixture, fixture.products, root, "mon").code != 0:
            raise RuntimeError("the first night failed")
    if nightly(fixture, tonight, reference, "tue").code != 0:
        raise RuntimeError("the uninterrupted second night failed")
    latest_before = (killed / "LATEST").read_bytes()
    killed_mid_run, latest_intact = 0, True
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    argv = [sys.executable, "-m", "jobs.cli", "--log_level", "ERROR"]
    for trigger in KILL_WHEN:
        process = subprocess.Popen(
            [*argv, *nightly_argv(fixture, tonight, killed, "tue")],
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
    rerun = nightly(fixture, tonight, killed, "tue")
    published = json.loads((killed / "LATEST").read_text())["run_id"] if rerun.code == 0 else None
    clean_ids, clean = sorted_embeddings(reference / "tue" / "embeddings")
    ids, vectors = sorted_embeddings(killed / "tue" / "embeddings")
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
    index = build_index(fixture, "tampered-index")
    target = max(
        (path for path in (shard_of(index) / "scann").iterdir() if path.is_file()),
        key=lambda p: p.stat().st_size,
    )
    data = bytearray(target.read_bytes())
    data[len(data) // 2] ^= 0x01
    target.write_bytes(bytes(data))
    output = fixture.folder("tampered-index-eval")
    run = evaluate(fixture, index, output)
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
    if nightly(fixture, fixture.products, root, "mon").code != 0:
        raise RuntimeError("the first night failed")
    half = fixture.folder("half.parquet")
    rows = catalog_rows(fixture.products)
    pq.write_table(pa.Table.from_pylist(rows[: len(rows) // 2], schema=PRODUCT_SCHEMA), half)
    latest_before = (root / "LATEST").read_bytes()
    run = nightly(fixture, str(half), root, "tue")
    latest = "LATEST intact" if (root / "LATEST").read_bytes() == latest_before else "LATEST moved"
    return Outcome(
        "shrunk catalog (50% of products gone)",
        "exit 2; names --allow_shrink; LATEST intact",
        f"exit {run.code}; {named(run, '--allow_shrink')}; {latest}",
        len(rows) - rows_out(root / "mon" / "embeddings"),  # the published run still holds them all
    )
