"""Aspect guiding tokens (mural-wsdm24 §4.1, §4.3) and the MLM that trains them (Eq. 8).

MURAL inserts one guiding token per aspect group right after [CLS] and before the
content, X = (x_0, o_1, ..., o_K, x_1, ..., x_n). The tokens are ordinary vocabulary
entries (added to the tokenizer, rows appended to the embedding table), so the
masked-language-model objective trains them as context: they are never masked
themselves, but every masked content token is predicted with them in view.

Here: inserting the tokens into tokenised batches and growing a tower's embedding
table by the guiding rows; BERT's 80/10/10 masking and the MLM head are in `model.mlm`.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn
from transformers import BertModel

from model.batch import TokenizedBatch

# The MLM itself is model-agnostic and lives in model.mlm; re-exported for existing callers.
from model.mlm import IGNORE_INDEX as IGNORE_INDEX
from model.mlm import MlmHead as MlmHead
from model.mlm import mask_for_mlm as mask_for_mlm


def guiding_token_text(group_name: str) -> str:
    """The token string of an aspect group, e.g. 'category' -> '[ASP_CATEGORY]'."""
    return f"[ASP_{group_name.upper()}]"


def insert_guiding_tokens(
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    token_ids: Sequence[int],
    *,
    max_length: int | None = None,
    pad_token_id: int = 0,
) -> TokenizedBatch:
    """Put `token_ids` at positions 1..K of every row, shifting the content right.

    Rows are right-padded tokenizer output that starts with [CLS]. With `max_length`,
    rows that would grow past it lose content tokens from the end, but keep their last
    real token ([SEP]) so the sequence still looks like what BERT was trained on.
    """
    batch_size, length = input_ids.shape
    guides = torch.as_tensor(list(token_ids), dtype=input_ids.dtype, device=input_ids.device)
    count = len(guides)
    new_length = length + count if max_length is None else min(length + count, max_length)
    if new_length < count + 2:
        raise ValueError(
            f"max_length={max_length} leaves no room for [CLS], {count} guiding tokens and [SEP]"
        )
    kept = new_length - 1 - count  # content positions that survive, [CLS] excluded
    ids = torch.cat(
        [input_ids[:, :1], guides.expand(batch_size, count), input_ids[:, 1 : 1 + kept]], dim=1
    ).clone()
    guide_mask = torch.ones_like(attention_mask[:, :1]).expand(batch_size, count)
    mask = torch.cat([attention_mask[:, :1], guide_mask, attention_mask[:, 1 : 1 + kept]], dim=1)
    real_lengths = attention_mask.sum(dim=1)
    cut = real_lengths + count > new_length
    if cut.any():
        rows = cut.nonzero(as_tuple=True)[0]
        ids[rows, new_length - 1] = input_ids[rows, real_lengths[rows] - 1]
    ids[mask == 0] = pad_token_id
    return TokenizedBatch(ids, mask)


def grow_word_embeddings(transformer: BertModel, extra: int) -> None:
    """Append `extra` rows for the guiding tokens, initialised like BERT's own rows."""
    old = transformer.get_input_embeddings()
    new = nn.Embedding(old.num_embeddings + extra, old.embedding_dim, padding_idx=old.padding_idx)
    with torch.no_grad():
        new.weight[: old.num_embeddings] = old.weight
        new.weight[old.num_embeddings :].normal_(0.0, transformer.config.initializer_range)
    transformer.set_input_embeddings(new)
    transformer.config.vocab_size = new.num_embeddings
