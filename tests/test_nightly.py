"""The nightly job: incremental runs, idempotent reruns, LATEST moves only after success."""

from __future__ import annotations

import json

import pytest

from jobs.nightly import NightlyJob, read_latest, run_nightly
from tests.test_embed_pipeline import catalog, write_catalog, write_test_queries


@pytest.fixture
def evaluation_files(tmp_path) -> tuple[str, str]:
    return write_test_queries(tmp_path)


def _job(
    tmp_path, model, products: str, run_id: str, evaluation: tuple[str, str] | None = None
) -> NightlyJob:
    queries, judgments = evaluation or (None, None)
    return NightlyJob(
        catalog=products,
        model=str(model),
        out=str(tmp_path / "nightly"),
        run_id=run_id,
        queries=queries,
        judgments=judgments,
        max_k=50,
    )


def test_two_nights_reuse_rerun_and_crash(tmp_path, tiny_model_dir, evaluation_files) -> None:
    monday = catalog(40)
    first = run_nightly(
        _job(
            tmp_path, tiny_model_dir, write_catalog(tmp_path / "mon.parquet", monday), "mon", evaluation_files
        )
    )
    assert first.previous_run_id is None and first.stages["embed"]["products_embedded"] == 40
    assert read_latest(str(tmp_path / "nightly"))["run_id"] == "mon"
    assert "recall@10" in first.stages["evaluate"]

    tuesday = [dict(p) for p in monday]
    tuesday[0]["title"] = "changed tonight"
    tuesday[1]["title"] = "changed tonight too"  # 2 of 40 = 5% changed
    tuesday_path = write_catalog(tmp_path / "tue.parquet", tuesday)
    second = run_nightly(_job(tmp_path, tiny_model_dir, tuesday_path, "tue", evaluation_files))
    assert second.previous_run_id == "mon"
    assert (second.stages["embed"]["products_reused"], second.stages["embed"]["products_embedded"]) == (38, 2)
    latest = read_latest(str(tmp_path / "nightly"))
    assert latest["run_id"] == "tue" and latest["previous_run_id"] == "mon"

    again = run_nightly(_job(tmp_path, tiny_model_dir, tuesday_path, "tue", evaluation_files))
    assert again.skipped == ["all"] and read_latest(str(tmp_path / "nightly"))["run_id"] == "tue"

    # Wednesday crashes in evaluation (missing judgments file): LATEST must stay on Tuesday.
    broken = ("/nonexistent/queries.parquet", "/nonexistent/judgments.parquet")
    with pytest.raises(Exception):  # noqa: B017 - Beam wraps the I/O error in its own exception types
        run_nightly(_job(tmp_path, tiny_model_dir, tuesday_path, "wed", broken))
    assert read_latest(str(tmp_path / "nightly"))["run_id"] == "tue"
    assert not (tmp_path / "nightly" / "wed" / "manifest.json").exists()
    # The rerun with the inputs fixed skips the finished stages and publishes.
    fixed = run_nightly(_job(tmp_path, tiny_model_dir, tuesday_path, "wed", evaluation_files))
    assert set(fixed.skipped) == {"embed", "index"} and "evaluate" in fixed.stages
    assert read_latest(str(tmp_path / "nightly"))["run_id"] == "wed"
    run_manifest = json.loads((tmp_path / "nightly" / "wed" / "manifest.json").read_text())
    assert run_manifest["kind"] == "madr-nightly-run" and run_manifest["previous_run_id"] == "tue"


def test_a_run_id_must_be_a_plain_name(tmp_path) -> None:
    for bad in ("", "a/b", "LATEST"):
        with pytest.raises(ValueError, match="run id"):
            NightlyJob(catalog="c", model="m", out=str(tmp_path), run_id=bad)
