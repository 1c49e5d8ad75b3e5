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
# as the cluster spread: the hard case, near-uniform), 20k × 32, 200k × 128 and 1M × 128, against
# exact search (bench/recall10k_bench.py, runs/scratch experiments summarised in docs/PERFORMANCE.md).
# Below this many vectors a tree saves nothing worth its training time: score every vector exactly.
BRUTE_FORCE_BELOW = 5_000
# From k = n/20 on, exact scoring beats the index: at 200k × 128 and k = 10,000, exact search took
# 5.9 s per 1,000 queries and the index 7.0 s, at lower recall. At k = n/100 (1M, k = 10,000) the
# index searching every leaf was 1.55x faster than exact at Recall@10k 0.9996.
EXACT_FROM_K_FRACTION = 0.05
# num_leaves = round(LEAVES_PER_ROOT_N · sqrt(n)), at most MAX_LEAVES: ScaNN's README recipe (2,000
# leaves for about a million vectors). On 500,000 shipped-model vectors (bench/results/leaf_count_fair.json
# and an interleaved run of the trees' best settings, docs/PERFORMANCE.md), 1,414 leaves answered k = 100
# at recall 0.95 1.12x faster than 707 (12,489 against 11,112 queries/s) and k = 10 as fast (23,758
# against 23,667); 2,121 gained nothing more at k = 100 (12,635) and lost at k = 10 (21,980).
LEAVES_PER_ROOT_N = 2
MAX_LEAVES = 4_096
# Search at least this fraction of the leaves, whatever k: Recall@10 was 0.93-0.95 at 2 %,
# 0.99 at 5 % and 0.995-0.998 at 10 %.
MIN_SEARCHED_FRACTION = 0.10
# The k an index's stored search settings are sized for (ScaNN's own default num_neighbors): what a
# server gets when it calls ScaNN without overrides. Deeper searches widen per k at search time.
SERVING_K = 10
# The recall against exact search a built index is tuned to reach (`index_builder.recall.tune_recall`).
DEFAULT_TARGET_RECALL = 0.95
# For deeper k, search the fraction DEEP_SEARCH_SCALE × k^DEEP_SEARCH_EXPONENT of the leaves (with
# ~sqrt(n) leaves): a query's top-k spreads over far more leaves than k/n suggests. Recall@k within
# 1 % of exact at 1M × 128 needed 10 % of the leaves for k = 10 (0.997), 20 % for k = 100 (0.992),
# 50 % for k = 1,000 (0.992) and 90-100 % for k = 10,000 (0.9985-0.9996); 200k × 128 needed the same
# 10 % at k = 10. 0.06 × k^0.3 gives 12 %, 24 %, 48 % and 95 %. The linear rule it replaces (leaves
# holding 10·k vectors) kept only 0.76 of Recall@10k at 1M.
DEEP_SEARCH_SCALE = 0.06
DEEP_SEARCH_EXPONENT = 0.3
# ...and never fewer leaves than hold LEAF_OVERSAMPLE × k vectors, which binds when k is a large share
# of the corpus (a search deeper than the index was sized for, or a shard of a partitioned index):
# with k = n/6, 48 % of the leaves kept Recall@k at 0.973, leaves holding 10·k (all of them) 1.0.
LEAF_OVERSAMPLE = 10
# Re-rank REORDER_MULTIPLE × k AH candidates exactly (never fewer than MIN_REORDER): at 1M, k = 1,000
# and 50 % of the leaves, 4·k gave Recall@1000 0.982 and 8·k 0.992; at k = 10,000 over every leaf
# 4·k gave 0.990, 6·k 0.998 and 8·k 0.9996.
REORDER_MULTIPLE = 8
MIN_REORDER = 1_000
# k-means and the AH codebooks train on a sample of max(MIN_TRAINING_SAMPLE, TRAINING_SAMPLES_PER_LEAF ×
# leaves) vectors. At 1M × 128 and 1,000 leaves, 100,000 built in 35 s against 48-51 s for 250,000, with
# the same Recall@10 (0.944-0.951 against 0.949 at 3 leaves) and Recall@10k (0.9993 against 0.9994);
# 2,000 leaves trained on 100,000 (50 per leaf) needed 160 leaves for Recall@10 0.95, on 250,000 six.
# On 500,000 shipped-model vectors and 1,414 leaves, 282,800 instead of 141,400 raised recall at every
# setting by about 0.006 (two trees each; 6 leaves, 20 re-ranked: 0.951 against 0.944-0.945 at k = 10),
# which took the k = 10 schedule from 8 leaves to 6. 250,000 is also ScaNN's README recipe (and what the
# FAISS IVF-PQ it is compared with trains on, bench/serving_bench.py).
MIN_TRAINING_SAMPLE = 250_000
TRAINING_SAMPLES_PER_LEAF = 100
# ScaNN's recommended AH block: 2 dimensions per 16-centre codebook.
DEFAULT_DIMENSIONS_PER_BLOCK = 2
# ScaNN's recommended anisotropic threshold for unit-norm vectors scored by dot product.
DEFAULT_ANISOTROPIC_THRESHOLD = 0.2


class ReorderPrecision(str, Enum):
    """The copy of the vectors the exact re-ranking reads."""

    # The float32 vectors themselves: re-ranked scores are the true dot products.
    FLOAT32 = "float32"
    # int8 copies (4x less memory traffic); scores carry a small quantisation error.
    INT8 = "int8"


# Config fields newer than the first index artifacts: absent from an old manifest means their default.
_ADDED_LATER = ("soar_lambda", "reorder_precision")


