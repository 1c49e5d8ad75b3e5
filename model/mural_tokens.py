"""Aspect guiding tokens (mural-wsdm24 §4.1, §4.3) and the MLM that trains them (Eq. 8).

MURAL inserts one guiding token per aspect group right after [CLS] and before the
content, X = (x_0, o_1, ..., o_K, x_1, ..., x_n). The tokens are ordinary vocabulary
entries (added to the tokenizer, rows appended to the embedding table), so the
masked-language-model objective trains them as context: they are never masked
themselves, but every masked content token is predicted with them in view.

Here: inserting the tokens into tokenised batches, BERT's 80/10/10 masking, the MLM
head, and growing a tower's embedding table by the guiding rows.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn
from transformers import BertConfig, BertModel
from transformers.models.bert.modeling_bert import BertPredictionHeadTransform

from model.encoder import TokenizedBatch

IGNORE_INDEX = -100  # what torch's cross-entropy skips: positions that are not MLM targets


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


def mask_for_mlm(
    input_ids: torch.Tensor,
    special_token_ids: Sequence[int],
    probability: float,
    generator: torch.Generator,
    *,
    mask_token_id: int,
    vocab_size: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """BERT's masking for Eq. 8 (mural-wsdm24): returns (masked input ids, labels).

    Each token outside `special_token_ids` (pass [CLS], [SEP], [PAD] and the guiding
    tokens) is chosen with `probability`; a chosen token becomes [MASK] 80% of the
    time, a random token from [0, vocab_size) 10% of the time and stays itself 10%
    of the time. Labels hold the original id at chosen positions and -100 elsewhere.
    `vocab_size` should exclude the guiding tokens so they never appear as noise.
    """
    if not 0 <= probability <= 1:
        raise ValueError(f"MLM probability must be in [0, 1], got {probability}")

    def uniform() -> torch.Tensor:
        # Drawn on the generator's device so a CPU generator also works for GPU batches.
        draw = torch.rand(input_ids.shape, generator=generator, device=generator.device)
        return draw.to(input_ids.device)

    special = torch.as_tensor(list(special_token_ids), dtype=input_ids.dtype, device=input_ids.device)
    maskable = ~torch.isin(input_ids, special)
    chosen = (uniform() < probability) & maskable
    labels = torch.where(chosen, input_ids, torch.full_like(input_ids, IGNORE_INDEX))
    roll = uniform()
    replace_with_mask = chosen & (roll < 0.8)
    replace_with_random = chosen & (roll >= 0.8) & (roll < 0.9)
    random_ids = torch.randint(
        vocab_size, input_ids.shape, generator=generator, device=generator.device, dtype=input_ids.dtype
    ).to(input_ids.device)
    masked = input_ids.clone()
    masked[replace_with_mask] = mask_token_id
    masked[replace_with_random] = random_ids[replace_with_random]
    return masked, labels


class MlmHead(nn.Module):
    """BERT's MLM head with the decoder tied to the word embeddings (passed in, not owned).

    Not owning the decoder keeps one copy of the tied matrix in the state dict, which
    safetensors requires.
    """

    def __init__(self, backbone: BertConfig, vocab_size: int) -> None:
        super().__init__()
        self.transform = BertPredictionHeadTransform(backbone)
        self.bias = nn.Parameter(torch.zeros(vocab_size))

    def forward(self, hidden: torch.Tensor, word_embeddings: torch.Tensor) -> torch.Tensor:
        return self.transform(hidden) @ word_embeddings.T + self.bias


def grow_word_embeddings(transformer: BertModel, extra: int) -> None:
    """Append `extra` rows for the guiding tokens, initialised like BERT's own rows."""
    old = transformer.get_input_embeddings()
    new = nn.Embedding(old.num_embeddings + extra, old.embedding_dim, padding_idx=old.padding_idx)
    with torch.no_grad():
        new.weight[: old.num_embeddings] = old.weight
        new.weight[old.num_embeddings :].normal_(0.0, transformer.config.initializer_range)
    transformer.set_input_embeddings(new)
    transformer.config.vocab_size = new.num_embeddings
