"""The flags of `--runner dask` (`pipelines.cluster.dask_runner`), declared where every Beam stage sees them.

Apart from the runner, which imports dask: a command given `--dask_workers 4` must accept the flag (and
list it) on a machine where it then says that dask is not installed, not that the flag is unknown.
"""

from __future__ import annotations

import argparse

from apache_beam.options.pipeline_options import PipelineOptions


class DaskClusterOptions(PipelineOptions):
    """Where `--runner dask` runs: a scheduler's address, or a local cluster of worker processes."""

    @classmethod
    def _add_argparse_args(cls, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--dask_address",
            default=None,
            help="The dask.distributed scheduler to run on (tcp://host:8786); default: a local cluster "
            "of --dask_workers processes, started for the command and stopped after it (madr nightly "
            "starts one for all its stages)",
        )
        parser.add_argument(
            "--dask_workers",
            type=int,
            default=2,
            help="Worker processes of the local cluster when no --dask_address is given (default: 2)",
        )
