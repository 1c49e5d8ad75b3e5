"""The reliability cases of artifacts that must belong together (issue 24, items 1-4).

Deliberate, not accidental: another model's index, files swapped in from another valid artifact with
their manifest entries, an asset path leading out of the index, symbolic links, a pickle planted while an
index loads, and an ONNX graph in the cache that is not the model's. Each must be refused, or (the cache)
bypassed, with nothing wrong written.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import pickle
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from bench.reliability_kit import (
    WEIGHTS,
    Fixture,
    Outcome,
    Run,
    Touch,
    build_index,
    catalog_rows,
    embed,
    evaluate,
    named,
    relist,
    shard_of,
    sorted_embeddings,
)
from bench.support import tiny_model
from index_builder import ScannIndex
from index_builder.artifact import IndexArtifactError
from schemas import PRODUCT_SCHEMA
from schemas.manifest import sha256_file

REFUSED = "exit 2; names {}; no output"
# The ONNX cache cases compare ONNX Runtime's vectors with torch's: both at fp32, whatever `auto` picks here.
FP32 = ("--precision", "fp32")


def _refused(run: Run, output: Path, text: str, label: str | None = None) -> str:
    written = "output written" if output.exists() else "no output"
    return f"exit {run.code}; {named(run, text, label)}; {written}"


def _model_b(fixture: Fixture) -> Path:
    folder = fixture.folder("model-b")
    return folder if folder.is_dir() else tiny_model(folder, 16, "reliability-b")


def shared_index(fixture: Fixture) -> Path:
    """The index of the shared embeddings (model A), built once."""
    folder = fixture.folder("index-a")
    return folder if folder.is_dir() else build_index(fixture, "index-a")


def _index_of_model_b(fixture: Fixture) -> Path:
    """An index of the same catalog by model B, built once."""
    folder, embeddings = fixture.folder("index-b"), fixture.folder("embeddings-b")
    if folder.is_dir():
        return folder
    if embed(fixture, fixture.products, embeddings, "--model", str(_model_b(fixture))).code != 0:
        raise RuntimeError("embedding with model B failed")
    return build_index(fixture, "index-b", embeddings)


def model_mismatch(fixture: Fixture) -> Outcome:
    """Issue 24: `madr evaluate --model A --index B` reported recall 0.033 instead of 0.150, exit 0."""
    model_b = _model_b(fixture)
    index_a, index_b = shared_index(fixture), _index_of_model_b(fixture)
    observed = []
    for label, model, index in (
        ("A with B's index", fixture.model, index_b),
        ("B with A's index", model_b, index_a),
    ):
        output = fixture.folder(f"mismatch-{label[0]}")
        observed.append(
            f"{label}: {_refused(evaluate(fixture, index, output, model), output, '--allow_model_mismatch')}"
        )
    return Outcome(
        "model and index of different models (both ways)",
        "; ".join(
            f"{label}: {REFUSED.format('--allow_model_mismatch')}"
            for label in ("A with B's index", "B with A's index")
        ),
        "; ".join(observed),
        0,  # refused before reading a query
    )


def _reversed_index(fixture: Fixture) -> Path:
    """A valid index of the same catalog and model whose rows are in reversed order: each product renamed
    so that the ids sort the other way. (An index sorts its rows by product id, so the catalog's rows merely
    reversed gave byte-identical files, and swapping them in changed nothing.)"""
    folder = fixture.folder("index-reversed")
    if folder.is_dir():
        return folder
    rows = catalog_rows(fixture.products)
    rank = {product_id: i for i, product_id in enumerate(sorted(row["product_id"] for row in rows))}
    rows = [{**row, "product_id": f"renamed-{len(rows) - rank[row['product_id']]:06d}"} for row in rows]
    path = fixture.folder("reversed.parquet")
    pq.write_table(pa.Table.from_pylist(rows, schema=PRODUCT_SCHEMA), path)
    if embed(fixture, str(path), fixture.folder("embeddings-reversed")).code != 0:
        raise RuntimeError("embedding the reversed catalog failed")
    return build_index(fixture, "index-reversed", fixture.folder("embeddings-reversed"))


def swap_in(target: Path, source: Path, relative: str) -> None:
    """Copy `relative` (a file or a folder) from the artifact `source` into `target`, with its manifest
    entries, as someone merging two valid artifacts by hand would: every file's own sha256 then matches."""
    theirs = json.loads((source / "manifest.json").read_text())["files"]
    manifest = json.loads((target / "manifest.json").read_text())
    if (source / relative).is_dir():
        shutil.rmtree(target / relative)
        shutil.copytree(source / relative, target / relative)
    else:
        shutil.copyfile(source / relative, target / relative)
    manifest["files"] = {
        name: entry for name, entry in manifest["files"].items() if not name.startswith(relative)
    } | {name: entry for name, entry in theirs.items() if name.startswith(relative)}
    (target / "manifest.json").write_text(json.dumps(manifest))


