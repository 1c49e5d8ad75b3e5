"""The nightly job's guard rails: no empty or shrunk catalog published, and a lost shard named as lost."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path

import pytest

from jobs.cli import parse_command
from pipelines.embed.stage import embed_catalog
from pipelines.nightly.latest import LATEST, read_latest
from pipelines.nightly.publish_guard import CatalogSizeCheck, PublishRefused
from pipelines.nightly.run import NightlyJob, run_nightly
from pipelines.settings.options import IndexSettings
from pipelines.storage.stage_manifests import read_stage_manifest
from schemas import ArtifactError
from tests.test_embed_pipeline import catalog, write_catalog


def _job(tmp_path: Path, model: Path, products: str, run_id: str, **flags: object) -> NightlyJob:
    return NightlyJob(
        catalog=products,
        model=str(model),
        out=str(tmp_path / "nightly"),
        run_id=run_id,
        index=IndexSettings(depth=50),
        **flags,
    )


def _shards(folder: Path) -> list[Path]:
    return sorted(folder.glob("embeddings*.parquet"))


def test_the_shrink_threshold_and_what_the_flag_allows() -> None:
    assert CatalogSizeCheck("tue", 80, "mon", 100).refusal() is None  # 20% gone: at the default limit
    shrunk = CatalogSizeCheck("tue", 79, "mon", 100).refusal()
    assert shrunk is not None and "from 100 products (run mon) to 79" in shrunk and "--allow_shrink" in shrunk
    assert CatalogSizeCheck("tue", 79, "mon", 100, max_shrink=0.5).refusal() is None
    assert CatalogSizeCheck("tue", 1, "mon", 100, allow_shrink=True).refusal() is None
    assert (
        CatalogSizeCheck("mon", 5, None, None).refusal() is None
    )  # a first night has nothing to shrink from
    assert CatalogSizeCheck("tue", 500, "mon", 100).refusal() is None  # growth is fine
    # An empty catalog has nothing to index: the flag does not publish it.
    empty = CatalogSizeCheck("tue", 0, "mon", 100, allow_shrink=True).refusal()
    assert empty is not None and "0 products" in empty and "mon: 100" in empty and "--allow_shrink" in empty
    unknown = CatalogSizeCheck("tue", 50, "mon", None, unknown="no manifest").refusal()
    assert unknown is not None and "no manifest" in unknown and "--allow_shrink" in unknown
    with pytest.raises(ValueError, match="--max_shrink"):
        NightlyJob(catalog="c", model="m", out="o", run_id="r", max_shrink=1.5)


def test_a_shrunk_catalog_is_refused_then_published_with_allow_shrink(tmp_path, tiny_model_dir) -> None:
    monday = write_catalog(tmp_path / "mon.parquet", catalog(40))
    run_nightly(_job(tmp_path, tiny_model_dir, monday, "mon"))
    tuesday = write_catalog(tmp_path / "tue.parquet", catalog(10))  # 75% of the catalog gone

    with pytest.raises(PublishRefused) as refused:
        run_nightly(_job(tmp_path, tiny_model_dir, tuesday, "tue"))
    message = str(refused.value)
    assert "\n" not in message
    assert "from 40 products (run mon) to 10" in message and "--allow_shrink" in message
    assert read_latest(str(tmp_path / "nightly"))["run_id"] == "mon"
    assert not (tmp_path / "nightly" / "tue" / "index").exists()  # refused before the index is built

    published = run_nightly(_job(tmp_path, tiny_model_dir, tuesday, "tue", allow_shrink=True))
    assert published.skipped == ["embed"]  # the refused night's embeddings are picked up, not redone
    latest = read_latest(str(tmp_path / "nightly"))
    assert latest["run_id"] == "tue" and latest["products"] == 10
    run_manifest = json.loads((tmp_path / "nightly" / "tue" / "manifest.json").read_text())
    assert run_manifest["catalog_check"] == {
        "products": 10,
        "previous_products": 40,
        "shrink": 0.75,
        "max_shrink": 0.2,
        "allow_shrink": True,
    }


def test_an_empty_catalog_is_refused(tmp_path, tiny_model_dir) -> None:
    empty = write_catalog(tmp_path / "empty.parquet", [])
    with pytest.raises(PublishRefused, match="refusing to publish run mon: its catalog has 0 products"):
        run_nightly(_job(tmp_path, tiny_model_dir, empty, "mon", allow_shrink=True))
    assert not (tmp_path / "nightly" / LATEST).exists()
    assert not (tmp_path / "nightly" / "mon" / "index").exists()


def test_a_missing_shard_of_tonights_embeddings_is_named_and_the_stage_run_again(
    tmp_path, tiny_model_dir, caplog
) -> None:
    """A crash after embedding, then a lost shard: the stage is not finished (its manifest lists a file
    that is gone), so the rerun names the file and embeds again, rather than skip it and fail later."""
    products = write_catalog(tmp_path / "mon.parquet", catalog(40))
    embeddings = tmp_path / "nightly" / "mon" / "embeddings"
    embed_catalog(
        *parse_command(
            "embed", ["--products", products, "--model", str(tiny_model_dir), "--output", str(embeddings)]
        )
    )
    lost = _shards(embeddings)[0]
    lost.unlink()
    with pytest.raises(ArtifactError, match=re.escape(lost.name)):
        read_stage_manifest(str(embeddings), "madr-embeddings")
    with caplog.at_level(logging.WARNING, logger="pipelines.nightly.run"):
        report = run_nightly(_job(tmp_path, tiny_model_dir, products, "mon"))
    assert any(lost.name in r.getMessage() and "replacing" in r.getMessage() for r in caplog.records)
    assert report.stages["embed"]["products_embedded"] == 40 and "embed" not in report.skipped
    assert read_latest(str(tmp_path / "nightly"))["run_id"] == "mon"
    read_stage_manifest(str(embeddings), "madr-embeddings")  # whole again


def test_a_missing_shard_of_the_previous_run_is_named_and_nothing_reused(
    tmp_path, tiny_model_dir, caplog
) -> None:
    products = write_catalog(tmp_path / "mon.parquet", catalog(40))
    run_nightly(_job(tmp_path, tiny_model_dir, products, "mon"))
    lost = _shards(tmp_path / "nightly" / "mon" / "embeddings")[0]
    lost.unlink()
    with caplog.at_level(logging.WARNING, logger="pipelines.nightly.run"):
        report = run_nightly(_job(tmp_path, tiny_model_dir, products, "tue"))
    assert any(
        lost.name in record.getMessage() and "missing" in record.getMessage() for record in caplog.records
    )
    # Every product embedded again from tonight's catalog; the night is whole and published.
    assert (report.stages["embed"]["products_reused"], report.stages["embed"]["products_embedded"]) == (0, 40)
    assert read_latest(str(tmp_path / "nightly"))["run_id"] == "tue"
