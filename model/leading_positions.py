"""BERT's last layer computed only where the encoder reads it: the first few positions.

CLS-pooled encoders (BiBERT, MtBERT) read one position of the last layer's output, MpBERT and
first-k readers a handful. Every sub-layer of a transformer layer but attention works position
by position, and attention needs every position only as keys and values. So the last layer's
query projection, attention output, feed-forward network and layer norms can run on the leading
positions alone, while keys and values still come from the whole sequence. With MiniLM-L6 at 64
tokens this removes about five sixths of one layer in six: about 14 % of the encoder's inference
work, with outputs equal to the full forward pass up to float rounding (tests/test_leading_positions.py).

Used for inference only (`not encoder.training`): training keeps the library's forward, dropout
and all.
"""

from __future__ import annotations

import torch
from torch.nn import functional
from transformers import BertModel


def additive_attention_bias(attention_mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """(B, 1, 1, L): 0 where a token may be attended to, the dtype's minimum at padding."""
    blocked = ~attention_mask.bool()[:, None, None, :]
    return torch.zeros(blocked.shape, dtype=dtype, device=attention_mask.device).masked_fill(
        blocked, torch.finfo(dtype).min
    )


def last_hidden_at_leading_positions(
    bert: BertModel, input_ids: torch.Tensor, attention_mask: torch.Tensor, positions: int
) -> torch.Tensor:
    """The last layer's output at positions [0, positions): (B, positions, H).

    Equal to `bert(input_ids, attention_mask).last_hidden_state[:, :positions]` in eval mode.
    """
    if positions < 1:
        raise ValueError(f"positions must be >= 1, got {positions}")
    layers = bert.encoder.layer
    hidden = bert.embeddings(input_ids=input_ids)
    bias = additive_attention_bias(attention_mask, hidden.dtype)
    for layer in layers[:-1]:
        hidden = layer(hidden, bias)
    last = layers[-1]
    attention = last.attention.self
    batch = hidden.shape[0]
    leading = hidden[:, :positions]

    def heads(states: torch.Tensor) -> torch.Tensor:  # (B, n, H) -> (B, heads, n, H / heads)
        return states.view(states.shape[0], states.shape[1], -1, attention.attention_head_size).transpose(
            1, 2
        )

    context = functional.scaled_dot_product_attention(
        heads(attention.query(leading)),
        heads(attention.key(hidden)),
        heads(attention.value(hidden)),
        attn_mask=bias,
        scale=attention.scaling,
    )
    context = context.transpose(1, 2).reshape(batch, leading.shape[1], -1)
    attended = last.attention.output(context, leading)  # dense, dropout, LayerNorm(x + residual)
    return last.output(last.intermediate(attended), attended)
