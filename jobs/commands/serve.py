"""`madr export-serving` and `madr serve`: the bundle a search server loads, and a server on it."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from apache_beam.options.pipeline_options import PipelineOptions

from jobs.command_table import command
from pipelines.serve.serving_export import ExportServingConfig, export_serving
from pipelines.settings.stage_config import setting
from schemas.terminal_text import for_terminal
from serving.bundle import bundle_size
from serving.server import load_holder, make_server, read_reload_token


@command("export-serving", ExportServingConfig, show_defaults=True)
def _export_serving(config: ExportServingConfig, beam_options: PipelineOptions) -> None:
    """Write a serving bundle: the model's query encoder as an ONNX graph with its tokenizer, the index
    artifact as published (schedule, BM25), the catalog's titles and filterable aspect values, and the
    vectors selective filters score, bound by one manifest. `madr serve --bundle OUTPUT` serves it."""
    info = export_serving(config)
    sizes = ", ".join(
        f"{part} {size / 1e6:,.1f} MB" for part, size in sorted(bundle_size(config.output).items())
    )
    encoder = info["encoder"]
    bm25 = "included" if info["index"]["lexical"] else "not in the index"
    print(
        f"wrote the serving bundle {for_terminal(config.output)}: {info['index']['products']:,} products, "
        f"{encoder['dimension']}-d query encoder at {encoder['precision']} (least cosine to the model "
        f"{encoder['probe_cosine']:.6f}), BM25 {bm25}"
    )
    print(f"  {sizes}")
    print(f"serve it with: madr serve --bundle {for_terminal(config.output)}")


@dataclass(frozen=True)
class ServeConfig:
    """`madr serve`: which bundle, on which address."""

    bundle: str = setting("", "Serving bundle folder (`madr export-serving`)", required=True)
    host: str = setting("127.0.0.1", "Address to listen on (0.0.0.0: every interface)")
    port: int = setting(8080, "Port to listen on (0: any free one, printed)")
    threads: int = setting(1, "ONNX Runtime threads per request (requests run side by side)")
    workers: int | None = setting(None, "Requests encoded and searched at once (default: the cores)")
    bundles_root: str | None = setting(
        None, "Folder /reload may load bundles from (default: the folder that holds --bundle)"
    )
    reload_token_file: str | None = setting(
        None,
        "File whose first line is the token POST /reload must send (header 'Authorization: Bearer TOKEN'), "
        "so that a scheduler on another machine can swap bundles; without it /reload is accepted from this "
        "machine only. A file, not a flag's value: a command line is visible to every user of the machine",
    )

    def __post_init__(self) -> None:
        if not 0 <= self.port <= 65535:
            raise ValueError(f"--port must be in [0, 65535], got {self.port}")
        if self.threads < 1:
            raise ValueError(f"--threads must be >= 1, got {self.threads}")
        if self.workers is not None and self.workers < 1:
            raise ValueError(f"--workers must be >= 1, got {self.workers}")


@command("serve", ServeConfig, show_defaults=True)
def _serve(config: ServeConfig, beam_options: PipelineOptions) -> None:
    """Serve a bundle over HTTP (JSON): POST /search {"query": TEXT, "k": 10, "filters": {"brand": "Nike"},
    "mode": "fused" or "dense"} answers what `madr search` prints; GET /health; POST /reload {"bundle": DIR}
    swaps to another bundle (the next night's) without failing a request. Needs no torch and no Beam."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    token = read_reload_token(config.reload_token_file) if config.reload_token_file else None
    holder = load_holder(config.bundle, config.bundles_root, config.threads, config.workers, token)
    server = make_server(holder, config.host, config.port)
    host, port = server.server_address[:2]
    described = holder.current.describe()
    print(
        f"serving {for_terminal(config.bundle)} ({described['products']:,} products, "
        f"{'dense + BM25' if described['lexical'] else 'dense'}) on http://{host}:{port} (Ctrl-C stops)",
        flush=True,
    )
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
