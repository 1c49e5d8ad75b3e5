"""The files of ScaNN's serialised searcher that madr reads or edits itself.

ScaNN owns the format of ``scann/``; madr touches three things in it: the float32 vectors
(``dataset.npy``), parsed from the bytes it verified to score exactly; the search defaults in
``scann_config.pb``, set to the artifact's k = 10 schedule entry so that a server loading the folder
with plain ScaNN and calling ``search(q)`` gets the settings tuned for it; and ScaNN's builder, the one
place a `ScannIndexConfig` becomes ScaNN calls.
"""

from __future__ import annotations

import errno
import io
import os
import shutil
from collections.abc import Callable, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
import scann
from scann.proto import scann_pb2
from scann.scann_ops.py.scann_builder import ReorderType

from index_builder.artifact import IDS_FILE, REBUILD_HINT, SCANN_DIR, IndexArtifactError
from index_builder.config import ReorderPrecision, ScannIndexConfig, Scoring
from index_builder.searcher import Searcher

SCANN_CONFIG_FILE = "scann_config.pb"
# What scores a corpus exactly, from its float32 vectors and ids: `torch_exact` (`ExactSearcher`) by default,
# `NumpyExactSearcher` where a process runs without torch (`madr serve`).
ExactMaker = Callable[[np.ndarray, Sequence[str]], Searcher]
# ScaNN's default k for a search call that names none: a search server's first page.
SERVING_NUM_NEIGHBORS = 10


def npy_array(contents: bytearray) -> np.ndarray:
    """The array a .npy file's bytes hold, as a view of `contents` (no copy: the vectors of a 1M-product
    index are 1.5 GB). Raises ValueError on a malformed header or an object dtype, as np.load does."""
    header = io.BytesIO(bytes(contents[: min(len(contents), 1 << 16)]))
    major, _ = np.lib.format.read_magic(header)
    read_header = np.lib.format.read_array_header_1_0 if major == 1 else np.lib.format.read_array_header_2_0
    shape, fortran_order, dtype = read_header(header)
    if dtype.hasobject:
        raise ValueError("it holds Python objects, which are never loaded")
    count = int(np.prod(shape))
    array = np.frombuffer(contents, dtype=dtype, count=count, offset=header.tell())
    return array.reshape(shape, order="F" if fortran_order else "C")


def torch_exact(embeddings: np.ndarray, ids: Sequence[str]) -> Searcher:
    """`ExactSearcher` (torch's matrix products), imported when an index first scores exactly."""
    from index_builder.exact import ExactSearcher

    return ExactSearcher(embeddings, ids)


def exact_searcher(
    contents: bytearray, ids: list[str], directory: Path, make: ExactMaker = torch_exact
) -> Searcher:
    """The exact searcher `make` makes over the float32 vectors (``scann/dataset.npy``) of a ScaNN
    artifact: a brute-force one, or a tree whose schedule scores some depths exactly (its hashed bytes)."""
    try:
        vectors = npy_array(contents)
    except ValueError as err:
        raise IndexArtifactError(f"{directory / SCANN_DIR / 'dataset.npy'} is unreadable: {err}") from err
    if vectors.ndim != 2 or vectors.shape[0] != len(ids):
        raise IndexArtifactError(
            f"{directory / SCANN_DIR / 'dataset.npy'} holds {vectors.shape} vectors for {len(ids)} ids; "
            f"{REBUILD_HINT}"
        )
    return make(vectors, ids)


def scann_version() -> str:
    # scann 1.4.2 has no __version__; the installed distribution knows.
    try:
        return metadata.version("scann")
    except metadata.PackageNotFoundError:
        return "unknown"


def scann_builder(config: ScannIndexConfig, embeddings: np.ndarray) -> Any:
    """ScaNN's own builder, configured from `config`: the one place our config becomes ScaNN calls.

    `ScannIndex.train` builds from it.
    """
    # num_neighbors is only ScaNN's default for calls that omit it; search() never omits it.
    builder = scann.scann_ops_pybind.builder(embeddings, min(10, config.num_vectors), config.distance)
    if config.uses_tree:
        builder = builder.tree(
            num_leaves=config.num_leaves,
            num_leaves_to_search=config.num_leaves_to_search,
            training_sample_size=config.training_sample_size,
            soar_lambda=config.soar_lambda,
        )
    if config.scoring is Scoring.ASYMMETRIC_HASHING:
        precision = {
            ReorderPrecision.FLOAT32: ReorderType.FLOAT32,
            ReorderPrecision.INT8: ReorderType.INT8,
        }[config.reorder_precision]
        return builder.score_ah(
            config.dimensions_per_block,
            anisotropic_quantization_threshold=config.anisotropic_quantization_threshold,
            training_sample_size=config.training_sample_size,
        ).reorder(config.reorder_candidates, quantize=precision)
    return builder.score_brute_force()


def write_serving_defaults(scann_dir: Path, config: ScannIndexConfig) -> None:
    """Set the search defaults of a serialised tree to `config`'s stored settings (the k = 10 entry).

    ScaNN keeps the leaves-to-search and re-ranking depth it was built with; tuning changes them
    afterwards without retraining, so the serialised config is rewritten before the manifest hashes it.
    """
    if not config.uses_tree and config.reorder_candidates is None:
        return
    path = scann_dir / SCANN_CONFIG_FILE
    proto = scann_pb2.ScannConfig()
    proto.ParseFromString(path.read_bytes())
    proto.num_neighbors = min(SERVING_NUM_NEIGHBORS, config.num_vectors)
    if config.uses_tree:
        proto.partitioning.query_spilling.max_spill_centers = config.num_leaves_to_search
    if config.reorder_candidates is not None:
        proto.exact_reordering.approx_num_neighbors = config.reorder_candidates
    path.write_bytes(proto.SerializeToString())


def available_cores() -> int:
    """Cores this process may run on (the CPU affinity mask, which containers and taskset narrow)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def scores_every_vector(config: ScannIndexConfig) -> bool:
    """Whether `config` is exact: brute-force scoring of every vector (no tree)."""
    return config.scoring is Scoring.BRUTE_FORCE and not config.uses_tree


def serialize_searcher(searcher: Any, directory: Path) -> None:
    """ScaNN's searcher into directory/scann/, asset paths relative (a moved index still loads)."""
    try:
        searcher.serialize(str(directory / SCANN_DIR), relative_path=True)
    except RuntimeError as error:  # ScaNN's own I/O errors carry no errno; a full disk is the usual one
        free = shutil.disk_usage(directory).free
        code = errno.ENOSPC if free < 1 << 20 else errno.EIO
        raise OSError(
            code, f"ScaNN could not write the index ({error}; {free} bytes free)", str(directory)
        ) from error


def load_scann_searcher(private: Path, directory: Path, count: int) -> Any:
    """ScaNN's searcher from the private, verified copy of `directory`, holding `count` vectors."""
    try:
        searcher = scann.scann_ops_pybind.load_searcher(
            str(private / SCANN_DIR), assets_backcompat_shim=False
        )
    except Exception as err:  # ScaNN raises bare RuntimeError/ValueError from C++.
        raise IndexArtifactError(
            f"ScaNN could not load {directory / SCANN_DIR}: {err}; {REBUILD_HINT}"
        ) from err
    if searcher.size() != count:
        raise IndexArtifactError(
            f"{directory / SCANN_DIR} holds {searcher.size()} vectors but {directory / IDS_FILE} "
            f"has {count} ids; {REBUILD_HINT}"
        )
    return searcher
