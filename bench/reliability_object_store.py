"""The reliability case of a gs:// root (issue 50): two `madr nightly` processes started together on one
bucket root, N times, against the GCS emulator of the tests with GCS's generation preconditions
(`tests/gcs_emulator_cas.py`).

What a local root gets from `flock` and a rename, a bucket root must get from compare-and-swap on object
generations (`pipelines/storage/object_store.py`): one of the two nightlies holds the root's lock object and
publishes, the other is refused; LATEST parses and names a finished run; no lock or staging object is
left; the refused night, run again alone, publishes; and both nights hold what a run alone holds.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np

from bench.reliability_kit import REPO, Fixture, Outcome, nightly_argv, rows_in
from pipelines.io.parquet_reading import read_embeddings

BUCKET = "madr-reliability"
# The second night is refused by the root's lock object as it starts, before doing any work (without the
# lock it would run whole and be refused only at publication, by the LATEST compare-and-swap).
LOCK_REFUSALS = ("is being written by", "took the lock")


def _run(fixture: Fixture, root: str, run_id: str, env: dict[str, str]) -> subprocess.Popen:
    argv = [sys.executable, "-m", "tests.gcs_cli", "--log_level", "ERROR"]
    return subprocess.Popen(
        [*argv, *nightly_argv(fixture, fixture.products, root, run_id)],  # type: ignore[arg-type]
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def _objects(root: str) -> list[str]:
    from apache_beam.io.filesystems import FileSystems

    return [m.path for m in FileSystems.match([f"{root}/**"])[0].metadata_list]


def _published_whole(root: str) -> bool:
    """LATEST parses and names a run whose folder has its run manifest and finished embeddings."""
    run_id = _latest_run(root)
    names = set(_objects(root))
    return (
        run_id is not None
        and {f"{root}/{run_id}/manifest.json", f"{root}/{run_id}/embeddings/manifest.json"} <= names
    )


def _latest_run(root: str) -> str | None:
    """The run LATEST names; None when there is none or it does not parse."""
    from pipelines.storage.object_store import read_with_generation

    data, _ = read_with_generation(f"{root}/LATEST")
    try:
        return str(json.loads(data or b"")["run_id"])
    except (ValueError, KeyError, TypeError):
        return None


def _sorted_vectors(folder: str) -> np.ndarray:
    ids, matrix, _ = read_embeddings(folder)
    return matrix[np.argsort(np.asarray(ids, dtype=object))]


def concurrent_nightlies_on_gcs(fixture: Fixture) -> Outcome:
    from tests.gcs_emulator import pointed_at, running_emulator

    tries = fixture.concurrent_tries
    one_published = whole = clean = reruns_ok = same = 0
    with running_emulator() as emulator, pointed_at(emulator):
        emulator.create_bucket(BUCKET)
        env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
        alone = f"gs://{BUCKET}/alone"
        if _run(fixture, alone, "alone", env).wait() != 0:
            raise RuntimeError("the lone nightly on the bucket root failed")
        reference = _sorted_vectors(f"{alone}/alone/embeddings")
        for attempt in range(tries):
            root = f"gs://{BUCKET}/race-{attempt}"
            processes = {run_id: _run(fixture, root, run_id, env) for run_id in ("a", "b")}
            results = {run_id: (p.wait(), p.stderr.read()) for run_id, p in processes.items()}
            refused = [
                r for r, (code, err) in results.items() if code == 2 and any(t in err for t in LOCK_REFUSALS)
            ]
            published = [r for r, (code, _) in results.items() if code == 0]
            # Started together, they overlap (a night takes seconds): one holds the lock, the other is
            # refused by it.
            one_published += len(published) == len(refused) == 1 and _latest_run(root) == published[0]
            whole += _published_whole(root)
            clean += not [p for p in _objects(root) if p.endswith((".lock", ".tmp")) or ".staging/" in p]
            reruns_ok += all(_run(fixture, root, run_id, env).wait() == 0 for run_id in refused)
            vectors = [_sorted_vectors(f"{root}/{run_id}/embeddings") for run_id in ("a", "b")]
            same += all(v.shape == reference.shape and np.allclose(v, reference, atol=1e-5) for v in vectors)
    figures = (one_published, whole, clean, reruns_ok, same)
    return Outcome(
        f"two nightlies at once on one gs:// root ({tries} tries)",
        _verdict((tries,) * 5, tries),
        _verdict(figures, tries),
        0 if same == tries else rows_in(fixture.products),
    )


def _verdict(figures: tuple[int, ...], tries: int) -> str:
    one, whole, clean, reruns, same = (f"{figure}/{tries}" for figure in figures)
    return (
        f"exactly one publishes {one}; LATEST whole {whole}; nothing left behind {clean}; "
        f"reruns publish {reruns}; outputs = a lone run's {same}"
    )
