"""Runners that lose records are refused: by name (Beam's own DaskRunner), by the probe pipeline (any
runner madr has not verified), and after the fact (a stage whose files hold fewer rows than it counted)."""

from __future__ import annotations

from pathlib import Path

import apache_beam as beam
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.runners.portability.fn_api_runner import FnApiRunner

from jobs.cli import main
from pipelines.cluster.probe import EXPECTED, RunnerRefused, probe_counts, refuse_if_lossy
from pipelines.runner import make_pipeline
from pipelines.storage.stage_manifests import StageOutputMismatch, write_stage_manifest
from schemas.manifest import MANIFEST_FILE


def test_the_local_runner_passes_the_probe_branch_by_branch() -> None:
    assert probe_counts(FnApiRunner(), PipelineOptions([])) == EXPECTED


def test_an_unverified_runner_is_probed_before_its_pipeline_is_made(caplog: pytest.LogCaptureFixture) -> None:
    # Beam's older bundle-based DirectRunner: not among the verified runners, and it loses nothing.
    with caplog.at_level("INFO", logger="pipelines.cluster.probe"):
        pipeline = make_pipeline(PipelineOptions(["--runner", "BundleBasedDirectRunner"]))
    assert isinstance(pipeline, beam.Pipeline)
    assert "--runner BundleBasedDirectRunner passed madr's probe" in caplog.text


def test_beams_own_dask_runner_fails_the_probe_naming_what_it_lost() -> None:
    distributed = pytest.importorskip("distributed", reason="the Dask runner needs the dask extra")
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
    ) as cluster:
        name = "apache_beam.runners.dask.dask_runner.DaskRunner"
        options = PipelineOptions(["--runner", name, "--dask_client_address", cluster.scheduler_address])
        # The probe itself, not the refusal by name (`pipelines.runner.refuse_unusable_runner`).
        with pytest.raises(RunnerRefused, match="lost or repeated records in madr's probe") as refused:
            refuse_if_lossy(name, options)
    assert "(expected 4)" in str(refused.value) or "(expected 7)" in str(refused.value)


def test_a_stage_whose_files_hold_fewer_rows_than_it_counted_is_not_published(tmp_path: Path) -> None:
    pq.write_table(pa.table({"product_id": ["a", "b", "c"]}), tmp_path / "embeddings-00000-of-00001.parquet")
    with pytest.raises(StageOutputMismatch, match=r"say 2,000 rows were written, but .* holds 3"):
        write_stage_manifest(str(tmp_path), "madr-embeddings", {}, rows={"embeddings*.parquet": 2_000})
    assert not (tmp_path / MANIFEST_FILE).exists()
    write_stage_manifest(str(tmp_path), "madr-embeddings", {}, rows={"embeddings*.parquet": 3})
    assert (tmp_path / MANIFEST_FILE).exists()


@pytest.mark.parametrize(
    "name", ["DaskRunner", "daskrunner", "apache_beam.runners.dask.dask_runner.DaskRunner"]
)
def test_beams_own_dask_runner_is_refused_by_name_with_the_reason(name: str) -> None:
    with pytest.raises(RunnerRefused, match=r"loses records without an error.*--runner dask"):
        make_pipeline(PipelineOptions(["--runner", name]))


def test_the_cli_refuses_beams_own_dask_runner_in_one_line_before_reading_anything(tmp_path, capsys) -> None:
    argv = ["embed", "--products", "x.parquet", "--model", "m", "--output", str(tmp_path / "out")]
    assert main([*argv, "--runner", "DaskRunner"]) == 2
    err = capsys.readouterr().err.strip()
    assert "Beam's own DaskRunner, which loses records" in err and "--runner dask" in err and "\n" not in err


def test_runner_dask_without_dask_installed_is_one_line_naming_the_extra(
    tmp_path, capsys, monkeypatch
) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "distributed" else real(name, *a)
    )
    argv = ["embed", "--products", "x.parquet", "--model", "m", "--output", str(tmp_path / "out")]
    assert main([*argv, "--runner", "dask"]) == 2
    assert "pip install 'madr[dask]'" in capsys.readouterr().err
