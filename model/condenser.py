"""Condenser: BiBERT pre-trained so that its CLS state condenses the text (Gao & Callan, EMNLP 2021).

The baseline repro-ecir24 (Table 1) and mural-wsdm24 (Table 3) compare against: "it enhances the CLS
embedding during pre-training by connecting middle-layer tokens" (repro-ecir24 §8.1). During
pre-training a small head of transformer layers reads the last layer's CLS state beside an early
layer's token states, [h_cls^late; h_1..n^early], and predicts the masked tokens from them. The early
token states have not seen the late layers, so what the head needs from those layers must pass
through CLS. The loss is the head's MLM plus the backbone's own (Condenser's L = L_mlm^head + L_mlm).
The head is dropped after pre-training: fine-tuning and embedding are BiBERT's (CLS, projected).

The early layer is half the backbone's depth (Condenser reads layer 6 of BERT-base's 12; here 3 of
MiniLM-L6's 6), the head two layers, as in the paper. The head's layers start from the backbone's
initialisation scheme (normal, std `initializer_range`), its MLM prediction is the tower's MLM head.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch
from torch import nn
from transformers import BertConfig
from transformers.models.bert.modeling_bert import BertLayer

from model.batch import EncoderOutput, Side, TokenizedBatch
from model.bibert import BiBertConfig, BiBertEncoder
from model.mlm import masked_lm_loss

CONDENSER_HEADS = "condenser_heads"  # attribute (and state-dict prefix) of the per-tower heads


@dataclass(frozen=True)
class CondenserConfig(BiBertConfig):
    """BiBERT with Condenser's pre-training head.

    Attributes:
        early_layer: the layer whose token states the head reads (1-based; 0: half the backbone's).
        head_layers: transformer layers in the head (the paper: 2).
    """

    variant: ClassVar[str] = "condenser"
    model_id: str = "condenser"
    early_layer: int = 0
    head_layers: int = 2

    def __post_init__(self) -> None:
        super().__post_init__()
        layers = int(self.backbone.get("num_hidden_layers", 0))
        if self.head_layers < 1:
            raise ValueError(f"head_layers must be >= 1, got {self.head_layers}")
        if layers and not 0 <= self.early_layer < layers:
            raise ValueError(
                f"early_layer must be in [1, {layers - 1}] (0: half of {layers}), got {self.early_layer}"
            )

    @property
    def condensed_layer(self) -> int:
        """The early layer the head reads: `early_layer`, or half the backbone's depth."""
        return self.early_layer or max(1, int(self.backbone["num_hidden_layers"]) // 2)


class CondenserHead(nn.Module):
    """`layers` transformer layers over [late CLS; early tokens], as Condenser's head."""

    def __init__(self, backbone: BertConfig, layers: int) -> None:
        super().__init__()
        config = BertConfig.from_dict(backbone.to_dict())
        config._attn_implementation = "eager"  # standalone layers: no model to dispatch attention for them
        self.layers = nn.ModuleList(BertLayer(config) for _ in range(layers))
        for module in self.modules():
            if isinstance(module, nn.Linear):
                nn.init.normal_(module.weight, std=config.initializer_range)
                nn.init.zeros_(module.bias)

    def forward(
        self, late_cls: torch.Tensor, early: torch.Tensor, attention_mask: torch.Tensor
    ) -> torch.Tensor:
        states = torch.cat([late_cls[:, None], early[:, 1:]], dim=1)
        # Additive mask over the keys: padding positions are never attended to.
        additive = (1.0 - attention_mask[:, None, None, :].to(states.dtype)) * torch.finfo(states.dtype).min
        for layer in self.layers:
            output = layer(states, attention_mask=additive)
            states = output[0] if isinstance(output, tuple) else output
        return states


class CondenserEncoder(BiBertEncoder):
    config_class = CondenserConfig
    config: CondenserConfig
    pretraining_modules = (*BiBertEncoder.pretraining_modules, CONDENSER_HEADS)

    def prepare_pretraining(self) -> None:
        """The MLM heads, and one Condenser head per tower (on demand, like the MLM heads)."""
        super().prepare_pretraining()
        self.add_tower_modules(
            CONDENSER_HEADS, lambda tower: CondenserHead(tower.config, self.config.head_layers)
        )

    def condenser_head(self, side: Side) -> CondenserHead:
        return self.tower_module(CONDENSER_HEADS, side)

    def masked_lm_loss(
        self, masked: TokenizedBatch, side: Side, mlm_labels: torch.Tensor, with_output: bool
    ) -> tuple[torch.Tensor, EncoderOutput | None]:
        """Condenser's L = L_mlm^head + L_mlm: the head's MLM over [late CLS; early tokens], plus the
        backbone's over its last layer, from one pass (Condenser learns no aspects: no output needed)."""
        transformer = self.transformer(side)
        states = transformer(
            input_ids=masked.input_ids, attention_mask=masked.attention_mask, output_hidden_states=True
        )
        late = states.last_hidden_state
        # hidden_states[0] is the embedding layer's output, [i] layer i's.
        early = states.hidden_states[self.config.condensed_layer]
        condensed = self.condenser_head(side)(late[:, 0], early, masked.attention_mask)
        words = transformer.get_input_embeddings().weight
        head = self.mlm_head(side)
        return masked_lm_loss(head, condensed, words, mlm_labels) + masked_lm_loss(
            head, late, words, mlm_labels
        ), None
