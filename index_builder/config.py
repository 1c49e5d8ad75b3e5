"""What a ScaNN index is made of, as validated data.

A ``ScannIndexConfig`` is the whole recipe of an index: the partitioning tree, the
scoring (asymmetric hashing or brute force) and the exact re-ranking depth. It is
plain data so that it can be printed before any work is done, stored in the index
manifest, and compared between two runs; the builder (`builder.py`) only collects
it and `ScannIndex` (`scann_index.py`) is the one place that turns it into ScaNN
calls.

The sizing rule lives here too, because it is used twice: once by
`ScannIndexBuilder.for_corpus` to derive a config from the corpus size, and again at
search time, so that asking for more neighbours than the config was derived for
widens the search instead of silently losing recall (see `leaves_for_k`).
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, fields
from enum import Enum
from typing import Any

# ---- The sizing rule ----
# Measured with ScaNN 1.4.2 on seeded clustered unit vectors whose clusters overlap (noise as large
# as the cluster spread), 20k × 32 and 200k × 128, against exact search.
# Below this many vectors a tree saves nothing worth its training time: score every vector exactly.
BRUTE_FORCE_BELOW = 5_000
# num_leaves = round(sqrt(n)), at most this: leaves of ~sqrt(n) vectors balance centroid scoring
# against leaf scanning (ScaNN's own guidance).
MAX_LEAVES = 4_096
# Search at least this fraction of the leaves, whatever k: Recall@10 was 0.93-0.95 at 2 %,
# 0.99 at 5 % and 0.995-0.998 at 10 %.
MIN_SEARCHED_FRACTION = 0.10
# Search enough leaves to hold LEAF_OVERSAMPLE × k vectors: a query's top-k spreads over many
# leaves. With k = n/20, 6 × k lost 5-7 % of Recall@k, 10 × k kept it at 0.98-0.99.
# When LEAF_OVERSAMPLE × k ≥ n every leaf would be searched: exact scoring is then as cheap and exact.
LEAF_OVERSAMPLE = 10
# Re-rank REORDER_MULTIPLE × k AH candidates exactly (never fewer than MIN_REORDER): 2.5 × k left
# Recall@100 at 0.92 (200k × 128), 4 × k gave 0.98, 1000 candidates gave 1.0.
REORDER_MULTIPLE = 4
MIN_REORDER = 1_000
# k-means and the AH codebooks train on at most this many vectors; more buys nothing measurable.
MAX_TRAINING_SAMPLE = 250_000
# ScaNN's recommended AH block: 2 dimensions per 16-centre codebook.
DEFAULT_DIMENSIONS_PER_BLOCK = 2
# ScaNN's recommended anisotropic threshold for unit-norm vectors scored by dot product.
DEFAULT_ANISOTROPIC_THRESHOLD = 0.2


class Scoring(str, Enum):
    """How the vectors in the searched leaves are scored before re-ranking."""

    # Product-quantised, 4-bit codes scored with SIMD lookup tables; approximate, so it needs reorder.
    ASYMMETRIC_HASHING = "asymmetric_hashing"
    # Exact float32 dot products; no codebooks, no re-ranking.
    BRUTE_FORCE = "brute_force"


def leaves_for_k(num_leaves: int, num_vectors: int, k: int) -> int:
    """Leaves a search for ``k`` neighbours must open so that they hold ~LEAF_OVERSAMPLE × k vectors.

    Leaves hold ~num_vectors / num_leaves vectors each, so the searched fraction is
    LEAF_OVERSAMPLE × k / n, rounded up and capped at every leaf (k close to n).
    """
    fraction = min(1.0, LEAF_OVERSAMPLE * k / num_vectors)
    return max(1, min(num_leaves, math.ceil(num_leaves * fraction)))


def reorder_for_k(num_vectors: int, k: int) -> int:
    """Candidates to re-rank exactly for ``k`` neighbours: REORDER_MULTIPLE × k, capped at the corpus."""
    return min(num_vectors, REORDER_MULTIPLE * k)


def _check_int(name: str, value: Any, low: int, high: int | None = None) -> None:
    # bool is an int subclass; True as a leaf count is always a bug.
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"{name} must be an int, got {value!r}")
    if value < low or (high is not None and value > high):
        bound = f"[{low}, {high}]" if high is not None else f">= {low}"
        raise ValueError(f"{name} must be in {bound}, got {value}")


@dataclass(frozen=True, kw_only=True)
class ScannIndexConfig:
    """Everything needed to train a ScaNN index over ``num_vectors`` unit vectors of ``dimension``.

    Attributes:
        dimension: embedding width; AH blocks are cut from it.
        num_vectors: corpus size; every count below is bounded by it.
        scoring: asymmetric hashing (fast, approximate, needs ``reorder_candidates``) or
            exact brute force (tiny corpora, or k so close to n that nothing can be pruned).
        num_leaves: k-means partitions; None means no tree (every query scores every vector).
        num_leaves_to_search: partitions opened per query when k needs no more (see
            `leaves_for_k`, which widens it for large k).
        training_sample_size: vectors sampled to train the tree and the AH codebooks.
        dimensions_per_block: AH block width; 2 is ScaNN's accuracy/speed sweet spot.
        anisotropic_quantization_threshold: AH loss weighting towards the dot product of
            near neighbours (0.2 for unit vectors). Used only with asymmetric hashing.
        reorder_candidates: AH candidates re-scored with exact float32 dot products
            ("pre-reorder k"); required with AH because results promise true scores.
        distance: only "dot_product"; embeddings are L2-normalised, so dot = cosine.
    """

    dimension: int
    num_vectors: int
    scoring: Scoring
    num_leaves: int | None = None
    num_leaves_to_search: int | None = None
    training_sample_size: int | None = None
    dimensions_per_block: int | None = None
    anisotropic_quantization_threshold: float = DEFAULT_ANISOTROPIC_THRESHOLD
    reorder_candidates: int | None = None
    distance: str = "dot_product"

    def __post_init__(self) -> None:
        if not isinstance(self.scoring, Scoring):
            try:
                object.__setattr__(self, "scoring", Scoring(self.scoring))
            except ValueError:
                allowed = [s.value for s in Scoring]
                raise ValueError(f"scoring must be one of {allowed}, got {self.scoring!r}") from None
        _check_int("dimension", self.dimension, 1)
        _check_int("num_vectors", self.num_vectors, 1)
        if self.distance != "dot_product":
            raise ValueError(
                f"distance must be 'dot_product' (embeddings are L2-normalised), got {self.distance!r}"
            )
        self._validate_tree()
        self._validate_scoring()
        if self.training_sample_size is None:
            if self.uses_tree or self.scoring is Scoring.ASYMMETRIC_HASHING:
                raise ValueError("training_sample_size is required to train a tree or AH codebooks")
        else:
            if not (self.uses_tree or self.scoring is Scoring.ASYMMETRIC_HASHING):
                raise ValueError("training_sample_size is set but nothing is trained (brute force, no tree)")
            _check_int("training_sample_size", self.training_sample_size, 1, self.num_vectors)
            if self.num_leaves is not None and self.training_sample_size < self.num_leaves:
                raise ValueError(
                    f"training_sample_size ({self.training_sample_size}) must be >= num_leaves "
                    f"({self.num_leaves}): k-means needs at least one sample per leaf"
                )

    def _validate_tree(self) -> None:
        if (self.num_leaves is None) != (self.num_leaves_to_search is None):
            raise ValueError("num_leaves and num_leaves_to_search must be set together (or neither)")
        if self.num_leaves is not None:
            _check_int("num_leaves", self.num_leaves, 2, self.num_vectors)
            _check_int("num_leaves_to_search", self.num_leaves_to_search, 1, self.num_leaves)

    def _validate_scoring(self) -> None:
        threshold = self.anisotropic_quantization_threshold
        if self.scoring is Scoring.BRUTE_FORCE:
            if self.dimensions_per_block is not None:
                raise ValueError("dimensions_per_block applies to asymmetric hashing, not brute force")
            if self.reorder_candidates is not None:
                raise ValueError("reorder_candidates is pointless after exact brute-force scoring")
            return
        if self.dimensions_per_block is None:
            raise ValueError("asymmetric hashing needs dimensions_per_block")
        _check_int("dimensions_per_block", self.dimensions_per_block, 1, self.dimension)
        if isinstance(threshold, bool) or not isinstance(threshold, int | float) or not 0 <= threshold < 1:
            raise ValueError(f"anisotropic_quantization_threshold must be in [0, 1), got {threshold!r}")
        if self.reorder_candidates is None:
            raise ValueError(
                "asymmetric hashing needs reorder_candidates: AH scores are quantised and "
                "results promise exact dot products"
            )
        _check_int("reorder_candidates", self.reorder_candidates, 1, self.num_vectors)

    @property
    def uses_tree(self) -> bool:
        return self.num_leaves is not None

    def search_leaves(self, k: int) -> int | None:
        """Leaves to open for ``k`` neighbours: the configured count, widened by `leaves_for_k`."""
        if self.num_leaves is None or self.num_leaves_to_search is None:
            return None
        return max(self.num_leaves_to_search, leaves_for_k(self.num_leaves, self.num_vectors, k))

    def search_reorder(self, k: int) -> int:
        """Pre-reorder depth for ``k`` neighbours (k itself when scoring is already exact)."""
        if self.reorder_candidates is None:
            return k
        return max(self.reorder_candidates, reorder_for_k(self.num_vectors, k))

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["scoring"] = self.scoring.value
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ScannIndexConfig:
        """Rebuild (and re-validate) a config; unknown or missing keys are errors, not defaults."""
        if not isinstance(data, dict):
            raise ValueError(f"a ScannIndexConfig is a JSON object, got {type(data).__name__}")
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - names)
        missing = sorted(names - set(data))
        if unknown or missing:
            raise ValueError(f"ScannIndexConfig keys: unknown {unknown}, missing {missing}")
        return cls(**data)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> ScannIndexConfig:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as err:
            raise ValueError(f"ScannIndexConfig JSON does not parse: {err}") from err
        return cls.from_dict(data)

    def __str__(self) -> str:
        if self.uses_tree:
            tree = f"tree: {self.num_leaves} leaves, search {self.num_leaves_to_search}"
            tree += f", train on {self.training_sample_size}"
        else:
            tree = "tree: none (every vector scored)"
        if self.scoring is Scoring.ASYMMETRIC_HASHING:
            score = (
                f"score: AH, {self.dimensions_per_block} dims/block, "
                f"anisotropic threshold {self.anisotropic_quantization_threshold}; "
                f"reorder {self.reorder_candidates} exactly"
            )
        else:
            score = "score: brute force float32 (exact)"
        return (
            f"ScannIndexConfig({self.num_vectors} × {self.dimension}, {self.distance})\n"
            f"  {tree}\n  {score}"
        )
