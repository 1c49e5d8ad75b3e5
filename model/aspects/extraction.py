"""Aspect representations: how one embedding per aspect is read off the transformer output.

Each extractor maps BERT's sequence output (B, L, H) and its attention mask to
`ExtractedSlots`: named encodings (B, S, H). The names, never positions, are what
the prediction heads and fusion networks look up. `positions_read` says how many
leading positions of the sequence output an extractor reads (None: all of them),
so inference can skip the rest of the last layer (`model.leading_positions`).

- `AspectExtractionNetwork`: learned aspect queries attending over the tokens
  (madral-kdd22 Eq. 1-2; "extra k" in repro-ecir24 §4).
- `FirstTokens`: the encodings of content tokens 1..k, one per aspect (repro-ecir24 §4, en-v2).
- `MultiTokenPooling`: the first m token encodings, CLS included (MpBERT, madral-kdd22 §8.2).
- `ClsAsAspects`: every aspect read from CLS (MtBERT, madral-kdd22 §8.2).
"""

from __future__ import annotations

import enum
import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import nn

from model.pooling import Pooling, pool, positions_for


class Representation(str, enum.Enum):
    """Where the aspect embeddings come from (repro-ecir24 §4)."""

    ATTENTION = "attention"  # AEN with learned aspect queries (madral-kdd22 §4)
    FIRST_TOKENS = "first_tokens"  # content tokens 1..k (repro-ecir24 en-v2)
    CLS = "cls"  # the CLS encoding for every aspect (MtBERT)


@dataclass
class ExtractedSlots:
    names: tuple[str, ...]
    encodings: torch.Tensor  # (B, S, H), slot i is names[i]
    attention: torch.Tensor | None = None  # (B, S, L) for attention-based extraction

    def __post_init__(self) -> None:
        if self.encodings.shape[1] != len(self.names):
            raise ValueError(f"{len(self.names)} slot names for {self.encodings.shape[1]} encodings")

    def get(self, name: str) -> torch.Tensor:
        return self.encodings[:, self.names.index(name)]

    def select(self, names: Sequence[str]) -> torch.Tensor:
        """(B, len(names), H) in the order asked for."""
        return self.encodings[:, [self.names.index(name) for name in names]]


class AspectExtractionNetwork(nn.Module):
    """E_A = softmax((Q W^Q)(φ W^K)^T / sqrt(H)) φ W^V  (Eq. 1-2, madral-kdd22).

    Q holds one learned query per slot (the explicit aspects, plus OTHER when the
    fusion uses it). CLS is masked because its encoding already mixes every aspect
    (madral-kdd22 §4); padding is masked because it is not text. [SEP] stays, as
    in Table 2 of the paper. A single head, as in Eq. 2.
    """

    min_length = 1
    positions_read: int | None = None  # every token is a key

    def __init__(self, names: Sequence[str], hidden: int, initializer_range: float = 0.02) -> None:
        super().__init__()
        self.names = tuple(names)
        self.queries = nn.Parameter(torch.randn(len(self.names), hidden) * initializer_range)
        # Eq. 1 has projection matrices only, hence no biases.
        self.w_query = nn.Linear(hidden, hidden, bias=False)
        self.w_key = nn.Linear(hidden, hidden, bias=False)
        self.w_value = nn.Linear(hidden, hidden, bias=False)
        self.scale = 1.0 / math.sqrt(hidden)

    def forward(self, hidden: torch.Tensor, attention_mask: torch.Tensor) -> ExtractedSlots:
        query = self.w_query(self.queries)  # (S, H)
        keys, values = self.w_key(hidden), self.w_value(hidden)  # (B, L, H)
        scores = torch.einsum("sh,blh->bsl", query, keys) * self.scale
        attend = attention_mask.bool().clone()
        attend[:, 0] = False  # CLS
        # finfo.min rather than -inf: a row with nothing to attend to gives no NaN.
        scores = scores.masked_fill(~attend[:, None, :], torch.finfo(scores.dtype).min)
        weights = scores.softmax(dim=-1)
        return ExtractedSlots(self.names, weights @ values, weights)


class FirstTokens(nn.Module):
    """Aspect `order[i]` is the encoding at position i + 1, the i-th content token after CLS.

    repro-ecir24 §8.3 finds (category, color, brand) best: the most important aspect
    gets the earliest token. Texts shorter than k wordpieces are padded by the
    encoder (see `min_length`), so the last aspects read [SEP] or [PAD] encodings,
    as with max-length padding.
    """

    def __init__(self, names: Sequence[str], order: Sequence[str] | None = None) -> None:
        super().__init__()
        self.names = tuple(names)
        order = tuple(order or self.names)
        if sorted(order) != sorted(self.names):
            raise ValueError(f"first-token order {order} must name each of {self.names} once")
        self.positions = tuple(1 + order.index(name) for name in self.names)
        self.min_length = 1 + len(order)
        self.positions_read = self.min_length

    def forward(self, hidden: torch.Tensor, attention_mask: torch.Tensor) -> ExtractedSlots:
        return ExtractedSlots(self.names, hidden[:, list(self.positions)])


class MultiTokenPooling(nn.Module):
    """MpBERT's m slots: the encodings of the first m tokens, CLS included (madral-kdd22 §8.2)."""

    def __init__(self, tokens: int) -> None:
        super().__init__()
        if tokens < 1:
            raise ValueError(f"multi-token pooling needs at least one token, got {tokens}")
        self.names = tuple(f"token_{i}" for i in range(tokens))
        self.min_length = tokens
        self.positions_read = tokens

    def forward(self, hidden: torch.Tensor, attention_mask: torch.Tensor) -> ExtractedSlots:
        return ExtractedSlots(self.names, hidden[:, : self.min_length])


class ClsAsAspects(nn.Module):
    """MtBERT: every aspect is predicted from the one summary encoding (madral-kdd22 §8.2: CLS).

    With `Pooling.MEAN` the summary is the mean of the token encodings (`model.pooling`), the
    encoding a sentence-embedding backbone was trained to produce.
    """

    min_length = 1

    def __init__(self, names: Sequence[str], pooling: Pooling = Pooling.CLS) -> None:
        super().__init__()
        self.names = tuple(names)
        self.pooling = Pooling(pooling)
        self.positions_read = positions_for(self.pooling)

    def forward(self, hidden: torch.Tensor, attention_mask: torch.Tensor) -> ExtractedSlots:
        summary = pool(hidden, attention_mask, self.pooling)[:, None]
        return ExtractedSlots(self.names, summary.expand(-1, len(self.names), -1))


def build_extractor(
    representation: Representation,
    names: Sequence[str],
    hidden: int,
    order: Sequence[str] | None = None,
    initializer_range: float = 0.02,
    pooling: Pooling = Pooling.CLS,
) -> nn.Module:
    """The extractor a config's `representation` names, over slots `names`."""
    builders = {
        Representation.ATTENTION: lambda: AspectExtractionNetwork(names, hidden, initializer_range),
        Representation.FIRST_TOKENS: lambda: FirstTokens(names, order),
        Representation.CLS: lambda: ClsAsAspects(names, pooling),
    }
    return builders[Representation(representation)]()
