"""The main table's experiment read back from its committed run archive, so a claim about it is recomputed
from the per-query metrics, not read from the document.

`madr experiment --run_archive DIR` keeps every finished (variant, seed) run in DIR/<seed>/<variant>.json.gz
(`pipelines.experiment.runs.RunArchive`). `ArchivedExperiment.load` reads every run there, pools each
variant's seeds as the experiment does (`evaluation.experiment_stats.pool_seeds`), and gives:

- `table(order)`: the experiment's own Markdown table (`summarise` + `write_report`, the code that wrote
  docs/RESULTS.md's), row by row, so `bench.results_claims` compares the document's table with it cell by
  cell and checks the claims against the recomputed one;
- `paired(a, b, metric)`: a difference and paired t-test the table does not make (two rows, pooled over the
  seeds, not Holm-adjusted), the figures `bench.archive_pairs` prints;
- `seed_means(variant, metric)` and `seed_minutes(variant)`: each seed's mean and archived stage time.
"""

from __future__ import annotations

import gzip
import json
import tempfile
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from bench.results_table import Table, main_table, table_body
from evaluation import paired_t_test
from evaluation.experiment_report import COLUMNS, write_report
from evaluation.experiment_stats import paired_values, pool_seeds, power_analysis, summarise

MAIN_ARCHIVE = Path("bench/results/experiment-runs/default-60k")
BASELINE = "bibert"
ZERO_SHOT = "zero-shot"


def read_run(path: Path) -> dict[str, Any]:
    return json.loads(gzip.decompress(path.read_bytes()))


@dataclass
class ArchivedExperiment:
    """Every archived run of one experiment: variant -> [(seed, kept record)], in seed order."""

    folder: Path
    runs: dict[str, list[tuple[int, dict[str, Any]]]]
    _pooled: dict[str, dict[str, Any]] = field(default_factory=dict, repr=False)
    _markdown: dict[tuple[str, ...], str] = field(default_factory=dict, repr=False)

    @classmethod
    def load(cls, folder: str | Path = MAIN_ARCHIVE) -> ArchivedExperiment:
        """The archive's runs; read once per process while no file of it changes (pooling 46 runs of 1,500
        queries takes seconds, and the claims check and its tests read the same archive many times)."""
        folder = Path(folder).resolve()
        paths = sorted(folder.glob("*/*.json.gz"), key=lambda p: (int(p.parent.name), p.name))
        stamp = tuple((str(p), p.stat().st_mtime_ns, p.stat().st_size) for p in paths)
        return _loaded(folder, stamp)

    @classmethod
    def read(cls, folder: Path, paths: list[Path]) -> ArchivedExperiment:
        runs: dict[str, list[tuple[int, dict[str, Any]]]] = {}
        for path in paths:
            variant = path.name.removesuffix(".json.gz")
            runs.setdefault(variant, []).append((int(path.parent.name), read_run(path)))
        if not runs:
            raise FileNotFoundError(f"{folder}: no archived run (expected {folder}/<seed>/<variant>.json.gz)")
        digests = {record["data"] for kept in runs.values() for _, record in kept}
        if len(digests) > 1:
            raise ValueError(f"{folder}: the runs were made over different data ({len(digests)} digests)")
        return cls(folder, runs)

    def variant_runs(self, variant: str) -> list[tuple[int, dict[str, Any]]]:
        if variant not in self.runs:
            raise KeyError(f"{self.folder}: no run of {variant!r}")
        return self.runs[variant]

    def pooled(self, variant: str) -> dict[str, Any]:
        """The variant's result pooled over its seeds (each query's metric averaged over them)."""
        if variant not in self._pooled:
            self._pooled[variant] = pool_seeds([record["result"] for _, record in self.variant_runs(variant)])
        return self._pooled[variant]

    def report(self, order: list[str]) -> dict[str, Any]:
        """The results.json `madr experiment` writes for these runs, rows in `order` then any other."""
        variants = [v for v in order if v in self.runs] + sorted(set(self.runs) - set(order))
        results = {variant: self.pooled(variant) for variant in variants}
        summary = summarise(results, BASELINE, ZERO_SHOT, marked=[key for key, _ in COLUMNS])
        settings = next(iter(self.runs.values()))[0][1]["settings"]
        seeds = max(len(kept) for kept in self.runs.values())
        queries = len(results[BASELINE]["per_query"])
        config = {**settings, "seeds": seeds, "baseline": BASELINE}
        # The archive keeps stage times, not the experiment's wall time: their sum stands in for it.
        seconds = sum(sum(r["result"]["timings"].values()) for kept in self.runs.values() for _, r in kept)
        return {
            "power": power_analysis(summary, queries),
            "config": config,
            "wall_seconds": round(seconds, 1),
            "summary": summary,
        }

    def markdown(self, order: list[str]) -> str:
        if tuple(order) not in self._markdown:
            with tempfile.TemporaryDirectory() as folder:
                self._markdown[tuple(order)] = write_report(self.report(order), Path(folder) / "results.md")
        return self._markdown[tuple(order)]

    def table(self, order: list[str]) -> Table:
        table = main_table(self.markdown(order))
        table.archive = self
        return table

    def paired(self, first: str, second: str, metric: str) -> tuple[float, float]:
        """(first − second in points, paired t-test p) over the queries both define, seeds pooled."""
        figures = compare(self.pooled(first), self.pooled(second), metric)
        return figures["points"], figures["p"]

    def seed_means(self, variant: str, metric: str) -> list[float]:
        return [
            float(np.nanmean([row.get(metric, np.nan) for row in record["result"]["per_query"].values()]))
            for _, record in self.variant_runs(variant)
        ]

    def seed_minutes(self, variant: str) -> list[float]:
        """Each seed's archived stage seconds, summed, in minutes."""
        return [sum(record["result"]["timings"].values()) / 60 for _, record in self.variant_runs(variant)]


