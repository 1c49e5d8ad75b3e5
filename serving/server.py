"""`madr serve`: an HTTP JSON server on a serving bundle alone (ONNX Runtime, ScaNN, bm25s; no torch or Beam).

    GET  /health    200 with the bundle served (its digest, products, precision), requests and swaps so far
    POST /search    {"query": "red running shoes", "k": 10, "filters": {"brand": "Nike"}, "mode": "fused"}
                    ("queries": [...] for several; "mode": "dense" skips BM25) -> {"results": [...]}
    POST /reload    {"bundle": "PATH"} (default: the --bundle folder again): the new bundle is verified and
                    loaded beside the one serving, then swapped in; a request is answered by the bundle it
                    started on, so none fails during a swap. A bundle that fails verification is refused
                    (409) and the old one keeps serving. PATH must lie inside --bundles_root. Accepted from
                    this machine only, or from anywhere with the header `Authorization: Bearer TOKEN` where
                    --reload_token_file gives the token (403 otherwise: a reload costs a bundle's load).

Every connection is read by one thread of a `ThreadingHTTPServer`; at most `--workers` requests (default:
the cores) encode and search at once, each with one thread for the encoder and the index, and the others
wait their turn: requests spread over the cores instead of fighting over them.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import logging
import os
import threading
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from schemas.manifest import ArtifactError
from schemas.names import UnsafeName, require_inside
from serving.bundle import ServingBundle, open_bundle
from serving.search import answer_queries

LOGGER = logging.getLogger(__name__)
# A request body larger than this is refused: a search request is a few queries and filters.
MAX_BODY_BYTES = 1 << 20
MAX_QUERIES_PER_REQUEST = 256
MAX_K = 10_000
# Connections waiting to be accepted: socketserver's default of 5 reset clients when 32 connected at once.
LISTEN_BACKLOG = 256


@dataclass
class BundleHolder:
    """The bundle being served, swapped whole under a lock; readers take the reference once per request."""

    current: ServingBundle
    bundles_root: Path
    threads: int = 1
    # Searches answered at once; the other requests wait their turn. Past the cores, more at once only
    # shares them, and 32 threads contending for the interpreter took a 1 ms search to 950 ms.
    workers: int = 2
    requests: int = 0
    failures: int = 0
    swaps: int = 0
    # What POST /reload must send as `Authorization: Bearer TOKEN`; None: /reload from this machine only.
    reload_token: str | None = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _loading: threading.Lock = field(default_factory=threading.Lock, repr=False)
    # Held by a request while it encodes and searches: `workers` at once.
    working: threading.BoundedSemaphore = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.working = threading.BoundedSemaphore(self.workers)

    def take(self) -> ServingBundle:
        with self._lock:
            self.requests += 1
            return self.current

    def failed(self) -> None:
        with self._lock:
            self.failures += 1

    def swap_to(self, directory: str | None) -> ServingBundle:
        """Load and verify the bundle at `directory` (default: the one served, read again) and serve it."""
        target = Path(directory) if directory else self.current.root
        require_inside(str(self.bundles_root), str(target), "the bundle to reload")
        with self._loading:  # one load at a time: two nights' bundles never race for the swap
            bundle = open_bundle(target, self.threads)
            single_threaded(bundle)
            with self._lock:
                self.current = bundle
                self.swaps += 1
        LOGGER.info("now serving %s", target)
        return bundle


def reload_refusal(client_host: str, authorization: str | None, token: str | None) -> str | None:
    """Why a /reload from `client_host` with this `Authorization` header is refused; None: it may reload.

    With a token, only a request that sends it (compared in constant time), from anywhere; without one,
    only a request from the loopback address: anyone who can reach the port could otherwise make the
    server load bundles again and again."""
    if token is not None:
        given = (authorization or "").encode("utf-8")
        if hmac.compare_digest(given, f"Bearer {token}".encode()):
            return None
        return "/reload needs the header 'Authorization: Bearer TOKEN' with the token of --reload_token_file"
    try:
        loopback = ipaddress.ip_address(client_host).is_loopback
    except ValueError:
        loopback = False
    if loopback:
        return None
    return "/reload is accepted from this machine only; give --reload_token_file to accept it from elsewhere"


def read_reload_token(path: str | Path) -> str:
    """The token in `path` (its first line); ValueError naming the file when it holds none."""
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    token = lines[0].strip() if lines else ""
    if len(token) < 16:
        raise ValueError(
            f"--reload_token_file {path}: its first line must be a token of 16 or more characters"
        )
    return token


def single_threaded(bundle: ServingBundle) -> None:
    """Search each request on one thread: a server's concurrency is its requests."""
    shards = getattr(bundle.index, "shards", None) or (bundle.index,)
    for shard in shards:
        if hasattr(shard, "set_search_threads"):
            shard.set_search_threads(1)


def parse_filters(value: Any) -> list[tuple[str, str]]:
    """{"brand": "Nike"} or [["brand", "Nike"], ...] as (aspect, value) pairs, aspect case-folded."""
    pairs = value.items() if isinstance(value, dict) else value or []
    parsed = []
    for pair in pairs:
        if not (isinstance(pair, list | tuple) and len(pair) == 2 and all(isinstance(p, str) for p in pair)):
            raise ValueError(f'a filter is an aspect and a value, e.g. {{"brand": "Nike"}}; got {pair!r}')
        aspect, wanted = pair[0].strip().casefold(), pair[1].strip()
        if not aspect or not wanted:
            raise ValueError(f"a filter needs an aspect and a value, got {pair!r}")
        parsed.append((aspect, wanted))
    return parsed


