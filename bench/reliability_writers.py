"""The reliability cases of writers and of errors that must name their cause (issue 24, items 5 and 6).

Two nightlies started at once on one root; a disk that fills during embed, build-index and evaluate; a
weights file cut short or taken from another model, listed in the manifest; a symbolic link as --output.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from bench.reliability_binding import shared_index
from bench.reliability_kit import (
    REPO,
    WEIGHTS,
    Fixture,
    Outcome,
    embed,
    evaluate,
    madr,
    named,
    nightly,
    nightly_argv,
    rows_in,
    rows_out,
    sorted_embeddings,
)
from bench.support import tiny_model
from schemas import write_manifest


def _leftovers(root: Path) -> list[str]:
    """Staging folders, lock files and half-written pointers a finished run must not leave."""
    return sorted(
        str(path.relative_to(root))
        for path in root.rglob(".*")
        if path.name.endswith((".staging", ".lock", ".replaced")) or path.name.endswith(".tmp")
    )


def _published_whole(root: Path) -> bool:
    """LATEST parses and names a run whose folder has its run manifest and finished embeddings."""
    try:
        latest = json.loads((root / "LATEST").read_text())
    except (OSError, ValueError):
        return False
    run = root / latest["run_id"]
    return (run / "manifest.json").is_file() and (run / "embeddings" / "manifest.json").is_file()


def concurrent_nightlies(fixture: Fixture) -> Outcome:
    """Two `madr nightly` processes started together on one root, with different run ids, N times. Issue 24:
    one deleted the other's staging folder, a manifest said 400 rows over 390, and every rerun failed."""
    clean = fixture.folder("nightly-alone")
    if nightly(fixture, fixture.products, clean, "alone").code != 0:
        raise RuntimeError("the uninterrupted nightly failed")
    _, reference = sorted_embeddings(clean / "alone" / "embeddings")
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    argv = [sys.executable, "-m", "jobs.cli", "--log_level", "ERROR"]
    overlapped = whole = clean_roots = reruns_ok = same = 0
    for attempt in range(fixture.concurrent_tries):
        root = fixture.folder(f"nightly-race-{attempt}")
        processes = {
            run_id: subprocess.Popen(
                [*argv, *nightly_argv(fixture, fixture.products, root, run_id)],
                cwd=REPO,
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
            )
            for run_id in ("a", "b")
        }
        results = {run_id: (process.wait(), process.stderr.read()) for run_id, process in processes.items()}
        refused = [
            run_id for run_id, (code, err) in results.items() if code == 2 and "is being written by" in err
        ]
        failed = [run_id for run_id, (code, _) in results.items() if code != 0 and run_id not in refused]
        overlapped += bool(refused)
        whole += _published_whole(root) and not failed
        clean_roots += not _leftovers(root)
        # A refused night is run again, alone: it must publish and hold what a run alone holds.
        reruns_ok += all(nightly(fixture, fixture.products, root, run_id).code == 0 for run_id in refused)
        vectors = [sorted_embeddings(root / run_id / "embeddings")[1] for run_id in ("a", "b")]
        same += all(v.shape == reference.shape and np.allclose(v, reference, atol=1e-5) for v in vectors)
    tries = fixture.concurrent_tries
    return Outcome(
        f"two nightlies at once on one root ({tries} tries, {overlapped} overlapping: the second refused)",
        f"LATEST whole {tries}/{tries}; nothing left behind {tries}/{tries}; reruns publish {tries}/{tries}; "
        f"outputs = a lone run's {tries}/{tries}",
        f"LATEST whole {whole}/{tries}; nothing left behind {clean_roots}/{tries}; reruns publish "
        f"{reruns_ok}/{tries}; outputs = a lone run's {same}/{tries}",
        0 if same == tries else rows_in(fixture.products),
    )


@contextlib.contextmanager
def _full_disk(folder: Path) -> Iterator[Path | None]:
    """A 2 MiB tmpfs at `folder`, filled to the last byte; None where mounting is not allowed (not root)."""
    folder.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(folder)], capture_output=True, check=False
    )
    if mounted.returncode != 0:
        yield None
        return
    try:
        with contextlib.suppress(OSError), open(folder / "filler", "wb") as filler:
            while True:
                filler.write(b"\0" * 4096)
                filler.flush()
        yield folder
    finally:
        # Lazily: a Beam thread of the last run may still hold a file there for a moment.
        subprocess.run(["umount", "--lazy", str(folder)], check=False)