def compare(first: dict[str, Any], second: dict[str, Any], metric: str) -> dict[str, float]:
    """Two pooled results' means, difference (first − second, in points) and paired t-test p over the
    queries where both define `metric`: one comparison chosen by the reader, not Holm-adjusted."""
    a, b = paired_values(first["per_query"], second["per_query"], metric)
    return {
        "queries": len(a),
        "first": float(a.mean()),
        "second": float(b.mean()),
        "points": float((a - b).mean() * 100),
        "p": float(paired_t_test(a, b).pvalue),
    }


@lru_cache(maxsize=4)
def _loaded(folder: Path, stamp: tuple[tuple[str, int, int], ...]) -> ArchivedExperiment:
    return ArchivedExperiment.read(folder, [Path(path) for path, _, _ in stamp])


def table_rows(markdown: str) -> dict[str, str]:
    """The body rows of the first main-style table (`| variant | R@100 |`), by variant, each as its cells
    joined the way `write_report` joins them."""
    body = table_body(markdown, "| variant | R@100 |")
    if body is None:
        raise ValueError("no table with a header starting '| variant | R@100 |' found")
    return {row[0].removesuffix(" †"): "| " + " | ".join(row) + " |" for row in body}


def row_differences(written: dict[str, str], recomputed: dict[str, str]) -> list[str]:
    """Each row the document writes otherwise than the archive gives, naming the cells that differ."""
    differences = []
    for variant in written.keys() | recomputed.keys():
        if variant not in recomputed:
            differences.append(f"{variant}: no run of it in the archive")
            continue
        if variant not in written:
            differences.append(f"{variant}: archived, but the document's table has no row for it")
            continue
        if written[variant] == recomputed[variant]:
            continue
        header = [label for _, label in COLUMNS] + ["Acc@1 queries", "Acc@1 held-out", "Acc@3 held-out"]
        mine = [cell.strip() for cell in written[variant].strip("| ").split(" | ")[1:]]
        theirs = [cell.strip() for cell in recomputed[variant].strip("| ").split(" | ")[1:]]
        cells = [
            f"{label} written {a!r}, recomputed {b!r}"
            for label, a, b in zip(header, mine, theirs, strict=False)
            if a != b
        ]
        differences.append(f"{variant}: " + ("; ".join(cells) or "the row's layout differs"))
    return sorted(differences)
