"""The bi-encoder base class every variant derives from, and its artifact format.

A variant is a `DenseEncoder` subclass paired with its `EncoderConfig` subclass.
The base owns what all variants share: one or two transformer towers (shared or
separate for queries and documents), tokenisation lengths, device placement and
the self-describing directory written by `save_pretrained`.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import torch
from safetensors.torch import load_file, save_file
from torch import nn
from transformers import BertModel, PreTrainedTokenizerBase

from model.backbone import load_pretrained_transformer, new_transformer
from model.config import EncoderConfig

if TYPE_CHECKING:
    from model.aspects.labels import AspectLabels
    from model.aspects.vocabulary import AspectVocabulary

WEIGHTS_FILE = "model.safetensors"


class Side(str, enum.Enum):
    """Which tower encodes a text: madral-kdd22 allows separate query and document encoders."""

    QUERY = "query"
    DOCUMENT = "document"


@dataclass
class EncoderOutput:
    """What one forward pass gives.

    `embedding` is L2-normalised, so dot product equals cosine (madral-kdd22 §3).
    The aspect fields stay empty for single-vector baselines such as BiBERT; the
    multi-aspect variants fill them for losses and for annotations.
    """

    embedding: torch.Tensor
    aspect_logits: dict[str, torch.Tensor] = field(default_factory=dict)
    presence_logits: torch.Tensor | None = None
    fusion_weights: torch.Tensor | None = None
    # Names of the columns of `fusion_weights` (and `fusion_presence`), e.g.
    # ("category", "brand", "color", "other"); empty when nothing is fused.
    fusion_slots: tuple[str, ...] = ()
    # P_a of each fused slot as presence weighting used it (Eq. 5, madral-kdd22); CLS counts as 1.
    fusion_presence: torch.Tensor | None = None
    # (B, len(aspect_slots), hidden) encodings the aspect heads read, named by `aspect_slots`.
    aspect_slots: tuple[str, ...] = ()
    aspect_embeddings: torch.Tensor | None = None
    # (B, len(aspect_slots), L) attention of the Aspect Extraction Network (Table 2, madral-kdd22).
    aspect_attention: torch.Tensor | None = None


@dataclass(frozen=True)
class TokenizedBatch:
    input_ids: torch.Tensor
    attention_mask: torch.Tensor

    def to(self, device: torch.device) -> TokenizedBatch:
        return TokenizedBatch(self.input_ids.to(device), self.attention_mask.to(device))

    def padded_to(self, length: int, pad_token_id: int) -> TokenizedBatch:
        """At least `length` positions, padding with masked-out pad tokens (for first-k readers)."""
        missing = length - self.input_ids.shape[1]
        if missing <= 0:
            return self
        pad = self.input_ids.new_full((self.input_ids.shape[0], missing), pad_token_id)
        return TokenizedBatch(
            torch.cat([self.input_ids, pad], dim=1),
            torch.cat([self.attention_mask, torch.zeros_like(pad, dtype=self.attention_mask.dtype)], dim=1),
        )


def pick_device(preferred: str | None = None) -> torch.device:
    """The GPU when there is one, else the CPU; `preferred` overrides ('cpu', 'cuda:1')."""
    if preferred:
        return torch.device(preferred)
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


class DenseEncoder(nn.Module):
    """Base of every variant: towers, tokenisation, save/load. Subclasses define `forward`."""

    config_class: ClassVar[type[EncoderConfig]] = EncoderConfig

    def __init__(self, config: EncoderConfig) -> None:
        super().__init__()
        if not isinstance(config, self.config_class):
            raise TypeError(f"{type(self).__name__} needs a {self.config_class.__name__}")
        self.config = config
        names = ("shared",) if config.shared_towers else (Side.QUERY.value, Side.DOCUMENT.value)
        self.transformers = nn.ModuleDict({name: self.build_tower() for name in names})

    def transformer_layers(self) -> int | None:
        """How many backbone layers the towers keep; None keeps them all."""
        return None

    def build_tower(self) -> nn.Module:
        """One text tower; a BERT by default. DSSM overrides it with a bag of wordpieces."""
        return new_transformer(self.config.backbone, self.transformer_layers())

    @classmethod
    def vocabulary_settings(
        cls, vocabulary: AspectVocabulary, settings: dict[str, Any], tokenizer: PreTrainedTokenizerBase
    ) -> dict[str, Any]:
        """Config fields a phrase-level aspect vocabulary implies for this variant (none by default).

        `new_encoder` merges them under the caller's explicit settings, so the
        registry never needs to know which variant sizes which heads.
        """
        return {}

    def attach_vocabulary(self, vocabulary: AspectVocabulary, tokenizer: PreTrainedTokenizerBase) -> None:
        """Bind the vocabulary the heads were sized from (no heads, nothing to bind, by default)."""

    def aspect_labels(
        self, annotations: Sequence[Mapping[str, Sequence[str]] | None], tokenize: Any = None
    ) -> AspectLabels | None:
        """Label tensors for a batch's aspect annotations; None for variants that learn no aspects."""
        return None

    def auxiliary_loss(self, output: EncoderOutput, labels: AspectLabels) -> torch.Tensor:
        """Loss added to the retrieval loss for one side's batch; 0 for variants without one.

        Multi-aspect variants return Σ_a (L_AP^a + L_APP^a) (Eq. 7, madral-kdd22) for an
        `model.aspects.AspectLabels` of the same batch.
        """
        return output.embedding.new_zeros(())

    def transformer(self, side: Side) -> BertModel:
        key = "shared" if self.config.shared_towers else Side(side).value
        return self.transformers[key]

    def max_length(self, side: Side) -> int:
        if Side(side) is Side.QUERY:
            return self.config.max_query_length
        return self.config.max_document_length

    def forward(self, batch: TokenizedBatch, side: Side) -> EncoderOutput:
        raise NotImplementedError

    def tokenize(self, tokenizer: PreTrainedTokenizerBase, texts: list[str], side: Side) -> TokenizedBatch:
        encoded = tokenizer(
            texts, padding=True, truncation=True, max_length=self.max_length(side), return_tensors="pt"
        )
        return TokenizedBatch(encoded["input_ids"], encoded["attention_mask"])

    @torch.inference_mode()
    def embed_texts(self, tokenizer: PreTrainedTokenizerBase, texts: list[str], side: Side) -> EncoderOutput:
        """Inference on one batch of raw texts, on the model's device."""
        device = next(self.parameters()).device
        return self(self.tokenize(tokenizer, texts, side).to(device), side)

    def load_backbone_weights(self, path: str | Path | None = None) -> None:
        """Start every tower from pre-trained weights (the bundled MiniLM by default)."""
        for transformer in self.transformers.values():
            pretrained = load_pretrained_transformer(path, self.transformer_layers())
            transformer.load_state_dict(pretrained.state_dict())

    def save_pretrained(self, directory: str | Path, tokenizer: PreTrainedTokenizerBase) -> Path:
        """Write config.json, model.safetensors and the tokenizer: a self-describing directory."""
        target = Path(directory)
        target.mkdir(parents=True, exist_ok=True)
        self.config.save(target)
        state = {name: tensor.detach().cpu().contiguous() for name, tensor in self.state_dict().items()}
        save_file(state, str(target / WEIGHTS_FILE), metadata={"variant": self.config.variant})
        tokenizer.save_pretrained(str(target))
        return target

    @classmethod
    def from_config_dict(cls, data: dict) -> DenseEncoder:
        return cls(cls.config_class.from_dict(data))

    def load_weights(self, directory: str | Path) -> None:
        path = Path(directory) / WEIGHTS_FILE
        if not path.is_file():
            raise FileNotFoundError(f"{directory} has no {WEIGHTS_FILE}; it is not a trained model")
        missing, unexpected = self.load_state_dict(load_file(str(path)), strict=False)
        if missing or unexpected:
            raise ValueError(
                f"{path} does not match the {self.config.variant} config: "
                f"missing {missing[:5]}, unexpected {unexpected[:5]}"
            )
