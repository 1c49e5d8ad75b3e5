"""An index artifact as a TensorFlow SavedModel, for serving stacks that run TF graphs (the `serving` extra).

scann 1.4.2 ships two APIs: ``scann.scann_ops_pybind`` (what `ScannIndex` uses: a Python wrapper over the
C++ searcher, no TensorFlow) and ``scann.scann_ops.py.scann_ops`` (TensorFlow custom ops loaded from
``cc/_scann_ops.so``, importable only with the TensorFlow they were built for). A TF searcher is a
``ScannState`` module: the searcher's assets as variables (config, partitioner, tokenization, AH codebook
and codes, int8 or float32 vectors), from which ``tensors_to_scann`` makes the searcher inside a graph.

The SavedModel is made from **the published artifact itself**: each shard's verified ``scann/`` files
become its ``ScannState``, so its tree, codebooks and codes are the ones the nightly tuned and published,
not a searcher trained again. Each signature ``top_K`` (``serving_default`` is the first) searches every
shard at the artifact's schedule entry for K (its leaves and re-ranking depth; a depth the schedule
scores exactly searches every leaf and re-ranks every vector) and merges the shards by score. ScaNN's TF
ops have no SOAR spilling: an artifact built with ``soar_lambda`` is refused, naming why. ScaNN saves
with ``namespace_whitelist=["Scann"]``, because its ops live in that namespace.
"""

from __future__ import annotations

import re
import tempfile
import uuid
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from index_builder.artifact import SCANN_DIR, IndexArtifactError, copy_verified_files
from index_builder.numpy_exact import NumpyExactSearcher
from index_builder.partitioned import PartitionedIndex, open_index
from index_builder.scann_index import ScannIndex
from index_builder.schedule import EXACT

INSTALL_HINT = "pip install madr[serving]"
# ScaNN's asset types (scann_assets.pbtxt) in the order `ScannState` takes them, after the config.
STATE_ASSETS = (
    "PARTITIONER",
    "TOKENIZATION_NPY",
    "AH_CENTERS",
    "AH_DATASET_NPY",
    "INT8_DATASET_NPY",
    "INT8_MULTIPLIERS_NPY",
    "INT8_NORMS_NPY",
    "DATASET_NPY",
)
_ASSET = re.compile(r'asset_type:\s*(\w+)\s*asset_path:\s*"([^"]+)"')


def scann_tensorflow_requirement() -> str | None:
    """The TensorFlow the installed scann's TF ops were built for, as its `tf` extra pins it ("~=2.20.0")."""
    for requirement in metadata.requires("scann") or ():
        name, _, marker = requirement.partition(";")
        if name.strip().startswith("tensorflow") and "extra" in marker and "tf" in marker:
            return name.strip().removeprefix("tensorflow").strip() or None
    return None


def tensorflow_mismatch(installed: str, wanted: str | None) -> str | None:
    """Why `installed` TensorFlow cannot load scann's ops built for `wanted` (a "~=X.Y.Z" pin), or None."""
    if not wanted or not wanted.startswith("~="):
        return None
    pinned = wanted.removeprefix("~=").split(".")
    if installed.split(".")[:2] == pinned[:2]:
        return None
    return (
        f"scann's TensorFlow ops are built for tensorflow{wanted}, and TensorFlow {installed} is installed: "
        f"they fail to load on another minor version. pip install 'tensorflow{wanted}' ({INSTALL_HINT})"
    )


def require_tensorflow() -> tuple[Any, Any]:
    """TensorFlow and ScaNN's TF ops, imported only when an export is asked for."""
    try:
        import tensorflow as tf
    except ImportError as err:
        raise ImportError(
            f"the TensorFlow SavedModel export needs TensorFlow: {INSTALL_HINT} ({err})"
        ) from err
    mismatch = tensorflow_mismatch(tf.__version__, scann_tensorflow_requirement())
    if mismatch:
        raise ImportError(mismatch)
    try:
        from scann.scann_ops.py import scann_ops
    except Exception as err:  # tf.load_op_library raises NotFoundError on an ABI mismatch
        raise ImportError(
            f"ScaNN's TensorFlow ops do not load with TensorFlow {tf.__version__} ({err}); install the "
            "TensorFlow version your scann release was built against"
        ) from err
    return tf, scann_ops


def search_settings(shard: ScannIndex, k: int) -> tuple[int | None, int]:
    """(leaves to search, re-ranking depth) of `shard` for the top `k`, as `ScannIndex.search` picks
    them; an exact depth, or an exact artifact, searches every leaf and re-ranks every vector."""
    config, k = shard.config, min(k, shard.size)
    entry = shard.schedule.entry_for(k) if shard.schedule is not None else None
    if entry is None and not config.uses_tree:
        return None, shard.size
    if entry is not None and entry.searcher == EXACT:
        return config.num_leaves, shard.size
    leaves, depth = shard._tree_settings(entry, k)
    leaves = leaves if leaves is not None else config.search_leaves(k)
    depth = depth if depth is not None else config.search_reorder(k)
    return leaves, min(shard.size, max(depth, k))


