"""UHD-BERT: ultra-high dimensional sparse bucketed representations (uhd-bert).

Each chosen BERT layer j feeds its own winner-take-all layer: every token is
projected to n dimensions and keeps its top-k (Eq. 2-3), the token vectors are
max-pooled over the real tokens and L2-normalised into a bucket B^j (Eq. 4-6).
Relevance is the sum of bucket-wise dot products, Rel(q, d) = Σ_j B_q^j · B_d^j (Eq. 7).

How the sparse vector is exposed:

- `UhdOutput.buckets` is the dense [batch, buckets, n] tensor of the L2-normalised buckets;
- `embedding` is their concatenation divided by sqrt(buckets). It is unit length,
  as `EncoderOutput` promises, and embedding_q · embedding_d = Rel(q, d) / buckets,
  so every consumer of `embedding` (exact search, the ranking task's re-ranking)
  ranks exactly as Eq. 7 does. Its width, n × buckets, is the config's projection_dim;
- `sparse_buckets` gives the (indices, values) of each bucket for an inverted index,
  and `model.sparse.binarize` the {0, 1} vectors of binary matching (§3.4, §3.7).

k is not a weight: `forward(..., winners=k)` or `set_winners(k)` changes it at inference.

Training uses the paper's own objective, the hinge loss of Eq. 8 over Rel(q, d) with margin 1
(`retrieval_loss`), not the softmax cross-entropy the other variants share.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import torch
from torch import nn
from torch.nn import functional

from model.batch import EncoderOutput, Side, TokenizedBatch
from model.config import EncoderConfig
from model.encoder import DenseEncoder
from model.sparse import SparseVector, WinnerTakeAll, to_sparse

# Eq. 8 (uhd-bert) writes the margin as the constant 1; A.1 lists no other value, so it is no setting.
HINGE_MARGIN = 1.0
# §4.2 (uhd-bert): buckets on BERT-base layers {2, 4, 6, 8, 10, 12}, i.e. six buckets spread evenly
# over the depth. `paper_bucket_layers` keeps that shape on any backbone.
PAPER_BUCKETS = 6


def paper_bucket_layers(depth: int) -> tuple[int, ...]:
    """Layers ⌈i·V/6⌉ for i = 1..6 of a V-layer backbone, without repeats (§4.2, uhd-bert).

    V = 12 gives the paper's {2, 4, 6, 8, 10, 12}; the bundled 6-layer MiniLM gets every layer,
    {1, ..., 6}, each standing for the pair of BERT-base layers at the same relative depth; a
    backbone shallower than six layers gets all of its layers.
    """
    return tuple(sorted({math.ceil(i * depth / PAPER_BUCKETS) for i in range(1, PAPER_BUCKETS + 1)}))


@dataclass(frozen=True)
class UhdConfig(EncoderConfig):
    """UHD-BERT settings (uhd-bert §3, Appendix A.1).

    Attributes:
        dimensions: n, the width of each bucket (81,920 in the paper).
        winners: k, the non-zero dimensions each token keeps during training (80 in
            the paper); inference may use another k.
        bucket_layers: 1-based BERT layers that each feed a bucket (Eq. 5-6); empty means the
            paper's choice, six buckets spread evenly over the depth (`paper_bucket_layers`:
            {2, 4, ..., 12} of BERT-base in §4.2, every layer of the 6-layer MiniLM). Pass
            (V,) for the single last-layer bucket of §3.3 and A.2. Layers after the deepest
            one are dropped.
        weight_sparsity: fraction of each WTA unit's input weights fixed at zero (0.7 in A.1,
            chosen from {0.3, 0.5, 0.7}).
        projection_dim: derived, n × buckets, the width of `embedding`; whatever is
            passed is replaced, so config.json states the true embedding size.
    """

    variant: ClassVar[str] = "uhd"
    model_id: str = "uhd"
    dimensions: int = 81_920
    winners: int = 80
    bucket_layers: tuple[int, ...] = ()
    weight_sparsity: float = 0.7

    def __post_init__(self) -> None:
        super().__post_init__()
        depth = int(self.backbone.get("num_hidden_layers", 0))
        layers = tuple(int(layer) for layer in self.bucket_layers) or paper_bucket_layers(depth)
        object.__setattr__(self, "bucket_layers", layers)
        if any(not 1 <= layer <= depth for layer in layers) or len(set(layers)) != len(layers):
            raise ValueError(f"bucket_layers must be distinct layers in [1, {depth}], got {layers}")
        if self.dimensions < 1 or not 1 <= self.winners <= self.dimensions:
            raise ValueError(f"need 1 <= winners <= dimensions, got k={self.winners}, n={self.dimensions}")
        if not 0 <= self.weight_sparsity < 1:
            raise ValueError(f"weight_sparsity must be in [0, 1), got {self.weight_sparsity}")
        object.__setattr__(self, "projection_dim", self.dimensions * len(layers))


@dataclass
class UhdOutput(EncoderOutput):
    """Adds the L2-normalised buckets, [batch, buckets, n], in `bucket_layers` order."""

    buckets: torch.Tensor | None = None


class UhdEncoder(DenseEncoder):
    config_class = UhdConfig

    def __init__(self, config: UhdConfig) -> None:
        super().__init__(config)
        hidden, layers = config.hidden_size, config.bucket_layers
        self.wta_layers = nn.ModuleDict(
            {
                name: nn.ModuleList(
                    WinnerTakeAll(hidden, config.dimensions, config.weight_sparsity) for _ in layers
                )
                for name in self.transformers
            }
        )
        self.winners = config.winners

    def transformer_layers(self) -> int:
        return max(self.config.bucket_layers)

    def set_winners(self, k: int) -> None:
        """Change k for every later forward pass; the weights and the saved config are untouched."""
        if not 1 <= k <= self.config.dimensions:
            raise ValueError(f"k must be in [1, {self.config.dimensions}], got {k}")
        self.winners = k

    def forward(self, batch: TokenizedBatch, side: Side, winners: int | None = None) -> UhdOutput:
        k = self.winners if winners is None else winners
        states = self.transformer(side)(
            input_ids=batch.input_ids, attention_mask=batch.attention_mask, output_hidden_states=True
        ).hidden_states  # states[0] is the embedding layer, states[j] the output of layer j
        wta = self.wta_layers["shared" if self.config.shared_towers else Side(side).value]
        buckets = torch.stack(
            [
                # Eq. 4: max-pool the sparse token vectors, then L2-normalise the bucket.
                functional.normalize(layer_wta.pooled(states[j], k, batch.attention_mask), dim=-1)
                for j, layer_wta in zip(self.config.bucket_layers, wta, strict=True)
            ],
            dim=1,
        )
        embedding = buckets.flatten(1) / math.sqrt(buckets.shape[1])
        return UhdOutput(embedding=embedding, buckets=buckets)

    @staticmethod
    def relevance(queries: UhdOutput, documents: UhdOutput) -> torch.Tensor:
        """Rel(q, d) = Σ_j B_q^j · B_d^j (Eq. 7, uhd-bert): [queries, documents]."""
        return torch.einsum("qbn,dbn->qd", queries.buckets, documents.buckets)

    def retrieval_loss(
        self, queries: EncoderOutput, documents: EncoderOutput, positives: int
    ) -> torch.Tensor:
        """Eq. 8 (uhd-bert) over Rel(q, d) = Σ_j B_q^j · B_d^j (Eq. 7), margin 1, averaged over queries.

        Query i's positive is document i; every other document of the batch is its negative: the
        other queries' positives (the in-batch negatives of §3.6) and all hard negatives, whichever
        query they were mined for. (A.1 trains on positives only; hard negatives, when the data has
        them, are simply more members of D^n.)
        """
        if not (isinstance(queries, UhdOutput) and isinstance(documents, UhdOutput)):
            raise TypeError("UHD's retrieval loss needs the buckets of UhdOutput on both sides")
        if queries.buckets is None or documents.buckets is None:
            raise TypeError("UHD's retrieval loss needs the buckets of UhdOutput on both sides")
        if queries.buckets.shape[0] != positives:
            raise ValueError(f"{queries.buckets.shape[0]} queries for {positives} positives")
        return in_batch_hinge_loss(self.relevance(queries, documents), HINGE_MARGIN)

    @staticmethod
    def sparse_buckets(output: UhdOutput) -> list[list[SparseVector]]:
        """Per example, per bucket, the non-zero (indices, values): what an inverted index stores."""
        per_bucket = [to_sparse(output.buckets[:, j]) for j in range(output.buckets.shape[1])]
        return [list(row) for row in zip(*per_bucket, strict=True)]


def in_batch_hinge_loss(scores: torch.Tensor, margin: float = HINGE_MARGIN) -> torch.Tensor:
    """Eq. 8 (uhd-bert) with in-batch negatives, averaged over queries.

    `scores` is Rel(q_i, d_j) for queries i and documents j; document i is query i's
    positive and every other document a negative: Σ_j max(0, margin - Rel(q_i, d_i) + Rel(q_i, d_j)).
    Columns past the queries' positives (width > count) are extra negatives of every query,
    such as hard negatives.
    """
    count, width = scores.shape
    if width < count:
        raise ValueError(f"scores need a positive column per query: {count} queries, {width} documents")
    positives = scores[:, :count].diagonal().unsqueeze(1)
    hinge = (margin - positives + scores).clamp(min=0)
    own = torch.eye(count, width, dtype=torch.bool, device=scores.device)
    return hinge.masked_fill(own, 0.0).sum(dim=1).mean()
