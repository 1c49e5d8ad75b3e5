"""Issue 66: `madr export-serving` and `madr serve`, as a user types them: the bundle answers what `madr
search` prints (dense, fused with BM25, filtered), loads without torch or Beam, refuses a swapped or
planted file, and swaps to the next bundle under concurrent load without failing a request."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from index_builder import ExactSearcher
from index_builder.numpy_exact import NumpyExactSearcher
from index_builder.stored_vectors import keeps_vectors, read_stored_vectors
from jobs.cli import main
from pipelines.io.parquet_reading import read_embeddings
from schemas import PRODUCT_SCHEMA
from schemas.manifest import ArtifactError
from serving.bundle import open_bundle
from serving.server import load_holder, make_server, read_reload_token, reload_refusal
from tests.test_search import _catalog_rows

QUERIES = ("nike running shoe 17", "blue adidas", "a light shoe for road running")


@pytest.fixture(scope="module")
def bundle(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """40 products embedded, indexed with BM25 and exported, each by its command as typed."""
    root = tmp_path_factory.mktemp("serving")
    products = root / "products.parquet"
    pq.write_table(pa.Table.from_pylist(_catalog_rows(40), schema=PRODUCT_SCHEMA), products)
    model = str(tiny_model_dir)
    assert main(["embed", "--model", model, "--products", str(products), "--output", str(root / "emb")]) == 0
    index = ["build-index", "--embeddings", str(root / "emb"), "--output", str(root / "index")]
    assert main([*index, "--products", str(products)]) == 0
    export = ["export-serving", "--index", str(root / "index"), "--model", model]
    assert main([*export, "--output", str(root / "bundles" / "night-1")]) == 0
    return {
        "root": str(root),
        "model": model,
        "index": str(root / "index"),
        "bundle": str(root / "bundles" / "night-1"),
    }


def _post(url: str, body: dict[str, Any], token: str | None = None) -> tuple[int, dict[str, Any]]:
    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(url, json.dumps(body).encode(), headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def _search_run(bundle: dict[str, str], tmp_path: Path, *flags: str) -> dict[str, list[tuple[str, float]]]:
    """`madr search`'s results for QUERIES, by query text, as (product_id, score) in rank order."""
    queries = tmp_path / "queries.txt"
    queries.write_text("\n".join(QUERIES) + "\n")
    run = tmp_path / f"run{len(list(tmp_path.iterdir()))}.parquet"
    argv = ["search", "--index", bundle["index"], "--model", bundle["model"], "--queries", str(queries)]
    assert main([*argv, "--k", "5", "--output", str(run), *flags]) == 0
    rows = sorted(pq.read_table(run).to_pylist(), key=lambda r: (r["query_id"], r["rank"]))
    by_key: dict[str, list[tuple[str, float]]] = {}
    for row in rows:
        by_key.setdefault(row["query_id"], []).append((row["product_id"], row["score"]))
    return {text: by_key[f"q{i}"] for i, text in enumerate(QUERIES, start=1)}  # a text file's ids


RELOAD_TOKEN = "a-token-of-the-scheduler-0123456789"


@pytest.fixture(scope="module")
def served(bundle: dict[str, str], tmp_path_factory: pytest.TempPathFactory):
    """`madr serve --bundle B --port 0 --reload_token_file F` in its own process, as typed; its base URL."""
    token_file = tmp_path_factory.mktemp("token") / "reload-token"
    token_file.write_text(RELOAD_TOKEN + "\n")
    argv = ["serve", "--bundle", bundle["bundle"], "--port", "0", "--reload_token_file", str(token_file)]
    command = [sys.executable, "-m", "jobs.cli", *argv]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = process.stdout.readline()
    assert "on http://" in line, (line, process.stderr.read() if process.poll() is not None else "")
    url = line.split("on ", 1)[1].split()[0]
    yield url
    process.terminate()
    process.wait(timeout=10)


@pytest.mark.parametrize(("mode", "flags"), [("fused", ()), ("dense", ("--lexical", "false"))])
def test_madr_serve_answers_what_madr_search_prints(bundle, served, tmp_path, mode, flags) -> None:
    printed = _search_run(bundle, tmp_path, *flags)
    for text in QUERIES:
        status, answer = _post(f"{served}/search", {"query": text, "k": 5, "mode": mode})
        assert status == 200, answer
        (result,) = answer["results"]
        assert [h["product_id"] for h in result["hits"]] == [pid for pid, _ in printed[text]]
        assert np.allclose([h["score"] for h in result["hits"]], [s for _, s in printed[text]], atol=1e-5)
        assert result["how"] == ("index + BM25, RRF" if mode == "fused" else "index")


