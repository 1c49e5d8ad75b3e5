"""`madr serve` under concurrent load, beside what a user would write instead (issue 66, Must have 4).

Loopback only, bounded in time. One run:

* **madr serve**: `madr serve --bundle B --port 0` in its own process, as a user starts it; `--clients`
  client threads (keep-alive connections), each posting one query at a time (text in, ids out) for
  `--seconds`: queries/s, latency p50 / p99 as the client saw it, and the server's own split of each
  request into the query encoder's time and the search's (index, BM25, filters), from its answers; the
  server's resident memory after each level. Fused (dense + BM25, what the server answers unasked) and
  dense.
* **a bundle swap under load**: `--clients` at the most concurrency while another thread posts /reload
  every `--swap_every` seconds, alternating between two copies of the bundle: failed requests (any
  status but 200, any connection error) and swaps done.
* **the peer, as a user writes it**: sentence-transformers' `encode` with the bundled MiniLM (what the
  demo model starts from) and a plain ScaNN searcher (tree + asymmetric hashing + re-ranking, ScaNN's
  README recipe) over the catalog's titles encoded by the same model, in one process, called from the
  same number of threads: no HTTP, no BM25, no filters.

    python -m bench.serving_load --bundle runs/serving-load/bundle    # after `madr export-serving`
    python -m bench.serving_load --quick
"""

from __future__ import annotations

import argparse
import http.client
import json
import math
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq

from bench.common import report, table
from bench.support import command_line, shared_machine_note

DEMO = Path("runs/demo")
DEFAULT_BUNDLE = Path("runs/serving-load/bundle")


def export_demo_bundle(target: Path) -> Path:
    """The demo's bundle, written by `madr export-serving` as typed (after `make demo`)."""
    if not (target / "manifest.json").is_file():
        shutil.rmtree(target, ignore_errors=True)
        argv = ["export-serving", "--index", str(DEMO / "index"), "--model", str(DEMO / "model")]
        subprocess.run([sys.executable, "-m", "jobs.cli", *argv, "--output", str(target)], check=True)
    return target


def demo_queries(limit: int) -> list[str]:
    """The demo benchmark's query texts (as the demo generated them), at most `limit`."""
    texts = pq.read_table(DEMO / "data" / "queries.parquet", columns=["text"]).column("text").to_pylist()
    return [t for t in texts if t][:limit]


