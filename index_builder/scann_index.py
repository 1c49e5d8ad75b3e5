"""A trained ScaNN searcher bound to its product ids and its config.

This is the only module that calls ScaNN. Search parameters are always passed to
ScaNN explicitly (never its build-time defaults), so what a search did can be read
from the config and k alone.
"""

from __future__ import annotations

import copy
import json
import logging
import tempfile
import time
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import scann

from index_builder.artifact import (
    IDS_FILE,
    REBUILD_HINT,
    SCANN_DIR,
    IndexArtifactError,
    IndexManifest,
    copy_verified_files,
    list_files,
    prepare_directory,
    read_ids,
    read_verified_files,
    read_verified_manifest,
    write_ids,
    write_manifest,
)
from index_builder.bm25 import Bm25Index
from index_builder.config import ScannIndexConfig
from index_builder.lexical import LEXICAL_DIR, hybrid_search, load_lexical
from index_builder.scann_assets import (
    ExactMaker,
    available_cores,
    exact_searcher,
    load_scann_searcher,
    scann_builder,
    scann_version,
    scores_every_vector,
    serialize_searcher,
    torch_exact,
    write_serving_defaults,
)
from index_builder.schedule import EXACT, DepthEntry, SearchSchedule
from index_builder.searcher import (
    CorpusRows,
    Searcher,
    SearchResult,
    as_corpus,
    as_query_matrix,
    effective_k,
    make_result,
    sort_rows,
)

logger = logging.getLogger(__name__)

# Largest |‖v‖ - 1| accepted: dot product only equals cosine on unit vectors, and the
# anisotropic threshold (0.2) is calibrated for them.
UNIT_NORM_TOLERANCE = 1e-3
# Bound on ScaNN's per-block result and candidate buffers (q_block × depth cells of ~12 bytes).
_QUERY_BLOCK_BYTES = 256 * 1024 * 1024
# Queries per unit of work in ScaNN's thread pool: big enough to amortise the hand-off.
_PARALLEL_BATCH = 256


