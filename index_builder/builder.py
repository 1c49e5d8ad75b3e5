"""Fluent construction of a ScaNN index: collect the recipe step by step, build once.

Each step only records its arguments; `create_config()` turns them into a validated
`ScannIndexConfig` that can be printed and checked before the (minutes-long, on a
real catalog) training starts, and `build()` is the only call that does work::

    builder = ScannIndexBuilder(dimension=384, num_vectors=len(ids))
    builder.tree(2000, 200, 100_000).score_ah(2).reorder(4000)
    print(builder.create_config())
    index = builder.build(embeddings, ids)

or let the corpus size decide: ``ScannIndexBuilder.for_corpus(len(ids), 384).build(...)``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from index_builder.config import (
    BRUTE_FORCE_BELOW,
    DEFAULT_ANISOTROPIC_THRESHOLD,
    DEFAULT_DIMENSIONS_PER_BLOCK,
    EXACT_FROM_K_FRACTION,
    LEAVES_PER_ROOT_N,
    MAX_LEAVES,
    MIN_REORDER,
    MIN_TRAINING_SAMPLE,
    SERVING_K,
    TRAINING_SAMPLES_PER_LEAF,
    ReorderPrecision,
    ScannIndexConfig,
    Scoring,
    leaves_for_k,
    reorder_for_k,
)
from index_builder.scann_index import ScannIndex
from schemas import RETRIEVAL_DEPTH

_SCORING_STEPS = ("score_ah", "score_brute_force")


class ScannIndexBuilder:
    """Collects a ScaNN index configuration for ``num_vectors`` vectors of ``dimension``.

    Every step may be called once; a scoring step (`score_ah` or `score_brute_force`)
    is required, `tree` and `reorder` are optional (AH requires `reorder`).
    """

    def __init__(self, dimension: int, num_vectors: int) -> None:
        for name, value in (("dimension", dimension), ("num_vectors", num_vectors)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        self.dimension = dimension
        self.num_vectors = num_vectors
        self._steps: dict[str, dict[str, Any]] = {}

    def _record(self, step: str, **arguments: Any) -> ScannIndexBuilder:
        if step in self._steps:
            raise ValueError(f"{step}() has already been configured")
        if step in _SCORING_STEPS and any(s in self._steps for s in _SCORING_STEPS):
            raise ValueError("choose one scoring: score_ah() or score_brute_force(), not both")
        self._steps[step] = arguments
        return self

    def tree(
        self,
        num_leaves: int,
        num_leaves_to_search: int,
        training_sample_size: int,
        soar_lambda: float | None = None,
    ) -> ScannIndexBuilder:
        """Partition into ``num_leaves`` k-means leaves; open ``num_leaves_to_search`` per query.

        ``soar_lambda`` (e.g. 1.5) also spills every vector into a second leaf (SOAR).
        """
        return self._record(
            "tree",
            num_leaves=num_leaves,
            num_leaves_to_search=num_leaves_to_search,
            training_sample_size=training_sample_size,
            soar_lambda=soar_lambda,
        )

    def score_ah(
        self,
        dimensions_per_block: int = DEFAULT_DIMENSIONS_PER_BLOCK,
        anisotropic_quantization_threshold: float = DEFAULT_ANISOTROPIC_THRESHOLD,
    ) -> ScannIndexBuilder:
        """Score candidates with anisotropic asymmetric hashing (needs `reorder` for exact scores)."""
        return self._record(
            "score_ah",
            dimensions_per_block=dimensions_per_block,
            anisotropic_quantization_threshold=anisotropic_quantization_threshold,
        )

    def score_brute_force(self) -> ScannIndexBuilder:
        """Score candidates with exact float32 dot products (no codebooks, no reorder)."""
        return self._record("score_brute_force")

    def reorder(
        self, reorder_candidates: int, precision: ReorderPrecision | str = ReorderPrecision.FLOAT32
    ) -> ScannIndexBuilder:
        """Re-score the best ``reorder_candidates`` AH candidates before taking the top k.

        ``precision`` "float32" gives exact scores; "int8" reads quantised copies (less memory traffic).
        """
        return self._record("reorder", reorder_candidates=reorder_candidates, reorder_precision=precision)

    def create_config(self) -> ScannIndexConfig:
        """The validated configuration; raises ValueError if the steps do not make a valid index."""
        scoring_steps = [s for s in _SCORING_STEPS if s in self._steps]
        if not scoring_steps:
            raise ValueError("no scoring configured: call score_ah() or score_brute_force()")
        tree = self._steps.get("tree", {})
        ah = self._steps.get("score_ah")
        training = tree.get("training_sample_size")
        if training is None and ah is not None:
            # AH codebooks train on a sample even without a tree.
            training = min(self.num_vectors, MIN_TRAINING_SAMPLE)
        return ScannIndexConfig(
            dimension=self.dimension,
            num_vectors=self.num_vectors,
            scoring=Scoring.ASYMMETRIC_HASHING if ah is not None else Scoring.BRUTE_FORCE,
            num_leaves=tree.get("num_leaves"),
            num_leaves_to_search=tree.get("num_leaves_to_search"),
            training_sample_size=training,
            soar_lambda=tree.get("soar_lambda"),
            **self._steps.get("reorder", {}),
            **(ah or {}),
        )

    def build(self, embeddings: np.ndarray, ids: Sequence[str]) -> ScannIndex:
        """Train the index on unit-norm float32 (num_vectors, dimension) rows; ``ids[i]`` names row i.

        Exactly these settings, with no recall target: `index_builder.tuned.train_within_target` (what
        `madr build-index` and the partitioned build use) also measures recall, widens the search to a
        target, and ships exact scoring where that is faster.
        """
        return ScannIndex.train(self.create_config(), embeddings, ids)

    def __repr__(self) -> str:
        steps = "".join(
            f".{step}({', '.join(f'{k}={v!r}' for k, v in arguments.items())})"
            for step, arguments in self._steps.items()
        )
        return f"ScannIndexBuilder(dimension={self.dimension}, num_vectors={self.num_vectors}){steps}"

    @classmethod
    def for_corpus(cls, num_vectors: int, dimension: int, depth: int = RETRIEVAL_DEPTH) -> ScannIndexBuilder:
        """A builder whose settings are derived from the corpus size, for searches of up to ``depth``.

        The rule (k = min(depth, n); constants and their measurements in `index_builder.config`):

        * brute force (exact float32, no tree) if n < 5,000, or if k >= n/20: a tree is not
          worth training on a tiny corpus, and from a twentieth of the corpus on exact search
          was faster than the index;
        * otherwise a tree with num_leaves = round(2·sqrt(n)) (at most 4,096);
        * the stored search settings are for a serving search of k = 10 (what ScaNN uses
          when a caller passes no overrides): num_leaves_to_search = ceil(num_leaves ·
          max(0.10, 0.06·10^0.3)) and min(n, 1,000) AH candidates re-ranked exactly;
          `ScannIndex.search` widens both for deeper k (`ScannIndexConfig.search_leaves`,
          `search_reorder`): max(0.06·k^0.3, 10·k/n) of the leaves (48 % at k = 1,000,
          every leaf from k ≈ 11,000 or k = n/10 on) and 8·k candidates, which kept
          Recall@k ≥ 0.99 on the benchmark's overlapping clusters, but not on diffuse data
          (isotropic Gaussian vectors: 0.46 at 200k × 128, 0.72 at 20k × 32): this rule promises
          nothing, so `index_builder.recall.tune_recall` (run by `madr build-index`) measures
          recall@depth at build time and widens the search to a target;
        * training_sample_size = min(n, max(250,000, 100 · num_leaves));
        * AH with 2 dimensions per block and anisotropic threshold 0.2 (ScaNN's defaults
          for unit vectors), re-ranking in float32;
        * no SOAR spilling: at 1M it lowered queries/s at recall@10 = 0.95 and doubled the
          build time (bench/index_bench.py); ask for it with `tree(..., soar_lambda=1.5)`.

        Search widens the leaves and re-ranking for k > depth with the same k terms, and
        caps k at n, so Recall@k=n returns the whole corpus.
        """
        builder = cls(dimension, num_vectors)
        if not isinstance(depth, int) or isinstance(depth, bool) or depth < 1:
            raise ValueError(f"depth must be a positive int, got {depth!r}")
        k = min(depth, num_vectors)
        # Rule 1: tiny corpus, or k a twentieth of the corpus or more -> exact brute force.
        if num_vectors < BRUTE_FORCE_BELOW or k >= EXACT_FROM_K_FRACTION * num_vectors:
            return builder.score_brute_force()
        # Rule 2: ~2 sqrt(n) leaves; the stored search settings are those of a serving k.
        num_leaves = min(MAX_LEAVES, round(LEAVES_PER_ROOT_N * math.sqrt(num_vectors)))
        searched = leaves_for_k(num_leaves, num_vectors, SERVING_K)
        training = min(num_vectors, max(MIN_TRAINING_SAMPLE, TRAINING_SAMPLES_PER_LEAF * num_leaves))
        # Rule 3: AH (2 dims/block, threshold 0.2); re-rank for the serving k: max(8·10, 1000) capped at n.
        reorder = max(reorder_for_k(num_vectors, SERVING_K), min(num_vectors, MIN_REORDER))
        return (
            builder.tree(num_leaves, searched, training)
            .score_ah(min(DEFAULT_DIMENSIONS_PER_BLOCK, dimension), DEFAULT_ANISOTROPIC_THRESHOLD)
            .reorder(reorder)
        )


def config_for_corpus(
    num_vectors: int,
    dimension: int,
    depth: int = RETRIEVAL_DEPTH,
    settings: Mapping[str, Any] | None = None,
) -> ScannIndexConfig:
    """`ScannIndexBuilder.for_corpus`'s config, with `settings` (`ScannIndexConfig` fields) in place of
    the values the corpus size gives; the config's validation names a combination that cannot work.

    What a setting implies follows it: `scoring="brute_force"` drops asymmetric hashing's own fields,
    `scoring="asymmetric_hashing"` on a corpus the rule scores exactly adds ScaNN's defaults for them,
    `num_leaves=0` means no tree, and a leaf count without a search width searches as `for_corpus` does.
    """
    config = ScannIndexBuilder.for_corpus(num_vectors, dimension, depth).create_config()
    chosen = dict(settings or {})
    if not chosen:
        return config
    implied: dict[str, Any] = {}
    scoring = Scoring(chosen.get("scoring", config.scoring))
    if scoring is Scoring.BRUTE_FORCE:
        implied |= {"dimensions_per_block": None, "reorder_candidates": None}
        implied["reorder_precision"] = ReorderPrecision.FLOAT32
    elif config.scoring is Scoring.BRUTE_FORCE:
        implied["dimensions_per_block"] = min(DEFAULT_DIMENSIONS_PER_BLOCK, dimension)
        implied["reorder_candidates"] = max(
            reorder_for_k(num_vectors, SERVING_K), min(num_vectors, MIN_REORDER)
        )
    leaves = chosen.get("num_leaves", config.num_leaves)
    if leaves == 0:
        leaves = chosen["num_leaves"] = None
        implied |= {"num_leaves_to_search": None, "soar_lambda": None}
    elif "num_leaves" in chosen:
        implied["num_leaves_to_search"] = leaves_for_k(leaves, num_vectors, SERVING_K)
    trained = leaves is not None or scoring is Scoring.ASYMMETRIC_HASHING
    if not trained:
        implied["training_sample_size"] = None
    elif config.training_sample_size is None or "num_leaves" in chosen:
        per_leaf = TRAINING_SAMPLES_PER_LEAF * (leaves or 0)
        implied["training_sample_size"] = min(num_vectors, max(MIN_TRAINING_SAMPLE, per_leaf))
    return dataclasses.replace(config, **{**implied, **chosen, "scoring": scoring})
