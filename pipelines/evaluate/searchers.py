"""Which searcher a worker opens for the evaluation stage, described as picklable data.

A Beam DoFn is pickled to its workers, so it carries a *source* of its searcher (`SearcherSource`:
anything with ``open()``), not the loaded index; the worker opens it once in ``setup``. `SearcherSpec`
is the source of the real searchers (a ScaNN index artifact or exact search over an embed output);
a benchmark or a test can pass any other object that has ``open()``.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from apache_beam.io.filesystems import FileSystems

from index_builder import ExactSearcher, Searcher, open_index
from pipelines.evaluate.corpus_parts import embedding_parts, index_parts
from pipelines.io.parquet_reading import read_embeddings
from pipelines.settings.options import EvaluateSettings
from pipelines.storage.local_copies import localize
from pipelines.storage.stage_manifests import read_stage_manifest
from schemas.manifest import ArtifactError


@runtime_checkable
class CorpusSearcher(Searcher, Protocol):
    """A `Searcher` that also names its corpus rows: ``ids[i]`` is the product at corpus row i.

    Every searcher of index_builder has it. The evaluation stage reads it once per worker, so that
    rankings can stay (queries × k) row matrices and become product ids only in the run file.
    """

    @property
    def ids(self) -> Sequence[str]: ...


class SearcherSource(Protocol):
    """How a worker gets its searcher: picklable; `SearchAndScore` opens it once per worker process."""

    def open(self) -> CorpusSearcher: ...


@dataclass(frozen=True)
class SearcherSpec:
    """A real searcher: ``kind`` "ann" (index artifact at ``path``) or "exact" (embed output at ``path``)."""

    kind: str
    path: str

    def corpus_size(self) -> int:
        """How many products the searcher holds, from its manifest (without loading it).

        Single and partitioned index manifests (`index_builder.open_index`) both call the total "count".
        """
        if self.kind == "ann":
            manifest = FileSystems.join(self.path, "manifest.json")
            if not FileSystems.exists(manifest):
                raise ArtifactError(
                    f"--index {self.path} has no manifest.json: it is not an index artifact; give the "
                    "folder that `madr build-index` wrote"
                )
            with FileSystems.open(manifest) as handle:
                return int(json.loads(handle.read())["count"])
        # An incremental embed output also holds the rows it reused from the previous run.
        counts = read_stage_manifest(self.path, "madr-embeddings")["counts"]
        return int(counts["products_embedded"]) + int(counts.get("products_reused", 0))

    def open(self) -> CorpusSearcher:
        if self.kind == "ann":
            # ScaNN loads only local folders: a gs:// index is copied to a temporary folder first.
            # The loaded searcher holds everything in memory, so the copy can go right after.
            with tempfile.TemporaryDirectory(prefix="madr-index-") as local_dir:
                return open_index(localize(self.path, local_dir))  # type: ignore[return-value]
        ids, matrix, _ = read_embeddings(self.path)
        return ExactSearcher(matrix, ids)


def opened_part_by_part(source: SearcherSource) -> Iterator[CorpusSearcher]:
    """The source's corpus as searchers of its parts in corpus order, each opened when the one before is
    done with (an index's shards, an embed output's files: the driver holds one part, not the corpus);
    any other source whole, as one part."""
    if not isinstance(source, SearcherSpec):
        yield source.open()
        return
    parts = index_parts(source.path) if source.kind == "ann" else embedding_parts(source.path)
    for part in parts:
        yield part.open_dense()


def searcher_specs(opts: EvaluateSettings) -> dict[str, SearcherSpec]:
    """The searchers to run: --searcher first, then "exact" when comparing the index against exact search.

    The comparison is on by default whenever it is possible (--searcher ann with --embeddings too), so every
    report of an index says what the index costs in recall. --searcher auto gives both, to measure first
    (`stage._choose_searcher`).
    """
    if opts.searcher == "auto":
        if not (opts.index and opts.embeddings):
            raise ValueError(
                "--searcher auto needs both --index and --embeddings: it measures one against the other"
            )
        return {"ann": SearcherSpec("ann", opts.index), "exact": SearcherSpec("exact", opts.embeddings)}
    path = opts.index if opts.searcher == "ann" else opts.embeddings
    if not path:
        flag = "--index" if opts.searcher == "ann" else "--embeddings"
        raise ValueError(f"--searcher {opts.searcher} needs {flag}")
    specs = {opts.searcher: SearcherSpec(opts.searcher, path)}
    possible = opts.searcher == "ann" and bool(opts.embeddings)
    if (opts.compare_exact is None and not possible) or opts.compare_exact == "false":
        return specs
    if not possible:
        raise ValueError("--compare_exact needs --searcher ann with both --index and --embeddings")
    specs["exact"] = SearcherSpec("exact", opts.embeddings)
    return specs


def corpus_size(specs: dict[str, SearcherSpec]) -> int:
    sizes = {name: spec.corpus_size() for name, spec in specs.items()}
    if len(set(sizes.values())) > 1:
        raise ValueError(
            f"--compare_exact: the index holds {sizes['ann']} products but --embeddings {sizes['exact']}; "
            "compare an index with the embeddings it was built from (or pass --compare_exact false)"
        )
    return next(iter(sizes.values()))


__all__ = [
    "CorpusSearcher",
    "SearcherSource",
    "SearcherSpec",
    "corpus_size",
    "opened_part_by_part",
    "searcher_specs",
]
