"""Winner-take-all sparsification (uhd-bert §3.3, Eq. 2-4).

A WTA layer is a linear map to n dimensions that keeps only the top-k activations
of each token (Eq. 2-3); the token vectors are then max-pooled into one bucket
(Eq. 4). k is an argument, not a weight, so it can change at inference time
without retraining (§3.3, Appendix A.1 trains with k = 400 and tests smaller k).
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional


def _require_winners(k: int, dimensions: int) -> None:
    if not 1 <= k <= dimensions:
        raise ValueError(f"k must be in [1, {dimensions}], got {k}")


def winner_take_all(scores: torch.Tensor, k: int) -> torch.Tensor:
    """Keep the k largest entries of the last dimension, zero the others (Eq. 3, uhd-bert).

    Exactly k entries survive per vector (ties broken by `topk`). The winners are
    scattered into zeros, so the gradient reaches the winning inputs unchanged and
    every non-winner gets exactly zero: "only the gradients flowing back through the
    winning dimensions" (§3.3).
    """
    _require_winners(k, scores.shape[-1])
    values, indices = scores.topk(k, dim=-1)
    return torch.zeros_like(scores).scatter(-1, indices, values)


def masked_max_pool(tokens: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """Max over the real tokens of [batch, tokens, n] -> [batch, n] (Eq. 4, uhd-bert).

    Padding is set to -inf first, so a padded position can never win a dimension,
    whatever the transformer computed for it.
    """
    padding = ~attention_mask.bool().unsqueeze(-1)
    return tokens.masked_fill(padding, float("-inf")).amax(dim=1)


def pooled_winners(scores: torch.Tensor, k: int, attention_mask: torch.Tensor) -> torch.Tensor:
    """`masked_max_pool(winner_take_all(scores, k), attention_mask)`, [batch, tokens, n] -> [batch, n].

    The same values (Eq. 3, then Eq. 4) without building the [batch, tokens, n] tensor of mostly zeros
    that Eq. 3 writes, or its masked copy: only each token's k winners are scattered into the pooled
    vector. With n in the thousands those two copies, not the top-k, cost most of a bucket's pooling
    and memory: 207 -> 74 ms for 64 texts of 64 tokens at n 8,192 on 2 CPU cores, and a UHD model's
    catalog encoding 72 -> 83 products/s, its postings unchanged (measured 28 Nov 2026).

    Eq. 3 leaves a 0 in every dimension a token did not pick, so a dimension that some real token did
    not pick pools to at least 0; one that every real token picked pools to the largest of their values,
    negative or not. Gradients reach the winning scores as in the composition, except where a winner
    scores exactly 0 against a non-winner's 0.
    """
    _require_winners(k, scores.shape[-1])
    batch, tokens, dimensions = scores.shape
    values, indices = scores.topk(k, dim=-1)
    real = attention_mask.bool()
    values = values.masked_fill(~real.unsqueeze(-1), float("-inf"))  # a padded token never wins a dimension
    winners = indices.reshape(batch, tokens * k)
    pooled = scores.new_full((batch, dimensions), float("-inf")).scatter_reduce(
        1, winners, values.reshape(batch, -1), "amax"
    )
    real_winners = real.unsqueeze(-1).expand(batch, tokens, k).reshape(batch, -1).to(torch.int32)
    picked_by = torch.zeros(batch, dimensions, dtype=torch.int32, device=scores.device)
    picked_by = picked_by.scatter_add(1, winners, real_winners)
    not_picked_by_all = picked_by < real.sum(dim=1, keepdim=True)
    return torch.where(not_picked_by_all, pooled.clamp(min=0), pooled)


class WinnerTakeAll(nn.Module):
    """z = E W + b with W in R^{h x n} (Eq. 2), then top-k per token (Eq. 3).

    `weight_sparsity` zeroes that fraction of the inputs of every output unit, fixed
    at construction (Ahmad & Scheinkman's sparse weights, 0.7 in uhd-bert A.1). The
    mask is a buffer saved with the weights, so a reloaded model keeps its wiring.

    The masked weights are zero in `linear.weight` itself, not only in the product
    `scores` uses: that product gives them exactly zero gradient, so Adam's moments
    stay zero and decoupled weight decay (w·(1 - lr·λ)) keeps a zero at zero, and
    the stored weights say what the layer computes.
    """

    def __init__(self, in_features: int, dimensions: int, weight_sparsity: float = 0.0) -> None:
        super().__init__()
        if not 0 <= weight_sparsity < 1:
            raise ValueError(f"weight_sparsity must be in [0, 1), got {weight_sparsity}")
        self.linear = nn.Linear(in_features, dimensions)
        mask = torch.ones(dimensions, in_features, dtype=torch.bool)
        zeroed = round(weight_sparsity * in_features)
        if zeroed:
            order = torch.rand(dimensions, in_features).argsort(dim=1)
            mask.scatter_(1, order[:, :zeroed], False)
        self.register_buffer("weight_mask", mask)
        with torch.no_grad():
            self.linear.weight.mul_(mask)

    @property
    def dimensions(self) -> int:
        return self.linear.out_features

    def scores(self, tokens: torch.Tensor) -> torch.Tensor:
        """Eq. 2 on the masked weights; masked weights also get zero gradient."""
        return functional.linear(tokens, self.linear.weight * self.weight_mask, self.linear.bias)

    def forward(self, tokens: torch.Tensor, k: int) -> torch.Tensor:
        return winner_take_all(self.scores(tokens), k)

    def pooled(self, tokens: torch.Tensor, k: int, attention_mask: torch.Tensor) -> torch.Tensor:
        """Eq. 2-4 for a bucket: the max over the real tokens of `forward`, by `pooled_winners`."""
        return pooled_winners(self.scores(tokens), k, attention_mask)
