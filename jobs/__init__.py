"""madr's commands: the command table and `madr` CLI, and the jobs that chain stages.

`command_table` lists every command of `madr`, `commands/` registers each, and `cli` is its console
script (`jobs.cli:main`); `nightly`, `demo` and `experiment` run several stages in a row
(`stage_runs`); `compare`, `explain` and `ingest_cli` are commands that run no Beam stage. `jobs`
sits at the top of the import direction: it may import every other package of madr, and none
imports it.

Importing `jobs` first checks that the `pipelines` it is about to import is the one next to it (an
impostor's code would run before `pipelines` could check anything), then imports `pipelines`, which
checks madr's other packages (`pipelines.installation`).
"""

import importlib.util
from pathlib import Path


def _check_pipelines_beside_jobs() -> None:
    expected = Path(__file__).resolve().parent.parent / "pipelines"
    spec = importlib.util.find_spec("pipelines")
    found = Path(spec.origin).resolve().parent if spec is not None and spec.origin else None
    if found != expected:
        where = "is not importable" if spec is None else f"is imported from {found or spec}"
        raise ImportError(
            f"madr's package 'pipelines' {where}, not from {expected}: another package or folder "
            "named 'pipelines' comes first on sys.path (the current directory counts). Run madr from "
            "another directory, remove it from PYTHONPATH, or install madr in its own virtual environment"
        )


_check_pipelines_beside_jobs()

import pipelines  # noqa: E402, F401  (checks madr's other packages, pipelines.installation)