def test_a_filtered_request_answers_what_a_filtered_search_prints(bundle, served, tmp_path) -> None:
    printed = _search_run(bundle, tmp_path, "--filter", "brand=nike")
    status, answer = _post(
        f"{served}/search", {"queries": list(QUERIES), "k": 5, "filters": {"brand": "NIKE"}}
    )
    assert status == 200, answer
    for text, result in zip(QUERIES, answer["results"], strict=True):
        assert [h["product_id"] for h in result["hits"]] == [pid for pid, _ in printed[text]]
        assert all(h["aspects"]["brand"]["values"] == ["Nike"] for h in result["hits"])
        assert result["matching"] == 10


def test_bad_requests_are_answered_400_naming_the_fix(served) -> None:
    status, answer = _post(f"{served}/search", {"query": "shoe", "filters": {"brand": "Nikey"}})
    assert status == 400 and "nearest known values: Nike" in answer["error"]
    assert _post(f"{served}/search", {"query": "shoe", "k": 0})[0] == 400
    assert _post(f"{served}/search", {"k": 3})[0] == 400
    with urllib.request.urlopen(f"{served}/health", timeout=10) as response:
        health = json.loads(response.read())
    assert health["status"] == "ok" and health["products"] == 40 and health["lexical"] is True


def test_a_reload_needs_the_token_when_the_server_has_one(served) -> None:
    """`--reload_token_file`: a /reload without the token is refused (403), from this machine too, and the
    bundle keeps serving; with it, the bundle is loaded again and swapped in."""
    for token in (None, "not-the-token"):
        status, refused = _post(f"{served}/reload", {}, token)
        assert status == 403 and "Authorization: Bearer TOKEN" in refused["error"]
    status, swapped = _post(f"{served}/reload", {}, RELOAD_TOKEN)
    assert status == 200 and swapped["status"] == "swapped"
    with urllib.request.urlopen(f"{served}/health", timeout=10) as response:
        assert json.loads(response.read())["swaps"] == 1


def test_without_a_token_only_this_machine_may_reload() -> None:
    """Anyone who can reach the port could otherwise make the server load bundles again and again."""
    assert reload_refusal("127.0.0.1", None, None) is None
    assert reload_refusal("::1", None, None) is None
    assert "from this machine only" in reload_refusal("10.0.0.7", None, None)
    assert "from this machine only" in reload_refusal("not an address", None, None)
    assert reload_refusal("10.0.0.7", f"Bearer {RELOAD_TOKEN}", RELOAD_TOKEN) is None
    assert reload_refusal("127.0.0.1", "Bearer short", RELOAD_TOKEN) is not None


def test_a_token_file_without_a_token_is_one_clear_error(tmp_path) -> None:
    (tmp_path / "empty").write_text("\n")
    with pytest.raises(ValueError, match=r"--reload_token_file .*16 or more characters"):
        read_reload_token(tmp_path / "empty")
    (tmp_path / "token").write_text(RELOAD_TOKEN + "\nignored\n")
    assert read_reload_token(tmp_path / "token") == RELOAD_TOKEN


@pytest.mark.parametrize("part", ["index", "graph"])
def test_a_file_hashed_as_it_is_read_is_still_refused_when_changed(bundle, tmp_path, part) -> None:
    """The bundle's check leaves the graph, the tokenizer, the catalog and the index's files to their readers
    (each read and hashed once): a changed byte there is refused all the same, by the reader."""
    copy = tmp_path / "bundle"
    shutil.copytree(bundle["bundle"], copy)
    if part == "index":
        changed = next(p for p in sorted((copy / "index").rglob("*.npy")) if p.stat().st_size > 64)
    else:
        changed = copy / "encoder" / "query.onnx"
    data = bytearray(changed.read_bytes())
    data[-1] ^= 0xFF
    changed.write_bytes(bytes(data))
    with pytest.raises(ArtifactError, match="sha256"):
        open_bundle(copy)


