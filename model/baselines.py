"""The baselines of madral-kdd22 §8.2 and repro-ecir24 §7, besides BiBERT (model/bibert.py).

- MtBERT: BiBERT whose CLS encoding also predicts every aspect (multi-task learning).
- MpBERT: the first m token encodings fused by the same fusion network as MADRAL.
- DSSM: a feed-forward network over the mean of wordpiece embeddings, no transformer.
- BiBERT-CONCAT: BiBERT reading documents with their aspect strings appended.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import torch
from safetensors import safe_open
from torch import nn
from torch.nn import functional

from model.aspects.extraction import MultiTokenPooling, Representation
from model.aspects.fusion import FusionType, ImplicitSlot
from model.aspects.tower import AspectTower
from model.backbone import load_pretrained_transformer
from model.batch import EncoderOutput, Side, TokenizedBatch
from model.bibert import BiBertConfig, BiBertEncoder
from model.config import EncoderConfig
from model.encoder import DenseEncoder
from model.madral import AspectTowerEncoder, MultiAspectConfig, MultiAspectEncoder
from model.weights_file import WEIGHTS_FILE


@dataclass(frozen=True)
class MtBertConfig(MultiAspectConfig):
    """MtBERT (madral-kdd22 §8.2): the same aspect objectives as MADRAL, all on CLS; CLS is the embedding."""

    variant: ClassVar[str] = "mtbert"
    model_id: str = "mtbert"
    representation: Representation = Representation.CLS
    fusion: FusionType = FusionType.NONE
    implicit_slot: ImplicitSlot = ImplicitSlot.CLS


class MtBertEncoder(MultiAspectEncoder):
    config_class = MtBertConfig


@dataclass(frozen=True)
class MpBertConfig(EncoderConfig):
    """MpBERT (madral-kdd22 §8.2): multi-token pooling instead of the CLS encoding alone.

    Attributes:
        pooled_tokens: m, the number of leading token encodings fused (CLS included);
            by default |A| + 1, the number of slots MADRAL fuses ("the same number of
            tokens/aspects ... using the same AFN").
        fusion: the fusion network over the m slots (MADRAL's default, presence weighting;
            with no aspect labels its presence heads are trained by the retrieval loss only).
    """

    variant: ClassVar[str] = "mpbert"
    model_id: str = "mpbert"
    pooled_tokens: int | None = None
    fusion: FusionType = FusionType.PRESENCE_WEIGHTING

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "fusion", FusionType(self.fusion))
        if self.pooled_tokens is None:
            object.__setattr__(self, "pooled_tokens", len(self.aspects) + 1)
        if not 2 <= self.pooled_tokens <= self.max_query_length:
            raise ValueError(
                f"pooled_tokens={self.pooled_tokens} must lie in [2, max_query_length]; 1 token is BiBERT"
            )
        if self.fusion is FusionType.NONE:
            raise ValueError("MpBERT fuses its pooled tokens; fusion='none' would be BiBERT")


class MpBertEncoder(AspectTowerEncoder):
    config_class = MpBertConfig
    config: MpBertConfig

    def build_aspect_tower(self) -> AspectTower:
        cfg = self.config
        return AspectTower(
            MultiTokenPooling(int(cfg.pooled_tokens or 0)),
            cfg.fusion,
            cfg.hidden_size,
            int(cfg.projection_dim or cfg.hidden_size),
            pooling=cfg.pooling,
            projection_init=cfg.projection_init,
        )


@dataclass(frozen=True)
class DssmConfig(EncoderConfig):
    """DSSM (madral-kdd22 §8.2, after Huang et al. 2013) over BERT wordpieces.

    Attributes:
        hidden_layers: widths of the tanh layers between the mean wordpiece embedding
            and the projection (DSSM's 300-300-128).
        word_embeddings_from: a trained model directory of a BERT variant (BiBERT in the
            paper, madral-kdd22 §8.2) whose document-tower word embeddings start the
            table; empty starts it from the backbone's pre-trained embeddings.

    The embedding table has the backbone's vocabulary and hidden size.
    """

    variant: ClassVar[str] = "dssm"
    model_id: str = "dssm"
    hidden_layers: tuple[int, ...] = (300, 300)
    word_embeddings_from: str = ""

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "hidden_layers", tuple(int(width) for width in self.hidden_layers))
        if any(width <= 0 for width in self.hidden_layers):
            raise ValueError(f"hidden_layers must be positive widths, got {self.hidden_layers}")


class WordpieceBag(nn.Module):
    """Mean of the content wordpieces' embeddings -> tanh MLP -> projection (DSSM's tower).

    [CLS] (the first position) and [SEP] (the last attended one) are left out of the
    mean: they are in every text and would only shrink it towards a constant.
    """

    def __init__(self, vocab_size: int, hidden: int, layers: tuple[int, ...], out: int, pad: int) -> None:
        super().__init__()
        self.word_embeddings = nn.Embedding(vocab_size, hidden, padding_idx=pad)
        blocks: list[nn.Module] = []
        width = hidden
        for size in layers:
            blocks += [nn.Linear(width, size), nn.Tanh()]
            width = size
        self.mlp = nn.Sequential(*blocks)
        self.projection = nn.Linear(width, out)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        content = attention_mask.clone().float()
        content[:, 0] = 0.0
        last = (attention_mask.sum(1) - 1).clamp_min(0)
        content[torch.arange(content.shape[0]), last] = 0.0
        summed = (self.word_embeddings(input_ids) * content[..., None]).sum(1)
        mean = summed / content.sum(1, keepdim=True).clamp_min(1.0)
        return self.projection(self.mlp(mean))


class DssmEncoder(DenseEncoder):
    """Towers are `WordpieceBag`s in place of BERTs; save/load and tokenisation are the base's."""

    config_class = DssmConfig
    config: DssmConfig

    def build_tower(self) -> nn.Module:
        cfg = self.config
        return WordpieceBag(
            int(cfg.backbone["vocab_size"]),
            cfg.hidden_size,
            cfg.hidden_layers,
            cfg.projection_dim,
            int(cfg.backbone.get("pad_token_id") or 0),
        )

    def load_backbone_weights(self, path: str | Path | None = None) -> None:
        """Only a word embedding table: the trained model's of `word_embeddings_from`, else the backbone's."""
        if self.config.word_embeddings_from:
            table = trained_word_embeddings(self.config.word_embeddings_from)
        else:
            table = load_pretrained_transformer(path, num_hidden_layers=0).embeddings.word_embeddings.weight
        expected = self.transformers[next(iter(self.transformers))].word_embeddings.weight.shape
        if table.shape != expected:
            raise ValueError(
                f"word embeddings of shape {tuple(table.shape)} for a DSSM table of {tuple(expected)}: "
                "the source model must share the backbone's vocabulary and hidden size"
            )
        with torch.no_grad():
            for tower in self.transformers.values():
                tower.word_embeddings.weight.copy_(table)

    def prepare_pretraining(self) -> None:
        """Refused, and with it `pretraining_loss`: DSSM has no transformer to pre-train."""
        raise NotImplementedError(
            "DSSM is not pre-trained; the paper initialises its table from a pre-trained BiBERT "
            "(madral-kdd22 §8.2)"
        )

    def forward(self, batch: TokenizedBatch, side: Side) -> EncoderOutput:
        tower = self.transformers["shared" if self.config.shared_towers else Side(side).value]
        return EncoderOutput(functional.normalize(tower(batch.input_ids, batch.attention_mask), dim=-1))


def trained_word_embeddings(directory: str | Path) -> torch.Tensor:
    """The document tower's word embedding table of a trained model directory (the shared one if shared)."""
    path = Path(directory) / WEIGHTS_FILE
    if not path.is_file():
        raise FileNotFoundError(
            f"{directory} has no {WEIGHTS_FILE}: word_embeddings_from needs a trained model"
        )
    suffix = "embeddings.word_embeddings.weight"
    with safe_open(str(path), framework="pt") as weights:
        names = set(weights.keys())  # safe_open has keys(), not __contains__
        for tower in ("shared", Side.DOCUMENT.value):
            name = f"transformers.{tower}.{suffix}"
            if name in names:
                return weights.get_tensor(name)
    raise ValueError(f"{path} has no transformer word embeddings: is it a BERT variant's model?")


@dataclass(frozen=True)
class BiBertConcatConfig(BiBertConfig):
    """BiBERT-CONCAT (repro-ecir24 §7): documents read with their aspect strings (items only)."""

    variant: ClassVar[str] = "bibert-concat"
    model_id: str = "bibert-concat"

    @property
    def appends_aspects_to_documents(self) -> bool:
        return True


class BiBertConcatEncoder(BiBertEncoder):
    """The model is BiBERT's; only the document text differs (`model.text.document_text_with_aspects`)."""

    config_class = BiBertConcatConfig


BASELINE_ENCODERS: tuple[type[DenseEncoder], ...] = (
    MtBertEncoder,
    MpBertEncoder,
    DssmEncoder,
    BiBertConcatEncoder,
)
