"""BiBERT: the BERT bi-encoder baseline (madral-kdd22 §8.2).

The CLS encoding, projected to `projection_dim`, L2-normalised; relevance is the
cosine between query and document embeddings.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from torch import nn
from torch.nn import functional

from model.config import EncoderConfig
from model.encoder import DenseEncoder, EncoderOutput, Side, TokenizedBatch


@dataclass(frozen=True)
class BiBertConfig(EncoderConfig):
    variant: ClassVar[str] = "bibert"
    model_id: str = "bibert"


class BiBertEncoder(DenseEncoder):
    config_class = BiBertConfig

    def __init__(self, config: BiBertConfig) -> None:
        super().__init__(config)
        hidden, dim = config.hidden_size, config.projection_dim
        names = self.transformers.keys()
        self.projections = nn.ModuleDict({name: nn.Linear(hidden, dim) for name in names})

    def projection(self, side: Side) -> nn.Linear:
        return self.projections["shared" if self.config.shared_towers else Side(side).value]

    def forward(self, batch: TokenizedBatch, side: Side) -> EncoderOutput:
        cls_encoding = self.sequence_output(batch, side, positions_read=1)[:, 0]
        embedding = functional.normalize(self.projection(side)(cls_encoding), dim=-1)
        return EncoderOutput(embedding=embedding)