def test_the_bundle_loads_and_answers_without_torch_transformers_or_beam(bundle) -> None:
    script = (
        "import sys\n"
        "from serving.bundle import open_bundle\n"
        "from serving.search import answer_queries\n"
        f"served = open_bundle({bundle['bundle']!r})\n"
        "answers = answer_queries(served, ['blue shoe'], 40, [('brand', 'nike')])\n"
        "assert answers[0].how.startswith('scored exactly') or len(answers[0].hits) == 10, answers[0].how\n"
        "print(sorted(m for m in ('torch', 'transformers', 'apache_beam') if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]", done.stdout + done.stderr


@pytest.mark.parametrize("change", ["swapped graph", "edited catalog", "planted file"])
def test_a_bundle_whose_files_fail_verification_is_refused(bundle, tmp_path, change) -> None:
    copy = tmp_path / "bundle"
    shutil.copytree(bundle["bundle"], copy)
    if change == "swapped graph":
        graph = copy / "encoder" / "query.onnx"
        graph.write_bytes(graph.read_bytes()[:-8] + b"\0" * 8)
    elif change == "edited catalog":
        table = pq.read_table(copy / "catalog.parquet")
        titles = pa.array(["cheap " + t for t in table.column("title").to_pylist()])
        pq.write_table(table.set_column(1, "title", titles), copy / "catalog.parquet")
    else:
        (copy / "index" / "extra.pkl").write_bytes(b"planted")
    with pytest.raises(ArtifactError, match=r"export the bundle again|not listed"):
        open_bundle(copy)


def test_a_swap_under_concurrent_requests_fails_none(bundle, tmp_path) -> None:
    bundles = Path(bundle["bundle"]).parent
    shutil.copytree(bundle["bundle"], bundles / "night-2", dirs_exist_ok=True)
    tampered = bundles / "night-3"
    shutil.copytree(bundle["bundle"], tampered, dirs_exist_ok=True)
    (tampered / "catalog.parquet").write_bytes(b"not the catalog")
    holder = load_holder(bundle["bundle"])
    server = make_server(holder, "127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    failures, answered, stop = [], [0], threading.Event()

    def client(i: int) -> None:
        while not stop.is_set():
            status, answer = _post(f"{url}/search", {"query": QUERIES[i % 3], "k": 5})
            if status != 200 or len(answer["results"][0]["hits"]) != 5:
                failures.append((status, answer))
            answered[0] += 1

    clients = [threading.Thread(target=client, args=(i,)) for i in range(8)]
    for thread in clients:
        thread.start()
    try:
        time.sleep(0.5)
        assert _post(f"{url}/reload", {"bundle": str(bundles / "night-2")})[0] == 200
        status, refused = _post(f"{url}/reload", {"bundle": str(tampered)})
        assert status == 409 and "still serving" in refused["error"]
        status, escaped = _post(f"{url}/reload", {"bundle": str(tmp_path)})
        assert status == 409 and "inside" in escaped["error"]
        assert _post(f"{url}/reload", {})[0] == 200
        time.sleep(0.5)
    finally:
        stop.set()
        for thread in clients:
            thread.join()
        server.shutdown()
    assert not failures and answered[0] > 8
    assert holder.swaps == 2 and holder.current.root == bundles / "night-2"


def test_numpy_exact_search_is_exact_search_ties_and_all() -> None:
    rng = np.random.default_rng(3)
    vectors = rng.normal(size=(300, 8)).astype(np.float32)
    vectors[150:200] = vectors[100:150]  # ties, which go to the lower row
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    ids = [f"p{i}" for i in range(300)]
    queries = np.concatenate([vectors[100:105], rng.normal(size=(5, 8)).astype(np.float32)])
    for k in (1, 10, 300, 1000):
        ours, truth = (
            NumpyExactSearcher(vectors, ids).search(queries, k),
            ExactSearcher(vectors, ids).search(queries, k),
        )
        assert (ours.indices == truth.indices).all() and np.allclose(ours.scores, truth.scores, atol=1e-6)


def test_export_serving_saved_model_without_tensorflow_names_the_extra(bundle, tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "tensorflow", None)  # what a missing TensorFlow looks like to import
    argv = ["export-serving", "--index", bundle["index"], "--model", bundle["model"], "--saved_model"]
    assert main([*argv, "--output", str(tmp_path / "b")]) == 2
    assert "pip install madr[serving]" in capsys.readouterr().err
    assert not (tmp_path / "b").exists()


def test_export_serving_saved_model_holds_the_index_as_a_tf_graph(bundle, tmp_path) -> None:
    """With the serving extra: saved_model/ in the bundle, listed in its manifest; loaded by TensorFlow it
    finds what the bundle's index finds."""
    tf = pytest.importorskip("tensorflow")
    from scann.scann_ops.py import scann_ops  # noqa: F401 - registers the Scann ops the graph calls

    argv = ["export-serving", "--index", bundle["index"], "--model", bundle["model"], "--saved_model"]
    assert main([*argv, "--output", str(tmp_path / "b")]) == 0
    served = open_bundle(tmp_path / "b")
    assert served.manifest["saved_model"]["signatures"] == ["top_10", "top_100"]
    vectors = served.catalog.vectors(np.arange(5))
    graph = tf.saved_model.load(str(tmp_path / "b" / "saved_model")).signatures["serving_default"]
    found = graph(queries=tf.constant(vectors))["ids"].numpy()
    mine = served.index.search(vectors, 10)
    for theirs, ours in zip(found, mine.ids, strict=True):
        assert len({v.decode() for v in theirs} & set(ours)) >= 9  # exact scoring: ties may differ in order


def test_ids_are_padded_on_the_right_to_the_longest_or_the_graphs_shortest_input() -> None:
    """The one layout of the model's batches and a server's queries (`schemas.token_batches`)."""
    from schemas.token_batches import right_padded

    ids, mask = right_padded([[5, 6, 7], [8]], pad_id=0)
    assert ids.tolist() == [[5, 6, 7], [8, 0, 0]] and mask.tolist() == [[1, 1, 1], [1, 0, 0]]
    ids, mask = right_padded([[5]], pad_id=9, min_width=4)
    assert ids.tolist() == [[5, 9, 9, 9]] and mask.tolist() == [[1, 0, 0, 0]]
    assert ids.dtype == mask.dtype == np.int64
    assert right_padded([], pad_id=0)[0].shape == (0, 0)


def test_the_bundle_reads_its_vectors_from_the_index_that_keeps_them(bundle, tmp_path) -> None:
    """Bundle version 2: no vectors.npy beside an index that keeps its float32 vectors (a second copy was 15
    GB at 10M x 384); a selective filter scores with the index's own, checked as they are read."""
    copy = tmp_path / "bundle"
    shutil.copytree(bundle["bundle"], copy)
    served = open_bundle(copy)
    assert not (copy / "vectors.npy").exists()
    assert served.manifest["format_version"] == 2 and served.manifest["index"]["vectors"] == "index"
    ids, matrix, _ = read_embeddings(str(Path(bundle["root"]) / "emb"))
    position = {pid: row for row, pid in enumerate(ids)}
    expected = matrix[[position[pid] for pid in served.index.ids]]
    assert np.array_equal(read_stored_vectors(copy / "index"), expected)  # bit for bit, in index order
    dataset = next((copy / "index").rglob("dataset.npy"))
    data = bytearray(dataset.read_bytes())
    data[-1] ^= 0xFF
    dataset.write_bytes(bytes(data))  # after the open: the read a filter makes refuses it
    with pytest.raises(ArtifactError, match="sha256"):
        served.catalog.vectors(np.arange(3))


def test_an_index_without_float32_vectors_ships_them_beside_it_and_old_bundles_still_load(
    bundle, tmp_path
) -> None:
    """An int8 re-ranking index keeps no float32 vectors: the bundle writes vectors.npy, and a filtered
    search scores the same; a version-1 bundle (always vectors.npy) is still served, an unknown one not."""
    int8 = tmp_path / "int8-index"
    build = ["build-index", "--embeddings", str(Path(bundle["root"]) / "emb"), "--output", str(int8)]
    build += ["--scoring", "asymmetric_hashing", "--reorder_precision", "int8", "--target_recall", "0"]
    assert main([*build, "--products", str(Path(bundle["root"]) / "products.parquet")]) == 0
    assert not keeps_vectors(int8) and keeps_vectors(bundle["index"])
    export = ["export-serving", "--index", str(int8), "--model", bundle["model"]]
    assert main([*export, "--output", str(tmp_path / "b")]) == 0
    served = open_bundle(tmp_path / "b")
    assert served.manifest["index"]["vectors"] == "vectors.npy"
    rows = np.arange(len(served.index.ids))
    ids, matrix, _ = read_embeddings(str(Path(bundle["root"]) / "emb"))
    position = {pid: row for row, pid in enumerate(ids)}
    expected = matrix[[position[pid] for pid in served.index.ids]]
    assert np.array_equal(served.catalog.vectors(rows), expected)  # the embed run's, as the index's are
    manifest = json.loads((tmp_path / "b" / "manifest.json").read_text())
    for version, opens in ((1, True), (3, False)):
        (tmp_path / "b" / "manifest.json").write_text(json.dumps({**manifest, "format_version": version}))
        if opens:
            assert open_bundle(tmp_path / "b").catalog.vectors(rows[:2]).shape[0] == 2
        else:
            with pytest.raises(ArtifactError, match="serves versions 1, 2"):
                open_bundle(tmp_path / "b")
