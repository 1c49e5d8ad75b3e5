"""BiBERT: the BERT bi-encoder baseline (madral-kdd22 §8.2), and the backbone used zero-shot.

The summary encoding (CLS in the paper; `pooling` in the config), projected to
`projection_dim`, L2-normalised; relevance is the cosine between query and document
embeddings.

`zero-shot` is the same model as the backbone's authors ship it: mean pooling and the
identity in place of the projection, never trained. For the bundled MiniLM it embeds
exactly as sentence-transformers' `all-MiniLM-L6-v2` does, which is the baseline every
trained variant has to beat (`madr evaluate` reports it beside the model).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from torch import nn
from torch.nn import functional

from model.batch import EncoderOutput, Side, TokenizedBatch
from model.config import EncoderConfig
from model.encoder import DenseEncoder
from model.pooling import Pooling, ProjectionInit, initialise_projection, pool, positions_for


@dataclass(frozen=True)
class BiBertConfig(EncoderConfig):
    variant: ClassVar[str] = "bibert"
    model_id: str = "bibert"


class BiBertEncoder(DenseEncoder):
    config_class = BiBertConfig

    def __init__(self, config: BiBertConfig) -> None:
        super().__init__(config)
        hidden = config.hidden_size
        dim = int(config.projection_dim or hidden)
        names = self.transformers.keys()
        self.projections = nn.ModuleDict({name: nn.Linear(hidden, dim) for name in names})
        for projection in self.projections.values():
            initialise_projection(projection, config.projection_init)

    def projection(self, side: Side) -> nn.Linear:
        return self.projections["shared" if self.config.shared_towers else Side(side).value]

    def forward(self, batch: TokenizedBatch, side: Side) -> EncoderOutput:
        hidden = self.sequence_output(batch, side, positions_read=positions_for(self.config.pooling))
        summary = pool(hidden, batch.attention_mask, self.config.pooling)
        embedding = functional.normalize(self.projection(side)(summary), dim=-1)
        return EncoderOutput(embedding=embedding)


@dataclass(frozen=True)
class ZeroShotConfig(BiBertConfig):
    """The backbone as its authors trained it: mean pooling, identity projection; used untrained."""

    variant: ClassVar[str] = "zero-shot"
    model_id: str = "zero-shot"
    projection_dim: int | None = None
    pooling: Pooling = Pooling.MEAN
    projection_init: ProjectionInit = ProjectionInit.IDENTITY


class ZeroShotEncoder(BiBertEncoder):
    config_class = ZeroShotConfig
