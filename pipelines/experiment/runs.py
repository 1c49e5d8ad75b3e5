"""Finished experiment runs kept in a folder of their own, so that one experiment can span machines.

A 3-seed table at 60,000 products takes about 5 hours of 2 cores (docs/RESULTS.md), longer than one
session on one machine, and a run's models are too large to carry. What the table needs from a run is
small: its per-query metrics, aspect accuracies, timings and document cosine (`jobs.experiment`'s
`_run_result`). With `--run_archive DIR`, `madr experiment` writes each finished (variant, seed) run's
result to DIR/<seed>/<variant>.json.gz and, before running one, reads it from there if it is present:
a folder committed after one session (or copied back from a lent GPU) lets the next session go on from
where it stopped, and the table pools every seed as if one machine had run them all.

A result counts only for the experiment that made it: each file records the generated data's
`files_digest` (byte-identical data, the same digest) and every setting that shapes a run, and a file
that differs in either is refused, naming what differs.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipelines.layout import DatasetLayout
from schemas.manifest import FILES_DIGEST, read_manifest

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

# Settings that choose which runs an experiment makes, or how it reports them: not what one run is.
NOT_A_RUN_SETTING = frozenset({"variants", "baseline", "seed", "seeds", "run_archive"})


def run_settings(config: DataclassInstance) -> dict[str, Any]:
    """The settings that shape every run of `config` (an experiment's config, `jobs.experiment_config`), as
    JSON values (tuples become lists)."""
    settings = {k: v for k, v in dataclasses.asdict(config).items() if k not in NOT_A_RUN_SETTING}
    return json.loads(json.dumps(settings))


@dataclasses.dataclass(frozen=True)
class RunArchive:
    """DIR/<seed>/<variant>.json.gz: one finished run's result, for one experiment's data and settings."""

    folder: Path
    data_digest: str
    settings: dict[str, Any]

    @classmethod
    def open(cls, folder: str | Path, config: DataclassInstance, data: DatasetLayout) -> RunArchive:
        manifest = read_manifest(data.root, "benchmark", fix="the experiment generates its own data")
        return cls(Path(folder), manifest[FILES_DIGEST], run_settings(config))

    def path(self, variant: str, seed: int) -> Path:
        return self.folder / str(seed) / f"{variant}.json.gz"

    def load(self, variant: str, seed: int) -> dict[str, Any] | None:
        """The run's kept result, or None when it has not been run; refuses another experiment's."""
        path = self.path(variant, seed)
        if not path.is_file():
            return None
        kept = json.loads(gzip.decompress(path.read_bytes()))
        if kept["data"] != self.data_digest:
            raise ValueError(
                f"{path}: made over other data (files_digest {kept['data'][:12]}, this experiment's "
                f"{self.data_digest[:12]}); give --run_archive a folder of its own for this experiment"
            )
        differ = sorted(
            name
            for name in kept["settings"].keys() | self.settings.keys()
            if kept["settings"].get(name) != self.settings.get(name)
        )
        if differ:
            was, now = kept["settings"], self.settings
            detail = ", ".join(f"{n}={was.get(n)!r} there, {now.get(n)!r} here" for n in differ)
            raise ValueError(
                f"{path}: made with other settings ({detail}); give --run_archive a folder of its own "
                "for this experiment, or the same settings"
            )
        return kept["result"]

    def keep(self, variant: str, seed: int, result: dict[str, Any]) -> Path:
        """Write the run's result (written whole to a temporary name first: a stopped run leaves none)."""
        path = self.path(variant, seed)
        path.parent.mkdir(parents=True, exist_ok=True)
        record = {"variant": variant, "seed": seed, "data": self.data_digest, "settings": self.settings}
        payload = json.dumps({**record, "result": result}, default=float, sort_keys=True)
        partial = path.with_suffix(".partial")
        # mtime 0: the same result gives the same bytes, so a re-run leaves git with nothing to commit.
        partial.write_bytes(gzip.compress(payload.encode(), mtime=0))
        partial.replace(path)
        return path