class ScannIndex(CorpusRows):
    """Approximate top-k by dot product over a corpus of unit vectors.

    Build one with `ScannIndexBuilder` (or `ScannIndex.train`), persist it with
    `save`, and reopen it anywhere with `load`; the directory may be moved or copied.

    An exact config (brute force, no tree) is saved as ScaNN's brute-force searcher, so any ScaNN
    server loads it, but madr searches it with its own exact searcher over the same float32 vectors
    (ScaNN's `dataset.npy`): a blocked matrix product that answered 1,256 queries/s at k = 1,000 over
    200,000 vectors where ScaNN's brute force answered 497. It then holds that one copy of the vectors.
    """

    def __init__(
        self,
        searcher: Any,
        ids: Sequence[str],
        config: ScannIndexConfig,
        manifest: IndexManifest | None = None,
        search_threads: int | None = None,
        exact: Searcher | None = None,
        schedule: SearchSchedule | None = None,
        lexical: Bm25Index | None = None,
    ) -> None:
        self._searcher = searcher
        self._lexical = lexical
        self._exact = exact
        self._schedule = schedule
        if schedule is not None and schedule.uses_exact and exact is None:
            raise ValueError("the schedule scores some depths exactly, but no exact searcher was given")
        self._ids = np.asarray(list(ids), dtype=object)
        self._config = config
        self._manifest = manifest
        held = exact.size if exact is not None else searcher.size()
        if len(self._ids) != config.num_vectors or held != config.num_vectors:
            raise ValueError(
                f"searcher holds {held} vectors and {len(self._ids)} ids, config says {config.num_vectors}"
            )
        self.set_search_threads(search_threads or available_cores())

    def set_search_threads(self, threads: int) -> None:
        """Threads a batch of queries is spread over (default: every core this process may use).

        A Beam runner with several workers per machine should give each ``cores // workers``.
        """
        if not isinstance(threads, int) or isinstance(threads, bool) or threads < 1:
            raise ValueError(f"search threads must be a positive int, got {threads!r}")
        if self._searcher is not None:  # the exact searcher's matrix product uses torch's threads
            self._searcher.set_num_threads(threads)
        self._search_threads = threads

    @property
    def search_threads(self) -> int:
        return self._search_threads

    @classmethod
    def train(cls, config: ScannIndexConfig, embeddings: np.ndarray, ids: Sequence[str]) -> ScannIndex:
        """Train a ScaNN searcher as ``config`` says; the embeddings must match its shape and be unit norm."""
        matrix, id_array = as_corpus(embeddings, ids)
        if matrix.shape != (config.num_vectors, config.dimension):
            raise ValueError(
                f"embeddings have shape {matrix.shape}, the config was made for "
                f"({config.num_vectors}, {config.dimension})"
            )
        worst = float(np.max(np.abs(np.linalg.norm(matrix, axis=1) - 1.0)))
        if worst > UNIT_NORM_TOLERANCE:
            raise ValueError(
                f"embeddings must be L2-normalised (dot product = cosine); a norm is off by {worst:.3g}"
            )
        if scores_every_vector(config):  # nothing to train: ScaNN's searcher is made when saved
            return cls(None, id_array.tolist(), config, exact=torch_exact(matrix, id_array.tolist()))
        started = time.perf_counter()
        searcher = scann_builder(config, matrix).build()
        logger.info("trained ScaNN index %s in %.1f s", config, time.perf_counter() - started)
        return cls(searcher, id_array.tolist(), config)

    @property
    def config(self) -> ScannIndexConfig:
        return self._config

    @property
    def exact_searcher(self) -> Searcher | None:
        """The exact searcher an exact config searches with, or a tree's for the depths its schedule
        scores exactly (None for a tree or hashing index that has none)."""
        return self._exact

    @property
    def schedule(self) -> SearchSchedule | None:
        """What serves each depth (`index_builder.schedule`); None: the config's rule widens per k."""
        return self._schedule

    @property
    def lexical(self) -> Bm25Index | None:
        """BM25 over the same products (row for row), shipped in the artifact for `search_hybrid`."""
        return self._lexical

    def with_lexical(self, lexical: Bm25Index | None) -> ScannIndex:
        """The same index carrying `lexical` (built over its ids, in their order)."""
        if lexical is not None and len(lexical) != self.size:
            raise ValueError(f"the BM25 index holds {len(lexical)} products, the index {self.size}")
        clone = copy.copy(self)  # the same trained searcher, as the other with_* share it
        clone._lexical, clone._manifest = lexical, None
        return clone

    def search_hybrid(self, queries: np.ndarray, texts: Sequence[str], k: int) -> SearchResult:
        """The dense ranking (`search`, at least `FUSION_DEPTH` deep) fused with BM25's for each query's
        text by reciprocal rank (k 60): the top min(k, n), scores the fused ones."""
        return hybrid_search(self, self._lexical, queries, texts, k)

    @property
    def manifest(self) -> IndexManifest | None:
        """The manifest it was loaded with; None for an index built in this process."""
        return self._manifest

    @property
    def dimension(self) -> int:
        return self._config.dimension

    @property
    def size(self) -> int:
        return self._config.num_vectors

    def __repr__(self) -> str:
        return f"ScannIndex({self._config})"

    def search(
        self,
        queries: np.ndarray,
        k: int,
        *,
        leaves_to_search: int | None = None,
        pre_reorder_num_neighbors: int | None = None,
    ) -> SearchResult:
        """Top-min(k, n) neighbours per query, sorted by score descending, ties by corpus row.

        By default a tuned index searches as its schedule's entry for k says (the smallest listed
        depth >= k: the tree's settings tuned there, or exact scoring where that was faster); an
        index without one takes the leaves and re-ranking depth from the config, widened for large k
        (`ScannIndexConfig.search_leaves` / `search_reorder`). The keyword overrides are taken
        literally (always the tree), for tuning sweeps. A row the searched leaves
        cannot fill with k_eff vectors (ScaNN pads it with NaN) is searched again over
        every leaf, so every row always has k_eff real neighbours.
        """
        overridden = leaves_to_search is not None or pre_reorder_num_neighbors is not None
        if self._searcher is None:
            if overridden:
                raise ValueError("an exact index scores every vector: it takes no search settings")
            return self._exact.search(queries, k)
        matrix = as_query_matrix(queries, self.dimension)
        k_eff = effective_k(k, self.size)
        entry = None if overridden or self._schedule is None else self._schedule.entry_for(k_eff)
        if entry is not None and entry.searcher == EXACT:
            return self._exact.search(queries, k)
        leaves, depth = self._tree_settings(entry, k_eff)
        leaves = leaves_to_search if leaves_to_search is not None else leaves
        depth = pre_reorder_num_neighbors if pre_reorder_num_neighbors is not None else depth
        if leaves is None and not overridden:
            leaves = self._config.search_leaves(k_eff)
        if depth is None:
            depth = self._config.search_reorder(k_eff)
        if leaves is not None and self._config.num_leaves is None:
            raise ValueError("leaves_to_search given, but this index has no tree")
        if leaves is not None and not 1 <= leaves <= self._config.num_leaves:
            raise ValueError(f"leaves_to_search must be in [1, {self._config.num_leaves}], got {leaves}")
        depth = min(self.size, max(depth, k_eff))
        indices, scores = self._search_blocks(matrix, k_eff, depth, leaves)
        short = np.flatnonzero(np.isnan(scores).any(axis=1))
        if short.size:
            logger.info("%d queries found < %d in %s leaves; retrying all", short.size, k_eff, leaves)
            every_leaf = self._config.num_leaves
            indices[short], scores[short] = self._search_blocks(matrix[short], k_eff, depth, every_leaf)
        indices, scores = sort_rows(indices, scores)
        return make_result(indices, scores, self._ids)

    def _tree_settings(self, entry: DepthEntry | None, k: int) -> tuple[int | None, int | None]:
        """(leaves, re-ranking) of the schedule's tree entry for k, or (None, None): the config's rule.
        Beyond the deepest entry, the rule widens the entry's settings."""
        if entry is None:
            return None, None
        if k <= entry.depth:
            return entry.leaves_to_search, entry.pre_reorder_num_neighbors
        leaves = self._config.search_leaves(k)
        if leaves is not None and entry.leaves_to_search is not None:
            leaves = max(leaves, entry.leaves_to_search)
        return leaves, max(self._config.search_reorder(k), entry.pre_reorder_num_neighbors or 0)

    def _search_blocks(
        self, matrix: np.ndarray, k: int, depth: int, leaves: int | None
    ) -> tuple[np.ndarray, np.ndarray]:
        indices = np.empty((matrix.shape[0], k), dtype=np.int64)
        scores = np.empty((matrix.shape[0], k), dtype=np.float32)
        block = max(1, _QUERY_BLOCK_BYTES // (12 * depth))
        for start in range(0, matrix.shape[0], block):
            stop = start + block
            # Explicit arguments: never fall back to whatever ScaNN stored at build time. The parallel
            # call is faster even on one thread (bench/index_bench.py): it batches the queries.
            found, found_scores = self._searcher.search_batched_parallel(
                matrix[start:stop],
                final_num_neighbors=k,
                pre_reorder_num_neighbors=depth,
                leaves_to_search=leaves,
                batch_size=_PARALLEL_BATCH,
            )
            indices[start:stop], scores[start:stop] = found, found_scores
        return indices, scores

    def with_search_settings(
        self, num_leaves_to_search: int | None, reorder_candidates: int | None
    ) -> ScannIndex:
        """The same trained searcher with other stored search settings (a re-validated config).

        Search always passes its settings to ScaNN explicitly, so nothing is retrained: the stored
        ones are the floor `ScannIndexConfig.search_leaves` / `search_reorder` widen from.
        """
        config = replace(
            self._config, num_leaves_to_search=num_leaves_to_search, reorder_candidates=reorder_candidates
        )
        return ScannIndex(
            self._searcher,
            self._ids,
            config,
            None,
            self._search_threads,
            self._exact,
            self._schedule,
            self._lexical,
        )

    def updated(self, removed: Sequence[str], upserted: Sequence[str], vectors: np.ndarray) -> ScannIndex:
        """This tree with the `removed` products deleted and the `upserted` ones inserted or replaced by
        `vectors` (row for row): ScaNN puts each into its nearest leaf and hashes it with the trained
        codebooks, in place, without training. Deletion moves the last vector into the freed row, so the
        result's ids are in ScaNN's new order. The config and stored search settings are kept; no schedule
        and no BM25 (re-check the one, rebuild the other). The trained searcher is shared and changed: do
        not search this index afterwards.
        """
        if self._searcher is None:
            raise ValueError("an exact index has no tree to update: build it anew")
        matrix, _ = as_corpus(vectors, upserted) if len(upserted) else (vectors, None)
        mutable = scann.scann_ops_pybind.ScannSearcher(self._searcher.searcher, docids=self._ids.tolist())
        if removed:
            mutable.delete(list(removed))
        if len(upserted):
            mutable.upsert(list(upserted), matrix, batch_size=_PARALLEL_BATCH)
        # Wrapped again without the ids: ScaNN pickles a searcher's ids when it saves one (no pickle in
        # an artifact; ids.json is madr's list).
        searcher = scann.scann_ops_pybind.ScannSearcher(mutable.searcher)
        config = replace(self._config, num_vectors=len(mutable.docids))
        return ScannIndex(searcher, mutable.docids, config, None, self._search_threads)

    def with_schedule(self, schedule: SearchSchedule, exact: Searcher | None) -> ScannIndex:
        """The same trained tree searched by `schedule`; its stored settings (a plain ScaNN caller's
        defaults) become the shallowest tuned entry's. `exact` scores the depths the schedule scores
        exactly (None when it has none)."""
        default = schedule.serving_default
        leaves, reorder = self._config.num_leaves_to_search, self._config.reorder_candidates
        if default is not None:
            leaves = default.leaves_to_search if leaves is not None else None
            reorder = default.pre_reorder_num_neighbors if reorder is not None else None
        config = replace(self._config, num_leaves_to_search=leaves, reorder_candidates=reorder)
        exact = exact if schedule.uses_exact else None
        return ScannIndex(
            self._searcher, self._ids, config, None, self._search_threads, exact, schedule, self._lexical
        )

    def save(
        self,
        directory: str | Path,
        model_id: str,
        model_version: str,
        extra: dict[str, Any] | None = None,
        recall: dict[str, Any] | None = None,
    ) -> IndexManifest:
        """Write the index to an empty (or new) directory; the manifest goes last.

        ``model_id``/``model_version`` name the encoder whose embeddings were indexed, so
        queries encoded by another model can be refused by whoever loads the index.
        ``extra`` (JSON-serialisable) is stored verbatim, e.g. the embeddings' source path.
        ``recall`` is what the build measured (`index_builder.recall.tune_recall`'s report).
        """
        if not model_id or not model_version:
            raise ValueError("model_id and model_version are required: an index is valid for one encoder")
        extra = dict(extra or {})
        try:
            json.dumps([extra, recall])
        except TypeError as err:
            raise ValueError(f"extra and recall must be JSON-serialisable: {err}") from err
        directory = Path(directory)
        prepare_directory(directory)
        # relative_path=True: the default stores absolute asset paths, and a moved index would not load.
        searcher = self._searcher
        if searcher is None:  # exact: ScaNN's brute-force searcher over the same vectors, for any server
            searcher = scann_builder(self._config, self._exact.corpus).build()
        serialize_searcher(searcher, directory)
        if self._searcher is not None:  # a plain ScaNN caller's defaults: the stored (k = 10) settings
            write_serving_defaults(directory / SCANN_DIR, self._config)
        write_ids(directory, self._ids.tolist())
        if self._lexical is not None:
            self._lexical.save(directory / LEXICAL_DIR)
            extra["lexical"] = self._lexical.settings.describe()
            # The catalog's statistics it was scored with and the queries' language: the same in every shard.
            extra["lexical_statistics"] = self._lexical.statistics
            extra["lexical_query_language"] = self._lexical.query_language
        manifest = IndexManifest(
            model_id=model_id,
            model_version=model_version,
            dimension=self.dimension,
            count=self.size,
            config=self._config,
            created_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
            scann_version=scann_version(),
            files=list_files(directory),
            extra=extra,
            recall=None if recall is None else dict(recall),
        )
        write_manifest(directory, manifest)
        return manifest

    @classmethod
    def load(cls, directory: str | Path, exact: ExactMaker = torch_exact) -> ScannIndex:
        """Verify an index directory against its manifest, then load it; what it scores exactly, `exact`
        scores (torch's `ExactSearcher` unless a torch-free process gives `NumpyExactSearcher`).

        Raises:
            IndexArtifactError: the manifest is missing or invalid, a listed file is
                missing or altered, or ScaNN cannot load what passed the checks.
        """
        directory = Path(directory)
        # Each file's sha256 is checked below, as the bytes that are loaded are read.
        manifest = read_verified_manifest(directory)
        scann_dir = directory / SCANN_DIR
        if scores_every_vector(manifest.config):
            # madr's exact searcher parses the vectors from the bytes it hashed; ScaNN reads nothing.
            contents = read_verified_files(directory, manifest)
            ids = read_ids(directory, manifest.count, contents.pop(IDS_FILE))
            searcher = exact_searcher(contents[f"{SCANN_DIR}/dataset.npy"], ids, directory, exact)
            lexical = load_lexical(directory, manifest, ids)
            return cls(None, ids, manifest.config, manifest, exact=searcher, lexical=lexical)
        # ScaNN reads from a private copy made of the bytes it hashed while copying: nothing planted or
        # swapped in the artifact after the check (a pickle ScaNN would unpickle) reaches it.
        with tempfile.TemporaryDirectory(prefix="madr-index-") as private:
            copy_verified_files(directory, manifest, "", Path(private))
            ids = read_ids(Path(private), manifest.count)
            schedule, scorer = _schedule_of(manifest, directory), None
            if schedule is not None and schedule.uses_exact:
                vectors = Path(private) / SCANN_DIR / "dataset.npy"
                if not vectors.is_file():
                    raise IndexArtifactError(
                        f"{directory / 'manifest.json'} scores some depths exactly, but {scann_dir} keeps "
                        f"no float32 vectors (dataset.npy); {REBUILD_HINT}"
                    )
                scorer = exact_searcher(bytearray(vectors.read_bytes()), ids, directory, exact)
            searcher = load_scann_searcher(Path(private), directory, manifest.count)
        lexical = load_lexical(directory, manifest, ids)
        return cls(searcher, ids, manifest.config, manifest, exact=scorer, schedule=schedule, lexical=lexical)


def _schedule_of(manifest: IndexManifest, directory: Path) -> SearchSchedule | None:
    """The manifest's search schedule (None for an index built before schedules, or untuned)."""
    try:
        return SearchSchedule.from_list((manifest.recall or {}).get("schedule"))
    except (TypeError, ValueError) as err:
        raise IndexArtifactError(
            f"{directory / 'manifest.json'} has an invalid search schedule: {err}; {REBUILD_HINT}"
        ) from err