def swapped_files(fixture: Fixture, relative: str) -> Outcome:
    """`relative` (ids.parquet, or the whole scann/) taken from another valid index of the same catalog,
    with its manifest entries: every file's own hash matches (issue 24: recall 0.000, exit 0)."""
    index = Path(shutil.copytree(shared_index(fixture), fixture.folder(f"swapped-{relative}")))
    swap_in(shard_of(index), shard_of(_reversed_index(fixture)), relative)
    relist(index)  # the shard's manifest as it now is, in the top-level one
    output = fixture.folder(f"swapped-{relative}-eval")
    return Outcome(
        f"{relative}{'/' if relative == 'scann' else ''} swapped in from another index, with its entries",
        REFUSED.format("the swap"),
        _refused(evaluate(fixture, index, output), output, "swapped in from another artifact", "the swap"),
        0,
    )


def escaping_asset(fixture: Fixture) -> Outcome:
    """ScaNN's asset file pointed at another model's vectors outside the index, and relisted."""
    index = Path(shutil.copytree(shared_index(fixture), fixture.folder("escaping-index")))
    outside = fixture.folder("outside")
    outside.mkdir()
    shutil.copyfile(shard_of(_index_of_model_b(fixture)) / "scann" / "dataset.npy", outside / "dataset.npy")
    assets = shard_of(index) / "scann" / "scann_assets.pbtxt"
    assets.write_text(assets.read_text().replace('"dataset.npy"', '"../../../outside/dataset.npy"'))
    relist(index, "scann/scann_assets.pbtxt")
    output = fixture.folder("escaping-index-eval")
    return Outcome(
        "asset path leaving the index (../../../outside/dataset.npy), relisted",
        REFUSED.format("the asset"),
        _refused(evaluate(fixture, index, output), output, "names an asset outside", "the asset"),
        0,
    )


def symbolic_links(fixture: Fixture) -> Outcome:
    """model.safetensors, scann/dataset.npy and the whole scann/ as links to files outside the artifact."""
    observed = []
    model = Path(shutil.copytree(fixture.model, fixture.folder("linked-model")))
    (model / WEIGHTS).rename(fixture.folder("outside-weights.safetensors"))
    (model / WEIGHTS).symlink_to(fixture.folder("outside-weights.safetensors"))
    output = fixture.folder("linked-model-out")
    run = embed(fixture, fixture.products, output, "--model", str(model))
    observed.append(f"weights: {_refused(run, output, 'is a symbolic link', 'the link')}")
    for relative in ("scann/dataset.npy", "scann"):
        index = Path(
            shutil.copytree(shared_index(fixture), fixture.folder(f"linked-{relative.replace('/', '-')}"))
        )
        moved = fixture.folder(f"outside-{relative.replace('/', '-')}")
        (shard_of(index) / relative).rename(moved)
        (shard_of(index) / relative).symlink_to(moved)
        output = fixture.folder(f"linked-{relative.replace('/', '-')}-eval")
        run = evaluate(fixture, index, output)
        observed.append(f"{relative}: {_refused(run, output, 'is a symbolic link', 'the link')}")
    expected = [f"{what}: {REFUSED.format('the link')}" for what in ("weights", "scann/dataset.npy", "scann")]
    return Outcome(
        "symbolic links out of the model and the index", "; ".join(expected), "; ".join(observed), 0
    )


def load_while_planting(index: Path, payload: object, loads: int) -> tuple[int, int]:
    """Load `index` `loads` times while a thread renames a pickle of `payload` into scann/scann_docids.pkl
    and out again; (loads that got past the check, loads refused). Whether the payload ran is the caller's
    to see (its side effect)."""
    staged, planted = index.parent / f".{index.name}.payload.pkl", index / "scann" / "scann_docids.pkl"
    stop = threading.Event()

    def plant_in_a_loop() -> None:
        while not stop.is_set():
            staged.write_bytes(pickle.dumps(payload))
            os.replace(staged, planted)
            planted.unlink(missing_ok=True)

    planter = threading.Thread(target=plant_in_a_loop, daemon=True)
    planter.start()
    loaded = refused = 0
    try:
        for _ in range(loads):
            try:
                ScannIndex.load(index)
                loaded += 1
            except IndexArtifactError:
                refused += 1
    finally:
        stop.set()
        planter.join()
    return loaded, refused