def state_tensors(tf: Any, scann_dir: Path) -> list[Any]:
    """The tensors of one ScaNN searcher's serialised assets, in `ScannState`'s order (absent: empty)."""
    listed = dict(_ASSET.findall((scann_dir / "scann_assets.pbtxt").read_text()))
    unknown = sorted(set(listed) - set(STATE_ASSETS))
    if unknown:
        raise IndexArtifactError(f"{scann_dir} holds ScaNN assets the TF ops do not take: {unknown}")
    # An asset the searcher has none of (a brute-force artifact has no tree, no codes) is an empty tensor of
    # the op's type for it, a scalar, as ScaNN's own `scann_to_tensors` gives it.
    empty = {
        "PARTITIONER": b"",
        "TOKENIZATION_NPY": np.int32(0),
        "AH_CENTERS": b"",
        "AH_DATASET_NPY": np.uint8(0),
        "INT8_DATASET_NPY": np.int8(0),
    }

    def tensor(kind: str) -> Any:
        if kind not in listed:
            return tf.constant(empty.get(kind, np.float32(0)))
        path = scann_dir / listed[kind]
        if kind.endswith("_NPY"):
            array = np.load(path, allow_pickle=False)
            return tf.constant(array.astype(np.int32) if kind == "TOKENIZATION_NPY" else array)
        return tf.constant([path.read_bytes()])

    return [tf.constant([(scann_dir / "scann_config.pb").read_bytes()]), *map(tensor, STATE_ASSETS)]


def shard_state(tf: Any, scann_ops: Any, tensors: list[Any], shared_name: str) -> Any:
    """One shard's searcher assets as variables (as ScaNN's `ScannState`), its searcher made under
    `shared_name`: made once per process, then found by name on each call."""

    class ShardState(tf.Module):
        def __init__(self) -> None:
            super().__init__()
            self.assets = [tf.Variable(t, validate_shape=False, trainable=False) for t in tensors]

        @tf.function(input_signature=[])
        def recreate_handle(self) -> Any:
            config, partitioner, tokens, codebook, hashed, int8, multipliers, norms, dataset = self.assets
            return scann_ops.tensors_to_scann(
                dataset,
                config,
                partitioner,
                tokens,
                codebook,
                hashed,
                int8,
                multipliers,
                norms,
                shared_name=shared_name,
            )

    return ShardState()


def _shards(index: Any, directory: Path) -> list[tuple[ScannIndex, Path]]:
    if isinstance(index, PartitionedIndex):
        return [
            (shard, directory / e.path) for shard, e in zip(index.shards, index.manifest.shards, strict=True)
        ]
    if isinstance(index, ScannIndex):
        return [(index, directory)]
    raise IndexArtifactError(f"{directory} is not a dense ScaNN artifact: only those export as a SavedModel")


def export_saved_model(
    index_dir: str | Path, directory: str | Path, depths: Sequence[int] = (10, 100)
) -> Path:
    """Save the artifact at `index_dir` (verified) as a SavedModel with a ``top_K`` signature per depth.

    Each signature takes float32 ``queries`` (batch, dimension) and returns ``ids`` (string),
    ``scores`` (float32) and ``indices`` (int32, the artifact's rows), each (batch, K).
    """
    tf, scann_ops = require_tensorflow()
    index_dir = Path(index_dir)
    index = open_index(index_dir, exact=NumpyExactSearcher)
    shards = _shards(index, index_dir)
    for shard, path in shards:
        if shard.config.soar_lambda is not None:
            raise IndexArtifactError(
                f"{path} spills vectors into a second leaf (SOAR, soar_lambda {shard.config.soar_lambda}); "
                "ScaNN's TF ops have no SOAR: build the index without --soar_lambda to export it"
            )
    with tempfile.TemporaryDirectory(prefix="madr-tf-export-") as private:
        states = []
        for number, (shard, path) in enumerate(shards):
            target = Path(private) / str(number)
            copy_verified_files(path, shard.manifest, f"{SCANN_DIR}/", target)
            # A shared name per export and shard: loaded back, every shard's searcher made under one
            # default name was one resource, so each shard searched the first shard's tree.
            name = f"madr-index-{uuid.uuid4().hex}-shard-{number}"
            states.append(shard_state(tf, scann_ops, state_tensors(tf, target / SCANN_DIR), name))
        module = _serving_module(tf, scann_ops, states, index, [shard for shard, _ in shards], depths)
        signatures = {f"top_{k}": getattr(module, f"top_{k}") for k in depths}
        signatures["serving_default"] = signatures[f"top_{depths[0]}"]
        tf.saved_model.save(
            module,
            str(directory),
            signatures=signatures,
            options=tf.saved_model.SaveOptions(namespace_whitelist=["Scann"]),
        )
    return Path(directory)


def _serving_module(
    tf: Any, scann_ops: Any, states: list[Any], index: Any, shards: list[ScannIndex], depths: Sequence[int]
) -> Any:
    """A tf.Module holding the shards' states and ids, with one search function per depth."""
    offsets = np.cumsum([0, *(shard.size for shard in shards)])[:-1].tolist()
    module = tf.Module()
    module.shards = states
    module.ids = tf.Variable(list(index.ids), dtype=tf.string, trainable=False)
    spec = tf.TensorSpec([None, index.dimension], tf.float32, name="queries")
    for k in depths:
        settings = [search_settings(shard, k) for shard in shards]

        def search(
            queries: Any, settings: list[tuple[int | None, int]] = settings, k: int = k
        ) -> dict[str, Any]:
            rows, scores = [], []
            for state, shard, offset, (leaves, depth) in zip(states, shards, offsets, settings, strict=True):
                found, found_scores = scann_ops.searcher_from_module(state).search_batched(
                    queries,
                    final_num_neighbors=min(k, shard.size),
                    pre_reorder_num_neighbors=depth,
                    leaves_to_search=leaves,
                )
                rows.append(found + offset)
                scores.append(found_scores)
            merged, order = tf.math.top_k(tf.concat(scores, axis=1), k=min(k, index.size))
            indices = tf.gather(tf.concat(rows, axis=1), order, batch_dims=1)
            return {"ids": tf.gather(module.ids, indices), "scores": merged, "indices": indices}

        setattr(module, f"top_{k}", tf.function(search, input_signature=[spec]))
    return module
