"""Failures of the engine a pipeline runs on, told apart from madr's bugs and from bad input.

A Dask cluster that loses its workers again and again ends a job with dask's `KilledWorker`; a worker
that runs out of memory with `MemoryError` (or its death, reported as a lost worker). Neither is a bug in
madr nor the input's fault, and a traceback says nothing a user can act on: `madr` ends such a job with
one line naming the runner, the stage when it is known, and the cause (`jobs.cli_errors`), exit code 1.
"""

from __future__ import annotations

# Exception type names of dask.distributed that mean the cluster, not the job, failed (no import of
# distributed: it is an optional extra).
_DASK_LOST = frozenset({"KilledWorker", "CommClosedError", "FutureCancelledError", "CancelledError"})


class EngineFailed(RuntimeError):
    """The runner failed under a stage; the message names the runner, the stage and the cause."""


def engine_failure(error: BaseException) -> str | None:
    """What failed, in words, when `error` is the engine's (workers lost, out of memory); else None."""
    if isinstance(error, EngineFailed):
        return str(error)
    kind, module = type(error).__name__, type(error).__module__
    detail = " ".join(str(error).split())[:300]
    if kind in _DASK_LOST and (module.startswith(("distributed", "dask", "asyncio", "concurrent"))):
        return (
            f"the Dask cluster lost its workers ({kind}: {detail}): a task was retried on other workers "
            "until dask gave up, most often because a worker ran out of memory; give the workers more "
            "memory or fewer threads each, check their logs, and rerun (a nightly resumes from its "
            "finished stages)"
        )
    if isinstance(error, MemoryError):
        return (
            "out of memory (MemoryError): run on a machine or workers with more memory, or split the work "
            "finer (smaller batches, more shards)"
        )
    return None


def in_stage(error: BaseException, stage: str) -> BaseException:
    """`error` as an EngineFailed naming `stage` when it is the engine's; else `error` itself."""
    failure = engine_failure(error)
    if failure is None or isinstance(error, EngineFailed):
        return error
    return EngineFailed(f"in {stage}: {failure}")


__all__ = ["EngineFailed", "engine_failure", "in_stage"]