class Scoring(str, Enum):
    """How the vectors in the searched leaves are scored before re-ranking."""

    # Product-quantised, 4-bit codes scored with SIMD lookup tables; approximate, so it needs reorder.
    ASYMMETRIC_HASHING = "asymmetric_hashing"
    # Exact float32 dot products; no codebooks, no re-ranking.
    BRUTE_FORCE = "brute_force"


def searched_fraction(num_vectors: int, k: int) -> float:
    """Fraction of the leaves a search for ``k`` of ``num_vectors`` opens to keep Recall@k ≥ 0.99.

    max(MIN_SEARCHED_FRACTION, DEEP_SEARCH_SCALE × k^DEEP_SEARCH_EXPONENT, LEAF_OVERSAMPLE × k/n),
    capped at every leaf.
    """
    deep = DEEP_SEARCH_SCALE * k**DEEP_SEARCH_EXPONENT
    return min(1.0, max(MIN_SEARCHED_FRACTION, deep, LEAF_OVERSAMPLE * k / num_vectors))


def leaves_for_k(num_leaves: int, num_vectors: int, k: int) -> int:
    """Leaves a search for ``k`` neighbours opens: `searched_fraction` of them, rounded up."""
    return max(1, min(num_leaves, math.ceil(num_leaves * searched_fraction(num_vectors, k) - 1e-9)))


def reorder_for_k(num_vectors: int, k: int) -> int:
    """Candidates to re-rank exactly for ``k`` neighbours: REORDER_MULTIPLE × k, capped at the corpus."""
    return min(num_vectors, REORDER_MULTIPLE * k)


# ScaNN's asymmetric hashing codebooks: 16 centres per block of dimensions.
AH_CENTRES_PER_BLOCK = 16


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
        soar_lambda: SOAR spilling (each vector also lands in a second leaf, chosen so its
            residual is nearly orthogonal to the first); None means no spilling. Needs a tree.
        reorder_precision: float32 (exact scores) or int8 (faster, approximate scores).
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
    soar_lambda: float | None = None
    reorder_precision: ReorderPrecision = ReorderPrecision.FLOAT32
    distance: str = "dot_product"

    def __post_init__(self) -> None:
        self._coerce_enum("scoring", Scoring)
        self._coerce_enum("reorder_precision", ReorderPrecision)
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

    def _coerce_enum(self, name: str, enum: type[Enum]) -> None:
        """Accept an enum field as its member or its value (as JSON stores it)."""
        value = getattr(self, name)
        if isinstance(value, enum):
            return
        try:
            object.__setattr__(self, name, enum(value))
        except ValueError:
            allowed = [member.value for member in enum]
            raise ValueError(f"{name} must be one of {allowed}, got {value!r}") from None

    def _validate_tree(self) -> None:
        if (self.num_leaves is None) != (self.num_leaves_to_search is None):
            raise ValueError("num_leaves and num_leaves_to_search must be set together (or neither)")
        if self.num_leaves is not None:
            _check_int("num_leaves", self.num_leaves, 2, self.num_vectors)
            _check_int("num_leaves_to_search", self.num_leaves_to_search, 1, self.num_leaves)
        if self.soar_lambda is not None:
            if self.num_leaves is None:
                raise ValueError("soar_lambda spills vectors into a second leaf: it needs a tree")
            lam = self.soar_lambda
            if isinstance(lam, bool) or not isinstance(lam, int | float) or not 0 < lam <= 10:
                raise ValueError(f"soar_lambda must be in (0, 10], got {lam!r}")

    def _validate_scoring(self) -> None:
        threshold = self.anisotropic_quantization_threshold
        if self.scoring is Scoring.BRUTE_FORCE:
            if self.dimensions_per_block is not None:
                raise ValueError("dimensions_per_block applies to asymmetric hashing, not brute force")
            if self.reorder_candidates is not None:
                raise ValueError("reorder_candidates is pointless after exact brute-force scoring")
            if self.reorder_precision is not ReorderPrecision.FLOAT32:
                raise ValueError("reorder_precision applies to re-ranking after AH, not brute force")
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
        trained_on = min(self.training_sample_size or self.num_vectors, self.num_vectors)
        if trained_on < AH_CENTRES_PER_BLOCK:
            # ScaNN would fail inside its C++ ("clusters per block is greater than training data size").
            raise ValueError(
                f"asymmetric hashing learns {AH_CENTRES_PER_BLOCK} centres per block, from at least as many "
                f"vectors; this index (or shard) trains on {trained_on}: use --scoring brute_force, fewer "
                "--num_index_shards, or a larger --training_sample_size"
            )

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
        data["reorder_precision"] = self.reorder_precision.value
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ScannIndexConfig:
        """Rebuild (and re-validate) a config; unknown keys are errors.

        Required keys must be present; the optional ones (soar_lambda, reorder_precision) were added
        after the first artifacts were written and take their defaults, which is what those indexes used.
        """
        if not isinstance(data, dict):
            raise ValueError(f"a ScannIndexConfig is a JSON object, got {type(data).__name__}")
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - names)
        missing = sorted(names - set(data) - set(_ADDED_LATER))
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
            if self.soar_lambda is not None:
                tree += f", SOAR spilling λ={self.soar_lambda}"
        else:
            tree = "tree: none (every vector scored)"
        if self.scoring is Scoring.ASYMMETRIC_HASHING:
            score = (
                f"score: AH, {self.dimensions_per_block} dims/block, "
                f"anisotropic threshold {self.anisotropic_quantization_threshold}; "
                f"reorder {self.reorder_candidates} ({self.reorder_precision.value})"
            )
        else:
            score = "score: brute force float32 (exact)"
        return (
            f"ScannIndexConfig({self.num_vectors} × {self.dimension}, {self.distance})\n  {tree}\n  {score}"
        )
