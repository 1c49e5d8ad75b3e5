"""UHD-BERT: ultra-high dimensional sparse bucketed representations (uhd-bert).

Each chosen BERT layer j feeds its own winner-take-all layer: every token is
projected to n dimensions and keeps its top-k (Eq. 2-3), the token vectors are
max-pooled over the real tokens and L2-normalised into a bucket B^j (Eq. 4-6).
Relevance is the sum of bucket-wise dot products, Rel(q, d) = Σ_j B_q^j · B_d^j (Eq. 7).

How the sparse vector is exposed:

- `UhdOutput.buckets` is the dense [batch, buckets, n] tensor of the L2-normalised buckets;
- `embedding` is their concatenation divided by sqrt(buckets). It is unit length,
  as `EncoderOutput` promises, and embedding_q · embedding_d = Rel(q, d) / buckets,
  so every consumer of `embedding` (the trainer's in-batch softmax, exact search)
  ranks exactly as Eq. 7 does. Its width, n × buckets, is the config's projection_dim;
- `sparse_buckets` gives the (indices, values) of each bucket for an inverted index,
  and `model.sparse.binarize` the {0, 1} vectors of binary matching (§3.4, §3.7).

k is not a weight: `forward(..., winners=k)` or `set_winners(k)` changes it at inference.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import torch
from torch import nn
from torch.nn import functional

from model.config import EncoderConfig
from model.encoder import DenseEncoder, EncoderOutput, Side, TokenizedBatch
from model.sparse import SparseVector, WinnerTakeAll, masked_max_pool, to_sparse


@dataclass(frozen=True)
class UhdConfig(EncoderConfig):
    """UHD-BERT settings (uhd-bert §3, Appendix A.1).

    Attributes:
        dimensions: n, the width of each bucket (81,920 in the paper).
        winners: k, the non-zero dimensions each token keeps during training (80 in
            the paper); inference may use another k.
        bucket_layers: 1-based BERT layers that each feed a bucket (Eq. 5-6); empty
            means the last layer only. Layers after the deepest one are dropped.
        weight_sparsity: fraction of each WTA unit's input weights fixed at zero (0.7 in A.1).
        projection_dim: derived, n × buckets, the width of `embedding`; whatever is
            passed is replaced, so config.json states the true embedding size.
    """

    variant: ClassVar[str] = "uhd"
    model_id: str = "uhd"
    dimensions: int = 81_920
    winners: int = 80
    bucket_layers: tuple[int, ...] = ()
    weight_sparsity: float = 0.0

    def __post_init__(self) -> None:
        super().__post_init__()
        depth = int(self.backbone.get("num_hidden_layers", 0))
        layers = tuple(int(layer) for layer in self.bucket_layers) or (depth,)
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
                functional.normalize(masked_max_pool(layer_wta(states[j], k), batch.attention_mask), dim=-1)
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

    @staticmethod
    def sparse_buckets(output: UhdOutput) -> list[list[SparseVector]]:
        """Per example, per bucket, the non-zero (indices, values): what an inverted index stores."""
        per_bucket = [to_sparse(output.buckets[:, j]) for j in range(output.buckets.shape[1])]
        return [list(row) for row in zip(*per_bucket, strict=True)]


def in_batch_hinge_loss(scores: torch.Tensor, margin: float = 1.0) -> torch.Tensor:
    """Eq. 8 (uhd-bert) with in-batch negatives, averaged over queries.

    `scores` is Rel(q_i, d_j) for queries i and documents j; document i is query i's
    positive and every other document a negative: Σ_j max(0, margin - Rel(q_i, d_i) + Rel(q_i, d_j)).
    """
    count, width = scores.shape
    positives = scores[:, :count].diagonal().unsqueeze(1)
    hinge = (margin - positives + scores).clamp(min=0)
    own = torch.eye(count, width, dtype=torch.bool, device=scores.device)
    return hinge.masked_fill(own, 0.0).sum(dim=1).mean()