def pickle_race(fixture: Fixture) -> Outcome:
    """A pickle renamed into scann/ and out again in a loop while the index is loaded N times: ScaNN
    unpickles scann_docids.pkl whenever it is there, so a load that checks, then reads, would run it."""
    index = Path(shutil.copytree(shared_index(fixture), fixture.folder("race-index")))
    marker = fixture.folder("race-payload-ran")
    loaded, refused = load_while_planting(shard_of(index), Touch(marker), fixture.planted_loads)
    ran = "payload ran" if marker.exists() else "payload never ran"
    live = "race live" if loaded and refused else "race not live"  # some loads got past the first check
    return Outcome(
        f"pickle planted while the index loads ({loaded} of {fixture.planted_loads} loads past the check)",
        "payload never ran; race live",
        f"{ran}; {live}",
        0,
    )


@contextlib.contextmanager
def _cache(folder: Path) -> Iterator[None]:
    before = os.environ.get("MADR_CACHE")
    os.environ["MADR_CACHE"] = str(folder)
    try:
        yield
    finally:
        if before is None:
            del os.environ["MADR_CACHE"]
        else:
            os.environ["MADR_CACHE"] = before


@contextlib.contextmanager
def _warnings(logger: str) -> Iterator[list[str]]:
    """The warnings `logger` gives in the block (the suite runs madr at --log_level ERROR)."""
    said: list[str] = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = lambda record: said.append(record.getMessage())  # type: ignore[method-assign]
    target = logging.getLogger(logger)
    level, target.level = target.level, logging.WARNING
    target.addHandler(handler)
    try:
        yield said
    finally:
        target.removeHandler(handler)
        target.setLevel(level)


def _graphs(cache: Path, model: Path) -> list[Path]:
    key = sha256_file(model / WEIGHTS)[:32]
    return sorted((cache / "onnx" / key).glob("*.onnx"))


def _same_as_torch(fixture: Fixture, output: Path) -> str:
    reference = fixture.folder("embeddings-torch")
    if (
        not reference.is_dir()
        and embed(fixture, fixture.products, reference, *FP32, "--runtime", "torch").code != 0
    ):
        raise RuntimeError("embedding with torch failed")
    (ids, vectors), (want_ids, want) = sorted_embeddings(output), sorted_embeddings(reference)
    same = ids == want_ids and np.allclose(vectors, want, atol=1e-5)
    return "vectors = torch's" if same else "vectors != torch's"


def bad_cached_graph(fixture: Fixture, forged: bool) -> Outcome:
    """The cached ONNX graph replaced, its sidecar's hash rewritten to match: by model B's graph (issue 24:
    embed wrote B's vectors labelled as A for all products, exit 0), or by bytes that are no graph."""
    what = "forged" if forged else "unreadable"
    cache = fixture.folder(f"cache-{what}")
    with _cache(cache):
        if embed(
            fixture, fixture.products, fixture.folder(f"{what}-first"), *FP32, "--runtime", "onnxruntime"
        ).code:
            raise RuntimeError("the first ONNX embed failed")
        if forged:
            model_b = _model_b(fixture)
            embed(
                fixture,
                fixture.products,
                fixture.folder(f"{what}-b"),
                "--model",
                str(model_b),
                *FP32,
                "--runtime",
                "onnxruntime",
            )
        for graph in _graphs(cache, fixture.model):
            if forged:
                shutil.copyfile(_graphs(cache, model_b)[_graphs(cache, fixture.model).index(graph)], graph)
            else:
                graph.write_bytes(b"these bytes are not an ONNX graph")
            sidecar = graph.with_suffix(".json")
            record = json.loads(sidecar.read_text())
            record["sha256"] = sha256_file(graph)
            sidecar.write_text(json.dumps(record))
        output = fixture.folder(f"{what}-graph-out")
        with _warnings("model.text_encoder") as said:
            run = embed(fixture, fixture.products, output, *FP32, "--runtime", "onnxruntime")
    warning = "does not encode as" if forged else "cannot be used"
    warned = "warns" if any(warning in line for line in said) else "does not warn"
    vectors = _same_as_torch(fixture, output) if run.code == 0 else "no output"
    return Outcome(
        f"{what} ONNX graph in the cache, sidecar rewritten",
        "exit 0; warns; vectors = torch's",
        f"exit {run.code}; {warned}; {vectors}",
        0 if run.code == 0 else len(catalog_rows(fixture.products)),
    )
