"""The nightly through Beam's PortableRunner, with SDK workers in processes of their own: the protocol
Flink, Spark and Dataflow run Python DoFns with (docs/SCALING.md says how to point it at them).

The test starts what a cluster would provide: Beam's Python job service
(`apache_beam.runners.portability.local_job_service_main`) and a pool of SDK workers
(`apache_beam.runners.worker.worker_pool_main`), reached by `--environment_type EXTERNAL`. The job
service receives the pipeline as a proto, and the workers unpickle madr's DoFns and run them; nothing
of the driver's process is shared.
"""

from __future__ import annotations

import dataclasses
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import apache_beam as beam
import numpy as np
import pytest
from apache_beam.options.pipeline_options import PipelineOptions

from index_builder import open_index
from pipelines.nightly.run import NightlyJob, run_nightly
from pipelines.runner import make_pipeline
from pipelines.settings.options import IndexSettings
from tests.test_dask_stages import _rows
from tests.test_embed_pipeline import catalog, write_catalog, write_test_queries


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _wait_for(port: int, process: subprocess.Popen, what: str) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{what} exited with {process.returncode}")
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise RuntimeError(f"{what} did not listen on {port} within 60 s")


@pytest.fixture(scope="module")
def portable_flags() -> Iterator[list[str]]:
    """A job service and an SDK worker pool, each its own process; the flags that reach them."""
    job_port, pool_port = _free_port(), _free_port()
    started = []
    try:
        for module, flag, port in (
            ("apache_beam.runners.worker.worker_pool_main", f"--service_port={pool_port}", pool_port),
            ("apache_beam.runners.portability.local_job_service_main", f"--port={job_port}", job_port),
        ):
            process = subprocess.Popen(
                [sys.executable, "-m", module, flag],
                # The pool starts each SDK worker as `python -c ...`: this interpreter's, where madr is.
                env={
                    **os.environ,
                    "PATH": f"{os.path.dirname(sys.executable)}{os.pathsep}{os.environ['PATH']}",
                },
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            started.append(process)
            _wait_for(port, process, module)
        yield [
            "--runner",
            "PortableRunner",
            "--job_endpoint",
            f"localhost:{job_port}",
            "--environment_type",
            "EXTERNAL",
            "--environment_config",
            f"localhost:{pool_port}",
        ]
    finally:
        for process in started:
            process.terminate()
            process.wait(timeout=30)


def test_the_dofns_run_in_sdk_worker_processes_of_their_own(portable_flags, tmp_path) -> None:
    pipeline = make_pipeline(PipelineOptions(portable_flags))
    _ = (
        pipeline
        | beam.Create(range(4))
        | beam.Map(lambda _: os.getpid())
        | beam.io.WriteToText(str(tmp_path / "pids"))
    )
    pipeline.run().wait_until_finish()
    pids = {int(line) for path in tmp_path.glob("pids*") for line in path.read_text().split()}
    assert pids and os.getpid() not in pids


def test_the_nightly_on_the_portable_runner_equals_the_local_one(
    portable_flags, tiny_model_dir, tmp_path
) -> None:
    products = write_catalog(tmp_path / "catalog.parquet", catalog(20), row_group_size=6)
    queries, judgments = write_test_queries(tmp_path)
    job = NightlyJob(
        catalog=products,
        model=str(tiny_model_dir),
        out=str(tmp_path / "local"),
        run_id="night",
        queries=queries,
        judgments=judgments,
        index=IndexSettings(depth=20),
    )
    run_nightly(job)
    run_nightly(dataclasses.replace(job, out=str(tmp_path / "portable"), beam_args=tuple(portable_flags)))
    runs = {name: tmp_path / name / "night" for name in ("local", "portable")}
    local, portable = (_rows(runs[name] / "embeddings", "embeddings") for name in runs)
    assert [row["product_id"] for row in portable] == [row["product_id"] for row in local]
    np.testing.assert_allclose(
        np.asarray([row["embedding"] for row in portable]),
        np.asarray([row["embedding"] for row in local]),
        atol=1e-6,
    )
    indexes = [open_index(runs[name] / "index") for name in runs]
    assert list(indexes[0].ids) == list(indexes[1].ids)
    metrics = [json.loads((runs[name] / "eval" / "metrics.json").read_text())["metrics"] for name in runs]
    assert metrics[1] == metrics[0]
    assert Path(runs["portable"] / "index" / "shard-00000-of-00001").is_dir()
