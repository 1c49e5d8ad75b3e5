"""The masked-language-model objective every BERT-based variant is pre-trained with.

BERT's 80/10/10 masking (Devlin et al. 2018; the L_MLM of Eq. 7, madral-kdd22, and of
Eq. 8, mural-wsdm24), the prediction head, and the loss over the masked positions.
Model-agnostic: nothing here knows which variant it serves.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn
from torch.nn import functional
from transformers import BertConfig
from transformers.models.bert.modeling_bert import BertPredictionHeadTransform

IGNORE_INDEX = -100  # what torch's cross-entropy skips: positions that are not MLM targets


def mask_for_mlm(
    input_ids: torch.Tensor,
    special_token_ids: Sequence[int],
    probability: float,
    generator: torch.Generator,
    *,
    mask_token_id: int,
    vocab_size: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """BERT's masking for L_MLM: returns (masked input ids, labels).

    Each token outside `special_token_ids` (pass [CLS], [SEP], [PAD] and any guiding
    tokens) is chosen with `probability`; a chosen token becomes [MASK] 80% of the
    time, a random token from [0, vocab_size) 10% of the time and stays itself 10%
    of the time. Labels hold the original id at chosen positions and -100 elsewhere.
    `vocab_size` should exclude added tokens (MURAL's guiding tokens) so they never
    appear as noise.
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
    """BERT's MLM head: transform (dense + GELU + LayerNorm), then a decoder tied to the word embeddings.

    The decoder matrix is passed to `forward`, not owned: the state dict then holds one
    copy of the tied matrix (the tower's word embeddings), which safetensors requires.
    Only the transform and the output bias are the head's own parameters.
    """

    def __init__(self, backbone: BertConfig, vocab_size: int) -> None:
        super().__init__()
        self.transform = BertPredictionHeadTransform(backbone)
        self.bias = nn.Parameter(torch.zeros(vocab_size))

    def forward(self, hidden: torch.Tensor, word_embeddings: torch.Tensor) -> torch.Tensor:
        return self.transform(hidden) @ word_embeddings.T + self.bias


def masked_lm_loss(
    head: MlmHead, hidden: torch.Tensor, word_embeddings: torch.Tensor, labels: torch.Tensor
) -> torch.Tensor:
    """L_MLM: cross-entropy of the original tokens at the chosen positions, averaged over them.

    `hidden` is [batch, length, hidden] and `labels` [batch, length] with -100 where
    nothing was chosen; a batch without any chosen position gives a graph-keeping 0.
    """
    targets = labels != IGNORE_INDEX
    if not targets.any():
        return hidden.sum() * 0.0
    return functional.cross_entropy(head(hidden[targets], word_embeddings), labels[targets])
