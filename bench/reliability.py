"""The reliability suite (issue 13, item 10): break things the way users and accidents do, through `madr`.

Each case runs the real command line (`jobs.cli.main`, or `python -m jobs.cli` in a
subprocess for the kill) on a tiny random model and a small synthetic catalog, observes what
happened (exit code, the one-line message, whether the output or LATEST changed, the counts), and
prints one table row: case | expected | observed | records lost. A case passes when the observed
text equals the expected text and no record was lost.

Records lost = records in - records in the output - records in dead letters, where "the output"
is what a reader can use after the case: the stage's new output when it ran, the output or
published run that was already there when the stage was refused (a refusal must leave it whole),
and a dead letter for a whole file or row group covers every row of it. It must be 0 everywhere.

    python -m bench.reliability            # or: make reliability
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bench.reliability_binding import (
    bad_cached_graph,
    escaping_asset,
    model_mismatch,
    pickle_race,
    swapped_files,
    symbolic_links,
)
from bench.reliability_cases import (
    bad_input,
    corrupted_model,
    kill_and_rerun,
    planted_pickle,
    shrunk_catalog,
    stale_output,
    tampered_index,
)
from bench.reliability_hostile import (
    escaping_run_id,
    hostile_catalog,
    rewritten_catalog,
    unreadable_catalog,
    unscorable_judgments,
    wrong_mapping,
)
from bench.reliability_kit import Fixture, Outcome, embed, make_fixture
from bench.reliability_object_store import concurrent_nightlies_on_gcs
from bench.reliability_writers import concurrent_nightlies, damaged_weights, disk_full, symlinked_output

CASES: dict[str, Callable[[Fixture], Outcome]] = {
    "corrupted-model": corrupted_model,
    "planted-pickle": planted_pickle,
    "stale-output": stale_output,
    "bad-input": bad_input,
    "kill-and-rerun": kill_and_rerun,
    "tampered-index": tampered_index,
    "shrunk-catalog": shrunk_catalog,
    # Issue 24: artifacts that must belong together, one writer at a time, errors that name their cause.
    "model-mismatch": model_mismatch,
    "swapped-ids": lambda fixture: swapped_files(fixture, "ids.parquet"),
    "swapped-scann": lambda fixture: swapped_files(fixture, "scann"),
    "escaping-asset": escaping_asset,
    "symbolic-links": symbolic_links,
    "pickle-race": pickle_race,
    "forged-graph": lambda fixture: bad_cached_graph(fixture, forged=True),
    "unreadable-graph": lambda fixture: bad_cached_graph(fixture, forged=False),
    "damaged-weights": damaged_weights,
    "symlinked-output": symlinked_output,
    "disk-full": disk_full,
    "concurrent-nightlies": concurrent_nightlies,
    # Issue 50: a bucket root, its lock object and LATEST kept by compare-and-swap.
    "concurrent-nightlies-gcs": concurrent_nightlies_on_gcs,
    # Issue 63: names that leave the root, text that drives the terminal, inputs that switch a stage off.
    "escaping-run-id": escaping_run_id,
    "hostile-catalog": hostile_catalog,
    "unscorable-judgments": unscorable_judgments,
    "unreadable-catalog": unreadable_catalog,
    "wrong-mapping": wrong_mapping,
    "rewritten-catalog": rewritten_catalog,
}


def run_suite(
    root: Path, names: list[str] | None = None, progress: Callable[[str], None] = print, quick: bool = False
) -> list[Outcome]:
    """Every case (or those `names`) on one fixture under `root`; the shared embeddings are built first.
    `quick` tries the races fewer times (`make_fixture`)."""
    fixture = make_fixture(root, quick)
    first = embed(fixture, fixture.products, fixture.folder("embeddings"))
    if first.code != 0:
        raise RuntimeError(f"the baseline embed failed: {first.stderr}")
    outcomes = []
    for name in names or list(CASES):
        started = time.perf_counter()
        outcomes.append(CASES[name](fixture))
        progress(f"{name}: {time.perf_counter() - started:.1f}s")
    return outcomes


def format_table(outcomes: list[Outcome]) -> str:
    """A Markdown table: case | expected | observed | records lost (observed marked FAIL when it differs)."""
    lines = ["| case | expected | observed | records lost |", "|---|---|---|---|"]
    for outcome in outcomes:
        observed = outcome.observed if outcome.passed else f"FAIL: {outcome.observed}"
        lines.append(f"| {outcome.case} | {outcome.expected} | {observed} | {outcome.records_lost} |")
    return "\n".join(lines)


def run_cli(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--case", action="append", choices=list(CASES), help="Run only this case (repeatable)"
    )
    parser.add_argument(
        "--keep", default=None, help="Work in this folder and keep it (default: a temporary one)"
    )
    args = parser.parse_args(argv)
    with contextlib.ExitStack() as stack:
        root = Path(args.keep) if args.keep else Path(stack.enter_context(tempfile.TemporaryDirectory()))
        root.mkdir(parents=True, exist_ok=True)
        started = time.perf_counter()
        outcomes = run_suite(root, args.case, progress=lambda line: print(line, file=sys.stderr))
        print(format_table(outcomes))
        failed = [outcome.case for outcome in outcomes if not outcome.passed]
        print(
            f"\n{len(outcomes) - len(failed)} of {len(outcomes)} cases as expected, "
            f"{sum(o.records_lost for o in outcomes)} records lost, {time.perf_counter() - started:.0f}s"
        )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(run_cli())
