"""What a one-index build reads besides the embeddings and the catalog (`pipelines.index.lexical_build`):
queries to tune the search schedule on (`--tuning_queries`), encoded once on the driver.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import numpy as np

from model import Side
from pipelines.inference import load_text_encoder
from pipelines.io.texts import read_query_texts
from pipelines.settings.options import ModelSettings
from pipelines.storage.verify import check_same_model

if TYPE_CHECKING:
    from pipelines.index.config import IndexBuildConfig

# Tuning queries encoded at most: the depth tuner subsamples them per depth (index_builder.depth_tuning).
MAX_TUNING_QUERIES = 1_000

LOGGER = logging.getLogger(__name__)


def tuning_query_vectors(build: IndexBuildConfig, embeddings: str) -> np.ndarray | None:
    """--tuning_queries (a dataset's test split left out) encoded by --model, which must be the model of
    the embeddings; None without them."""
    if not build.tuning_queries or not build.model:
        return None
    check_same_model(build.model, {"--embeddings": embeddings})
    queries = read_query_texts(build.tuning_queries, exclude_split="test", limit=MAX_TUNING_QUERIES)
    if not queries:
        raise ValueError(f"--tuning_queries {build.tuning_queries} holds no query outside the test split")
    LOGGER.info("encoding %d tuning queries with %s", len(queries), build.model)
    return load_text_encoder(ModelSettings(build.model)).encode([q.text for q in queries], Side.QUERY)


__all__ = ["MAX_TUNING_QUERIES", "tuning_query_vectors"]
