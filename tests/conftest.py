"""Shared fixtures: tiny random encoders (fast) and an offline Beam runner."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from jobs.cli import parse_command
from pipelines.embed.stage import embed_catalog
from pipelines.evaluate.stage import evaluate_retrieval

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# ONNX graphs exported by `--runtime auto` go to a folder of this test session, not ~/.cache/madr; the
# folder goes with the process (each xdist worker has its own): 712 of them had filled /tmp with 57 GB.
os.environ["MADR_CACHE"] = tempfile.mkdtemp(prefix="madr-test-cache-")
# `--precision auto` (the default) picks by the CPU's features; with none known it is fp32 on any machine,
# so that no test's figures depend on the machine CI lands on. tests/test_hardware.py sets its own.
os.environ["MADR_CPU_FLAGS"] = ""

from apache_beam.runners.portability.fn_api_runner import FnApiRunner
from transformers import BertConfig

from index_builder.partitioned import shard_dir_name
from model import new_encoder
from pipelines.index.config import IndexBuildConfig
from pipelines.index.partitioned import IndexBuildReport, build_partitioned
from pipelines.settings.options import IndexSettings
from schemas import JUDGMENT_SCHEMA, PRODUCT_SCHEMA, QUERY_SCHEMA, write_manifest

atexit.register(shutil.rmtree, os.environ["MADR_CACHE"], ignore_errors=True)


def tiny_backbone() -> dict:
    """A 2-layer, 32-wide random BERT over the real MiniLM wordpiece vocabulary."""
    return BertConfig(
        vocab_size=30522,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=512,
    ).to_dict()


def save_tiny_uhd_model(directory: Path, dimensions: int, winners: int) -> Path:
    """A tiny random UHD model saved in `directory` with its manifest, as build-sparse-index verifies it."""
    with torch.random.fork_rng():  # the same random model every run, the caller's generator untouched
        torch.manual_seed(13)
        encoder, tokenizer = new_encoder(
            "uhd", pretrained=False, backbone=tiny_backbone(), dimensions=dimensions, winners=winners,
            model_id="uhd-tiny", model_version="1",
        )  # fmt: skip
    encoder.save_pretrained(directory, tokenizer)
    write_manifest(directory, "madr-model", {"variant": "uhd", "model_version": "1"})
    return directory


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A saved, untrained tiny BiBERT directory (projection 16), with its manifest like `madr train`'s.

    Its random weights are seeded, not drawn from whatever the global generator holds: with the suite
    split over two processes, the tests run before the fixture vary, and one draw gave int8 vectors
    within 1e-6 of fp32 (tests/test_embed_pipeline.py's calibration test failed once in four runs)."""
    directory = tmp_path_factory.mktemp("tiny-bibert")
    with torch.random.fork_rng():
        torch.manual_seed(46)
        encoder, tokenizer = new_encoder(
            "bibert", pretrained=False, backbone=tiny_backbone(), projection_dim=16, model_version="test"
        )
    encoder.save_pretrained(directory, tokenizer)
    # Stages verify a model against its manifest before using it (pipelines.storage.verify).
    write_manifest(directory, "madr-model", {"variant": "bibert", "model_version": "test"})
    return directory


@pytest.fixture(scope="session")
def tiny_backbone_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A backbone folder like the bundled MiniLM's, holding a tiny random BERT and the real vocabulary."""
    from transformers import BertModel

    from model.backbone import load_tokenizer

    directory = tmp_path_factory.mktemp("tiny-backbone")
    BertModel(BertConfig.from_dict(tiny_backbone()), add_pooling_layer=False).save_pretrained(directory)
    load_tokenizer().save_pretrained(str(directory))
    return directory


@pytest.fixture
def local_runner() -> FnApiRunner:
    """Beam's batch engine, used directly so tests never try to download the Prism runner."""
    return FnApiRunner()


def index_embeddings(embeddings: str | Path, output: str | Path, depth: int = 10_000) -> IndexBuildReport:
    """`madr build-index` (one shard, the default settings but `depth`) of `embeddings` into `output`."""
    config = IndexBuildConfig(
        embeddings=str(embeddings), output=str(output), index=IndexSettings(depth=depth)
    )
    return build_partitioned(config)


def embed_and_evaluate(store: dict[str, str], model: Path, output: Path, metrics: str, *flags: str) -> dict:
    """`madr embed` of store["products"] beside `output`, then `madr evaluate` of it exactly with `flags`."""

    embeddings = output.parent / f"{output.name}-embeddings"
    embed_catalog(
        *parse_command(
            "embed", ["--products", store["products"], "--model", str(model), "--output", str(embeddings)]
        )
    )
    argv = ["--queries", store["queries"], "--judgments", store["judgments"], "--model", str(model)]
    argv += ["--output", str(output), "--searcher", "exact", "--embeddings", str(embeddings)]
    return evaluate_retrieval(*parse_command("evaluate", [*argv, "--metrics", metrics, *flags]))


# Six kinds of product, two brands each, in twelve products: product i is of kind i % 6.
# The folder of the one shard `madr build-index` builds by default: a "madr-scann-index" artifact.
ONE_SHARD = shard_dir_name(0, 1)

STORE_ITEMS = ("espresso machine", "chef knife", "wool socks", "running shoes", "desk lamp", "down comforter")


def write_judged_store(
    root: Path, products: list[dict], said: list[str], extra_queries: tuple[dict, ...] = ()
) -> dict[str, str]:
    """products/queries/judgments Parquet files in `root`: test query j (`said[j]`) asks for kind j, so
    product i is graded 3 for it when i % 6 == j, else 0; `extra_queries` (other splits) are unjudged."""
    queries = [
        {"query_id": f"q{j}", "text": text, "aspects": None, "split": "test"} for j, text in enumerate(said)
    ]
    judgments = [
        {"query_id": f"q{j}", "product_id": f"p{i}", "grade": 3 if i % 6 == j else 0, "label": None}
        for j in range(len(said))
        for i in range(len(products))
    ]
    paths = {name: str(root / f"{name}.parquet") for name in ("products", "queries", "judgments")}
    pq.write_table(pa.Table.from_pylist(products, schema=PRODUCT_SCHEMA), paths["products"])
    pq.write_table(pa.Table.from_pylist([*queries, *extra_queries], schema=QUERY_SCHEMA), paths["queries"])
    pq.write_table(pa.Table.from_pylist(judgments, schema=JUDGMENT_SCHEMA), paths["judgments"])
    return paths