def start_server(bundle: Path) -> tuple[subprocess.Popen[str], str, int]:
    argv = ["serve", "--bundle", str(bundle), "--port", "0"]
    process = subprocess.Popen(
        [sys.executable, "-m", "jobs.cli", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    line = process.stdout.readline() if process.stdout else ""
    if "on http://" not in line:
        process.kill()
        raise RuntimeError(f"madr serve did not start: {line!r}")
    host, port = line.split("on http://", 1)[1].split()[0].rsplit(":", 1)
    return process, host, int(port)


def rss_mb(pid: int) -> dict[str, float]:
    """Resident and peak resident memory of a process (Linux /proc)."""
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines())
    return {
        name: round(int(fields[key].split()[0]) / 1024, 1)
        for name, key in (("rss_mb", "VmRSS"), ("peak_mb", "VmHWM"))
    }


def percentile(values: list[float], q: float) -> float | None:
    return round(float(np.percentile(values, q)), 2) if values else None


def drive(call: Any, clients: int, seconds: float, queries: list[str]) -> dict[str, Any]:
    """`clients` threads calling `call(client, text)` back to back for `seconds`: rate, latency, failures.
    `call` returns the server's (encode_ms, search_ms), or None for an in-process peer."""
    latencies: list[float] = []
    shares: list[tuple[float, float]] = []
    failures: list[str] = []
    lock, stop = threading.Lock(), threading.Event()

    def client(number: int) -> None:
        state: dict[str, Any] = {}
        turn = number
        while not stop.is_set():
            text = queries[turn % len(queries)]
            turn += clients
            started = time.perf_counter()
            try:
                share = call(state, text)
            except Exception as error:  # a failed request is a figure here, not a crash
                with lock:
                    failures.append(f"{type(error).__name__}: {error}"[:200])
                state.clear()
                continue
            elapsed = (time.perf_counter() - started) * 1000
            with lock:
                latencies.append(elapsed)
                if share is not None:
                    shares.append(share)

    threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(clients)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    time.sleep(seconds)
    stop.set()
    for thread in threads:
        thread.join(timeout=60)
    wall = time.perf_counter() - started
    figures: dict[str, Any] = {
        "clients": clients,
        "requests": len(latencies),
        "failed": len(failures),
        "queries_per_s": round(len(latencies) / wall, 1),
        "p50_ms": percentile(latencies, 50),
        "p99_ms": percentile(latencies, 99),
        "first_failures": failures[:3],
    }
    if shares:
        encode, search = np.mean([s[0] for s in shares]), np.mean([s[1] for s in shares])
        mean = float(np.mean(latencies))
        figures.update(encode_ms=round(float(encode), 2), search_ms=round(float(search), 2))
        figures["encoder_share"] = round(float(encode) / mean, 3)
        figures["search_share"] = round(float(search) / mean, 3)
    return figures


def http_call(host: str, port: int, k: int, mode: str) -> Any:
    def call(state: dict[str, Any], text: str) -> tuple[float, float]:
        connection = state.get("connection") or http.client.HTTPConnection(host, port, timeout=60)
        state["connection"] = connection
        body = json.dumps({"query": text, "k": k, "mode": mode})
        connection.request("POST", "/search", body, {"Content-Type": "application/json"})
        response = connection.getresponse()
        payload = json.loads(response.read())
        if response.status != 200 or len(payload["results"][0]["hits"]) != k:
            raise RuntimeError(f"status {response.status}: {str(payload)[:120]}")
        result = payload["results"][0]
        return result["encode_ms"], result["search_ms"]

    return call


def swapping(
    host: str, port: int, bundles: list[Path], every: float, stop: threading.Event
) -> dict[str, Any]:
    """Post /reload every `every` seconds, alternating between `bundles`, until `stop`."""
    done: dict[str, Any] = {"swaps": 0, "refused": 0, "swap_s": []}
    turn = 1
    while not stop.wait(every):
        connection = http.client.HTTPConnection(host, port, timeout=120)
        started = time.perf_counter()
        connection.request("POST", "/reload", json.dumps({"bundle": str(bundles[turn % len(bundles)])}))
        response = connection.getresponse()
        response.read()
        done["swap_s"].append(round(time.perf_counter() - started, 2))
        done["swaps" if response.status == 200 else "refused"] += 1
        turn += 1
    return done


def peer(bundle: Path, k: int) -> tuple[Any, dict[str, Any]]:
    """sentence-transformers + plain ScaNN over the bundle's catalog titles, in this process."""
    import scann
    from sentence_transformers import SentenceTransformer

    from model.backbone import bundled_backbone_path

    model = SentenceTransformer(str(bundled_backbone_path()), device="cpu")
    titles = pq.read_table(bundle / "catalog.parquet", columns=["title"]).column("title").to_pylist()
    started = time.perf_counter()
    corpus = model.encode(titles, batch_size=64, normalize_embeddings=True, convert_to_numpy=True)
    encode_s = time.perf_counter() - started
    leaves = max(2, int(math.sqrt(len(titles))))
    searcher = (
        scann.scann_ops_pybind.builder(corpus, k, "dot_product")
        .tree(num_leaves=leaves, num_leaves_to_search=max(1, leaves // 10), training_sample_size=len(titles))
        .score_ah(2, anisotropic_quantization_threshold=0.2)
        .reorder(100)
        .build()
    )

    def call(state: dict[str, Any], text: str) -> None:
        vector = model.encode(
            [text], normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
        )
        searcher.search(vector[0], final_num_neighbors=k)

    return call, {"corpus": len(titles), "corpus_encode_s": round(encode_s, 1), "leaves": leaves}


def run(args: argparse.Namespace) -> dict[str, Any]:
    bundle = export_demo_bundle(Path(args.bundle))
    copy = bundle.parent / f"{bundle.name}-copy"
    if not copy.is_dir():
        shutil.copytree(bundle, copy)
    queries = demo_queries(args.queries)
    levels = [int(c) for c in args.clients.split(",")]
    process, host, port = start_server(bundle)
    figures: dict[str, Any] = {"queries": len(queries), "madr": {}, "peer": {}}
    try:
        drive(http_call(host, port, args.k, "fused"), 2, 1.0, queries)  # warm-up: first calls, page cache
        figures["server_memory_loaded"] = rss_mb(process.pid)
        for mode in ("fused", "dense"):
            for clients in levels:
                level = drive(http_call(host, port, args.k, mode), clients, args.seconds, queries)
                level.update(rss_mb(process.pid))
                figures["madr"][f"{mode}_{clients}"] = level
                print(json.dumps({mode: level}))
        stop = threading.Event()
        swaps: dict[str, Any] = {}
        swapper = threading.Thread(
            target=lambda: swaps.update(swapping(host, port, [bundle, copy], args.swap_every, stop)),
            daemon=True,
        )
        swapper.start()
        under_swap = drive(http_call(host, port, args.k, "fused"), max(levels), args.swap_seconds, queries)
        stop.set()
        swapper.join(timeout=120)
        figures["swap"] = {**under_swap, **swaps, **rss_mb(process.pid)}
    finally:
        process.terminate()
        process.wait(timeout=30)
    call, setup = peer(bundle, args.k)
    figures["peer_setup"] = setup
    drive(call, 2, 1.0, queries)
    for clients in levels:
        figures["peer"][str(clients)] = drive(call, clients, args.seconds, queries)
    for clients in levels:
        mine, theirs = figures["madr"][f"dense_{clients}"], figures["peer"][str(clients)]
        mine["vs_peer"] = round(mine["queries_per_s"] / theirs["queries_per_s"], 2)
        figures["madr"][f"fused_{clients}"]["vs_peer"] = round(
            figures["madr"][f"fused_{clients}"]["queries_per_s"] / theirs["queries_per_s"], 2
        )
    return figures


def serving_load_section(r: dict[str, Any]) -> str:
    f, c = r["figures"], r["config"]
    rows = []
    for mode in ("fused", "dense"):
        for clients in c["levels"]:
            m = f["madr"][f"{mode}_{clients}"]
            rows.append(
                [
                    f"madr serve, {mode}",
                    clients,
                    m["queries_per_s"],
                    m["p50_ms"],
                    m["p99_ms"],
                    f"{m['encoder_share']:.0%} / {m['search_share']:.0%}",
                    m["failed"],
                    m["rss_mb"],
                    m["vs_peer"],
                ]
            )
    for clients in c["levels"]:
        p = f["peer"][str(clients)]
        row = ["sentence-transformers + plain ScaNN, in-process", clients, p["queries_per_s"], p["p50_ms"]]
        rows.append([*row, p["p99_ms"], "—", p["failed"], None, 1.0])
    header = ["system", "clients", "queries/s", "p50 ms", "p99 ms", "encoder / search", "failed", "RSS MB"]
    s = f["swap"]
    note = (
        f"{f['queries']:,} demo queries round robin, k = {c['k']}, {c['seconds']} s a level, on "
        f"{r['machine']['cores']} cores shared by the clients and the server. Bundle swap under "
        f"{s['clients']} clients for {c['swap_seconds']} s: {s['swaps']} swaps ({s['refused']} refused), "
        f"{s['requests']:,} requests, {s['failed']} failed, p99 {s['p99_ms']} ms; the server held "
        f"{s['rss_mb']} MB (peak {s['peak_mb']} MB with two bundles loaded during a swap). The peer "
        f"embeds the same {f['peer_setup']['corpus']:,} titles with the bundled MiniLM and searches a "
        f"ScaNN tree of {f['peer_setup']['leaves']} leaves; it has no BM25, no filters and no HTTP."
    )
    return table([*header, "vs peer"], rows) + "\n\n" + note


def serving_load_verdicts(r: dict[str, Any] | None) -> list[tuple[str, str, str, bool | None]]:
    target = "a bundle swap under 32 concurrent clients fails no request"
    if r is None:
        return [("serving_load", target, "—", None)]
    s = r["figures"]["swap"]
    measured = (
        f"{s['failed']} failed of {s['requests']:,} during {s['swaps']} swaps at {s['clients']} clients"
    )
    return [("serving_load", target, measured, s["failed"] == 0 and s["swaps"] > 0 and s["clients"] >= 32)]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--bundle", default=str(DEFAULT_BUNDLE), help="Bundle folder (exported from runs/demo if absent)"
    )
    parser.add_argument("--clients", default="1,8,32", help="Concurrency levels")
    parser.add_argument("--seconds", type=float, default=10.0, help="Seconds a level")
    parser.add_argument("--swap_seconds", type=float, default=20.0, help="Seconds of load while swapping")
    parser.add_argument("--swap_every", type=float, default=2.0, help="Seconds between swaps")
    parser.add_argument("--queries", type=int, default=2_000, help="Demo queries to cycle through")
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--quick", action="store_true", help="2 s a level, 6 s of swapping")
    args = parser.parse_args(argv)
    if args.quick:
        args.seconds, args.swap_seconds, args.swap_every = 2.0, 6.0, 1.5
    config = {
        "command": command_line("bench.serving_load", argv),
        "levels": [int(c) for c in args.clients.split(",")],
        "seconds": args.seconds,
        "swap_seconds": args.swap_seconds,
        "swap_every": args.swap_every,
        "k": args.k,
        **shared_machine_note(),
    }
    report("serving_load_quick" if args.quick else "serving_load", config, run(args))


if __name__ == "__main__":
    main()