def search_request(holder: BundleHolder, body: dict[str, Any]) -> dict[str, Any]:
    """The /search answer to a parsed request body; ValueError for a request that cannot be answered."""
    texts = body.get("queries", [body["query"]] if "query" in body else None)
    if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
        raise ValueError('give "query": TEXT or "queries": [TEXT, ...]')
    if len(texts) > MAX_QUERIES_PER_REQUEST:
        raise ValueError(f"at most {MAX_QUERIES_PER_REQUEST} queries a request, got {len(texts)}")
    k = body.get("k", 10)
    if not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= MAX_K:
        raise ValueError(f'"k" must be an integer in [1, {MAX_K}], got {k!r}')
    mode = body.get("mode", "fused")
    if mode not in ("fused", "dense"):
        raise ValueError(f'"mode" is "fused" or "dense", got {mode!r}')
    filters = parse_filters(body.get("filters"))
    with holder.working:
        bundle = holder.take()
        answers = answer_queries(bundle, texts, k, filters, fused=mode == "fused")
    return {"bundle": bundle.manifest.get("files_digest"), "results": [a.to_dict() for a in answers]}


class SearchHandler(BaseHTTPRequestHandler):
    """One request; `holder` is set on the class `make_server` builds."""

    holder: BundleHolder
    protocol_version = "HTTP/1.1"  # keep-alive: a load test's clients reuse their connections
    # Headers and body go out as two writes: with Nagle's algorithm the second waited for the client's
    # delayed ACK, 40 ms a request (52 ms at one client against 7.5 ms of encoding and search).
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:
        LOGGER.debug("%s " + format, self.address_string(), *args)

    def _reply(self, status: HTTPStatus, payload: dict[str, Any]) -> None:
        data = json.dumps(payload, ensure_ascii=False).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _body(self) -> dict[str, Any]:
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY_BYTES:
            raise ValueError(f"the request body is {length:,} bytes; at most {MAX_BODY_BYTES:,}")
        body = json.loads(self.rfile.read(length) or b"{}")
        if not isinstance(body, dict):
            raise ValueError("the request body is a JSON object")
        return body

    def do_GET(self) -> None:
        if self.path != "/health":
            self._reply(
                HTTPStatus.NOT_FOUND, {"error": f"no {self.path}: GET /health, POST /search or /reload"}
            )
            return
        holder = self.holder
        status = {"status": "ok", **holder.current.describe()}
        self._reply(HTTPStatus.OK, {**status, "requests": holder.requests, "swaps": holder.swaps})

    def do_POST(self) -> None:
        try:
            body = self._body()
            if self.path == "/search":
                self._reply(HTTPStatus.OK, search_request(self.holder, body))
            elif self.path == "/reload":
                self._reload(body)
            else:
                self._reply(HTTPStatus.NOT_FOUND, {"error": f"no {self.path}: POST /search or /reload"})
        except (ValueError, KeyError, TypeError) as error:  # json.JSONDecodeError is a ValueError
            self.holder.failed()
            self._reply(HTTPStatus.BAD_REQUEST, {"error": str(error)})

    def _reload(self, body: dict[str, Any]) -> None:
        refusal = reload_refusal(
            self.client_address[0], self.headers.get("Authorization"), self.holder.reload_token
        )
        if refusal is not None:
            self._reply(HTTPStatus.FORBIDDEN, {"error": refusal})
            return
        try:
            bundle = self.holder.swap_to(body.get("bundle"))
        except (ArtifactError, UnsafeName, OSError) as error:
            self._reply(
                HTTPStatus.CONFLICT, {"error": f"bundle not swapped, still serving the last: {error}"}
            )
            return
        self._reply(HTTPStatus.OK, {"status": "swapped", **bundle.describe()})


def make_server(holder: BundleHolder, host: str, port: int) -> ThreadingHTTPServer:
    """A threading HTTP server answering from `holder` (port 0: any free one, `server_address` says which)."""
    handler = type("BoundSearchHandler", (SearchHandler,), {"holder": holder})
    server_class = type("SearchServer", (ThreadingHTTPServer,), {"request_queue_size": LISTEN_BACKLOG})
    server = server_class((host, port), handler)
    server.daemon_threads = True
    return server


def available_cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def load_holder(
    bundle: str | Path,
    bundles_root: str | Path | None = None,
    threads: int = 1,
    workers: int | None = None,
    reload_token: str | None = None,
) -> BundleHolder:
    """The first bundle, verified and loaded, in a holder whose reloads stay inside `bundles_root`
    (default: the folder that holds the bundle) and need `reload_token` (None: from this machine only)."""
    served = open_bundle(bundle, threads)
    single_threaded(served)
    root = Path(bundles_root) if bundles_root else Path(bundle).resolve().parent
    return BundleHolder(served, root, threads, workers or available_cores(), reload_token=reload_token)