def disk_full(fixture: Fixture) -> Outcome:
    """The disk fills while embed, build-index and evaluate write their output; then space is freed and
    each is run again. Issue 24: "unexpected error ... this is a bug in madr", exit 1."""
    index = shared_index(fixture)
    stages = {
        "embed": lambda out: embed(fixture, fixture.products, out),
        "build-index": lambda out: madr(
            "build-index",
            "--embeddings",
            str(fixture.folder("embeddings")),
            "--out",
            str(out),
            "--depth",
            "50",
        ),
        "evaluate": lambda out: evaluate(fixture, index, out),
    }
    observed, expected, lost = [], [], 0
    for stage, run_stage in stages.items():
        expected.append(f"{stage}: exit 2, names the full disk and the output, nothing left; rerun exit 0")
        with _full_disk(fixture.folder(f"full-{stage}")) as disk:
            if disk is None:
                return Outcome(
                    "disk full in embed, build-index, evaluate", "not run", "not run: mount needs root", 0
                )
            run = run_stage(disk / "out")
            said = named(run, "No space left on device", "the full disk")
            said += " and the output" if str(disk / "out") in run.stderr else " but not the output"
            left = "nothing left" if [p.name for p in disk.iterdir()] == ["filler"] else "files left"
            (disk / "filler").unlink()
            again = run_stage(disk / "out")
            observed.append(f"{stage}: exit {run.code}, {said}, {left}; rerun exit {again.code}")
            if stage == "embed":
                lost = rows_in(fixture.products) - (rows_out(disk / "out") if again.code == 0 else 0)
    return Outcome(
        "disk full in embed, build-index, evaluate", "; ".join(expected), "; ".join(observed), lost
    )


def damaged_weights(fixture: Fixture) -> Outcome:
    """A weights file cut short, and one of a model of another size, each listed in the manifest (so the
    hashes match). Issue 24: "unexpected error ... bug in madr"."""
    observed = []
    other = tiny_model(fixture.folder("model-8"), 8, "reliability-8")
    for what, damage in (
        ("cut short", lambda weights: weights.write_bytes(weights.read_bytes()[:5000])),
        ("another model's", lambda weights: shutil.copyfile(other / WEIGHTS, weights)),
    ):
        model = Path(shutil.copytree(fixture.model, fixture.folder(f"weights-{what.split()[0]}")))
        damage(model / WEIGHTS)
        write_manifest(model, "madr-model", {"variant": "bibert", "model_version": "reliability"})
        output = fixture.folder(f"weights-{what.split()[0]}-out")
        run = embed(fixture, fixture.products, output, "--model", str(model))
        written = "output written" if output.exists() else "no output"
        observed.append(f"{what}: exit {run.code}; {named(run, f'{model / WEIGHTS}', WEIGHTS)}; {written}")
    return Outcome(
        "damaged weights listed in the manifest (cut short; another model's)",
        "; ".join(f"{what}: exit 2; names {WEIGHTS}; no output" for what in ("cut short", "another model's")),
        "; ".join(observed),
        0,
    )


def symlinked_output(fixture: Fixture) -> Outcome:
    """`--output LINK --overwrite`. Issue 24: it wrote, exited 2 on rmtree of the link, and left the next
    run stuck in staging."""
    real, link = fixture.folder("real-output"), fixture.folder("linked-output")
    real.mkdir()
    (real / "kept.txt").write_text("the folder the link names")
    link.symlink_to(real)
    run = embed(fixture, fixture.products, link, "--overwrite")
    kept = "target untouched" if [p.name for p in real.iterdir()] == ["kept.txt"] else "target changed"
    again = embed(fixture, fixture.products, fixture.folder("unlinked-output"))
    said = named(run, "is a symbolic link", "the link")
    return Outcome(
        "symbolic link as --output, with --overwrite",
        "exit 2; names the link; target untouched; next run exit 0",
        f"exit {run.code}; {said}; {kept}; next run exit {again.code}",
        rows_in(fixture.products) - (rows_out(fixture.folder("unlinked-output")) if again.code == 0 else 0),
    )
