"""Export an index as a TensorFlow SavedModel, for serving stacks that run TF graphs (the `serving` extra).

scann 1.4.2 ships two APIs: ``scann.scann_ops_pybind`` (what `ScannIndex` uses: a Python
wrapper over the C++ searcher, no TensorFlow) and ``scann.scann_ops.py.scann_ops``
(TensorFlow custom ops loaded from ``cc/_scann_ops.so``, importable only when TensorFlow
is). Only the latter can live inside a SavedModel: its searcher's
``serialize_to_module()`` returns a ``tf.Module`` holding the index as variables, and
``searcher_from_module`` recreates the searcher inside a graph. ScaNN's own tests save it
with ``tf.saved_model.SaveOptions(namespace_whitelist=["Scann"])``, because the ops live
in the "Scann" namespace.

The TF searcher is trained again from the embeddings with the same `ScannIndexConfig`
(same ScaNN text config), so it is the same recipe but not bit-identical to a pybind
`ScannIndex` (ScaNN's k-means is unseeded). k, the leaves and the re-ranking depth are
fixed at export, as a serving signature needs static settings.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from index_builder.config import ScannIndexConfig
from index_builder.scann_assets import scann_builder
from index_builder.searcher import as_corpus

INSTALL_HINT = "pip install madr[serving]"


def _tensorflow() -> tuple[Any, Any]:
    """TensorFlow and ScaNN's TF ops, imported only when an export is asked for."""
    try:
        import tensorflow as tf
    except ImportError as err:
        raise ImportError(
            f"the TensorFlow SavedModel export needs TensorFlow: {INSTALL_HINT} ({err})"
        ) from err
    try:
        from scann.scann_ops.py import scann_ops
    except Exception as err:  # tf.load_op_library raises NotFoundError on an ABI mismatch
        raise ImportError(
            f"ScaNN's TensorFlow ops do not load with TensorFlow {tf.__version__} ({err}); install the "
            "TensorFlow version your scann release was built against"
        ) from err
    return tf, scann_ops


def scann_text_config(config: ScannIndexConfig, embeddings: np.ndarray) -> str:
    """ScaNN's text config for ``config``, from the same builder calls `ScannIndex.train` makes."""
    return scann_builder(config, embeddings).create_config()


def export_saved_model(
    config: ScannIndexConfig, embeddings: np.ndarray, ids: Sequence[str], directory: str | Path, k: int = 10
) -> Path:
    """Train a TF ScaNN searcher as ``config`` says and save a SavedModel serving top-``k`` search.

    The ``serving_default`` signature takes float32 ``queries`` (batch, dimension) and
    returns ``ids`` (string), ``scores`` (float32) and ``indices`` (int32), each (batch, k).
    """
    tf, scann_ops = _tensorflow()
    matrix, id_array = as_corpus(embeddings, ids)
    if matrix.shape != (config.num_vectors, config.dimension):
        raise ValueError(
            f"embeddings have shape {matrix.shape}, "
            f"the config is for {config.num_vectors} × {config.dimension}"
        )
    k = min(k, config.num_vectors)
    leaves = config.search_leaves(k)
    depth = min(config.num_vectors, max(config.search_reorder(k), k))
    searcher = scann_ops.create_searcher(matrix, scann_text_config(config, matrix))

    class ScannServing(tf.Module):
        def __init__(self) -> None:
            super().__init__()
            self.index = searcher.serialize_to_module()
            self.ids = tf.Variable(id_array.tolist(), dtype=tf.string, trainable=False)

        @tf.function(input_signature=[tf.TensorSpec([None, config.dimension], tf.float32, name="queries")])
        def search(self, queries: Any) -> dict[str, Any]:
            found = scann_ops.searcher_from_module(self.index)
            indices, scores = found.search_batched(
                queries, final_num_neighbors=k, pre_reorder_num_neighbors=depth, leaves_to_search=leaves
            )
            return {"ids": tf.gather(self.ids, indices), "scores": scores, "indices": indices}

    module = ScannServing()
    directory = Path(directory)
    tf.saved_model.save(
        module,
        str(directory),
        signatures={"serving_default": module.search},
        options=tf.saved_model.SaveOptions(namespace_whitelist=["Scann"]),
    )
    return directory
