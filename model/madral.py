"""MADR / MADRAL (madral-kdd22) and the repro-ecir24 variants, as configurations of one encoder.

A variant is a config: where aspect embeddings come from (`representation`), how
they are fused (`fusion`, `implicit_slot`), and which aspect losses train them
(`aspect_learning`, `presence_learning`). The encoder composes the modules of
`model.aspects` from those fields; it never branches on the variant's name.

| variant        | representation | fused slots      | fusion             | AP / APP | layers |
|----------------|----------------|------------------|--------------------|----------|--------|
| madr           | attention      | aspects + OTHER  | presence weighting | - / -    | N - 1  |
| madral         | attention      | aspects + OTHER  | presence weighting | + / +    | N - 1  |
| madral-en-v1   | attention      | aspects + CLS    | presence weighting | + / +    | N - 1  |
| madral-en-v2   | first tokens   | aspects + CLS    | CLS-gating         | + / +    | N      |
| no-fusion      | attention      | CLS only         | none               | + / +    | N - 1  |

madral-kdd22 §8.2 builds MADR and MADRAL with one transformer layer fewer than
BiBERT (§7.2). en-v1 is MADRAL-ori with CLS in place of OTHER in the best fusion for
extra-k aspect embeddings, presence weighting (repro-ecir24 §5, Table 2), and "only
differs during fine-tuning" (§8.1), so it keeps MADRAL's layers. en-v2 changes the
pre-trained model too (first k content tokens, whose best fusion is CLS-gating,
Table 3) and repro-ecir24 does not say it drops a layer, so it keeps N. "Only CLS"
(§5.2) fine-tunes the same pre-trained MADRAL (extra k aspect embeddings) and embeds
CLS alone, so it keeps MADRAL's layers too.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import torch
from torch import nn
from transformers import PreTrainedTokenizerBase

from model.aspects.extraction import AspectExtractionNetwork, Representation, build_extractor
from model.aspects.fusion import OTHER, FusionType, ImplicitSlot
from model.aspects.heads import AspectPredictionHeads, copy_value_rows
from model.aspects.initialisation import initialise_aspect_layers
from model.aspects.labels import Annotations, AspectLabels
from model.aspects.losses import aspect_learning_loss
from model.aspects.tower import AspectTower
from model.aspects.vocabulary import VOCABULARY_FILE, AspectVocabulary, Tokenize
from model.batch import EncoderOutput, Side, TokenizedBatch
from model.config import EncoderConfig, read_config_dict
from model.encoder import DenseEncoder


@dataclass(frozen=True)
class MultiAspectConfig(EncoderConfig):
    """Settings of every multi-aspect variant; the variants below only change the defaults.

    Attributes:
        representation: learned aspect queries (AEN, madral-kdd22 §4), the first k content
            tokens (repro-ecir24 §4) or CLS for every aspect (MtBERT).
        first_token_order: with first tokens, the slot read at positions 1, 2, ...; empty means
            `aspects` order (then OTHER). repro-ecir24 Table 3 finds (category, color, brand)
            best with OTHER and no difference with CLS in the fusion.
        fusion: weighted sum (Eq. 4), presence weighting (Eq. 5), CLS-gating (§6.3), or none
            (the CLS encoding alone, repro-ecir24 §5.2).
        implicit_slot: OTHER (madral-kdd22 §4) or CLS (repro-ecir24 Eq. 4), fused with the aspects.
        aspect_learning: predict aspect values from aspect embeddings (AP, Eq. 3).
        presence_learning: predict whether each aspect is annotated (APP, Eq. 6).
        drop_last_layer: one transformer layer fewer than BiBERT (madral-kdd22 §7.2).
        aspect_vocabulary_sizes: |V_a| per aspect, so a saved model rebuilds its heads
            without the vocabulary file; required with aspect learning.
    """

    variant: ClassVar[str] = "multi-aspect"

    representation: Representation = Representation.ATTENTION
    first_token_order: tuple[str, ...] = ()
    fusion: FusionType = FusionType.PRESENCE_WEIGHTING
    implicit_slot: ImplicitSlot = ImplicitSlot.OTHER
    aspect_learning: bool = True
    presence_learning: bool = True
    drop_last_layer: bool = False
    aspect_vocabulary_sizes: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        super().__post_init__()
        # JSON gives strings and lists; the config keeps enums and tuples.
        object.__setattr__(self, "representation", Representation(self.representation))
        object.__setattr__(self, "fusion", FusionType(self.fusion))
        object.__setattr__(self, "implicit_slot", ImplicitSlot(self.implicit_slot))
        object.__setattr__(self, "first_token_order", tuple(self.first_token_order))
        # config.json sorts keys; the heads follow `aspects` order.
        sizes = {name: int(size) for name, size in self.aspect_vocabulary_sizes.items()}
        if set(sizes) == set(self.aspects):
            sizes = {name: sizes[name] for name in self.aspects}
        object.__setattr__(self, "aspect_vocabulary_sizes", sizes)
        self._validate()

    def _validate(self) -> None:
        if self.fusion is FusionType.NONE and self.implicit_slot is not ImplicitSlot.CLS:
            raise ValueError("fusion='none' embeds the CLS encoding alone: set implicit_slot='cls'")
        if self.representation is Representation.CLS and self.fusion is not FusionType.NONE:
            raise ValueError("representation='cls' has one encoding for every aspect: use fusion='none'")
        if self.fusion is FusionType.NONE and not (self.aspect_learning or self.presence_learning):
            raise ValueError("fusion='none' without aspect or presence learning is BiBERT; use 'bibert'")
        if self.first_token_order and self.representation is not Representation.FIRST_TOKENS:
            raise ValueError("first_token_order only applies to representation='first_tokens'")
        if self.first_token_order and sorted(self.first_token_order) != sorted(self.extracted_slots):
            raise ValueError(f"first_token_order must name each of {self.extracted_slots} exactly once")
        if self.aspect_learning:
            if list(self.aspect_vocabulary_sizes) != list(self.aspects):
                raise ValueError(
                    f"aspect learning needs aspect_vocabulary_sizes for exactly {list(self.aspects)}, "
                    f"got {self.aspect_vocabulary_sizes}; pass an AspectVocabulary to new_encoder"
                )
            empty = [name for name, size in self.aspect_vocabulary_sizes.items() if size < 1]
            if empty:
                raise ValueError(f"aspects {empty} have no vocabulary values; lower min_count or drop them")
        elif self.aspect_vocabulary_sizes:
            raise ValueError("aspect_vocabulary_sizes is only used with aspect_learning=True")
        if self.drop_last_layer and int(self.backbone.get("num_hidden_layers", 0)) < 2:
            raise ValueError("drop_last_layer needs a backbone with at least 2 layers")

    @property
    def extracted_slots(self) -> tuple[str, ...]:
        """Slots the representation produces: the explicit aspects, then OTHER when it is fused."""
        other = (OTHER,) if self.implicit_slot is ImplicitSlot.OTHER else ()
        return tuple(self.aspects) + other

    @property
    def uses_aspect_labels(self) -> bool:
        return self.aspect_learning or self.presence_learning


class AspectTowerEncoder(DenseEncoder):
    """Base of encoders with an `AspectTower` above each transformer (MADRAL family, MpBERT, MtBERT).

    Subclasses say which tower to build; prediction heads, when there are any, are
    one module shared by both towers (madral-kdd22 §5). An attached
    `AspectVocabulary` is saved as aspect_vocabulary.json next to the weights, so
    value names can be printed later; the model does not need it to load.
    """

    vocabulary_file = VOCABULARY_FILE

    def __init__(self, config: EncoderConfig) -> None:
        super().__init__(config)
        self.towers = nn.ModuleDict({name: self.build_aspect_tower() for name in self.transformers})
        sizes = self.prediction_vocabulary_sizes()
        self.aspect_prediction = AspectPredictionHeads(config.hidden_size, sizes) if sizes else None
        self.vocabulary: AspectVocabulary | None = None

    def build_aspect_tower(self) -> AspectTower:
        raise NotImplementedError

    def prediction_vocabulary_sizes(self) -> dict[str, int]:
        """|V_a| of the aspects with a prediction head; none by default."""
        return {}

    def aspect_tower(self, side: Side) -> AspectTower:
        return self.towers["shared" if self.config.shared_towers else Side(side).value]

    @property
    def pad_token_id(self) -> int:
        return int(self.config.backbone.get("pad_token_id") or 0)

    def forward(self, batch: TokenizedBatch, side: Side) -> EncoderOutput:
        tower = self.aspect_tower(side)
        batch = batch.padded_to(tower.min_length, self.pad_token_id)
        hidden = self.sequence_output(batch, side, tower.positions_read)
        result = tower(hidden, batch.attention_mask)
        return EncoderOutput(
            embedding=result.embedding,
            aspect_logits=self.aspect_prediction(result.slots) if self.aspect_prediction is not None else {},
            presence_logits=result.presence_of(self.config.aspects),
            fusion_weights=result.fusion_weights,
            fusion_slots=result.fusion_slots,
            fusion_presence=result.fusion_presence,
            aspect_slots=result.slots.names,
            aspect_embeddings=result.slots.encodings,
            aspect_attention=result.slots.attention,
        )

    @classmethod
    def vocabulary_settings(
        cls, vocabulary: AspectVocabulary, settings: dict[str, Any], tokenizer: PreTrainedTokenizerBase
    ) -> dict[str, Any]:
        """|V_a| for the prediction heads, when this configuration learns aspects."""
        fields = {f.name: f for f in dataclasses.fields(cls.config_class)}
        if "aspect_vocabulary_sizes" not in fields:
            return {}
        learning = fields.get("aspect_learning")
        if not settings.get("aspect_learning", learning.default if learning is not None else True):
            return {}
        aspects = settings.get("aspects", fields["aspects"].default)
        return {"aspect_vocabulary_sizes": vocabulary.sizes(tuple(aspects))}

    def attach_vocabulary(
        self, vocabulary: AspectVocabulary, tokenizer: PreTrainedTokenizerBase | None = None
    ) -> None:
        """Keep the vocabulary the heads were sized from; it must match them class for class."""
        expected = self.prediction_vocabulary_sizes()
        actual = vocabulary.sizes(tuple(expected))
        if actual != expected:
            raise ValueError(f"vocabulary sizes {actual} do not match the model's heads {expected}")
        self.vocabulary = vocabulary

    def initialise_from_backbone(self, tokenizer: PreTrainedTokenizerBase) -> None:
        """Value tables and aspect queries from the backbone's states for the value names.

        See `model.aspects.initialisation`; a no-op without prediction heads or vocabulary.
        """
        if self.aspect_prediction is None or self.vocabulary is None:
            return
        names = {a: self.vocabulary.values(a).values for a in self.aspect_prediction.aspects}
        samples = [value for values in names.values() for value in values]
        initialise_aspect_layers(
            self.transformer(Side.DOCUMENT),
            tokenizer,
            names,
            self.aspect_prediction,
            [tower.extractor for tower in self.towers.values()],
            samples,
        )

    def _copy_matching(self, source: Mapping[str, torch.Tensor], directory: str | Path) -> list[str]:
        """The base's name-and-shape match, then AEN queries row by row for the slots both models have,
        and the prediction heads row by value when both vocabularies are known (`copy_value_rows`).

        MADRAL-ori's AEN has a query for OTHER that en-v1 and no-fusion lack, so the
        whole `queries` tensor differs in shape while its aspect rows are the ones
        pre-training trained.
        """
        theirs = Path(directory) / VOCABULARY_FILE
        by_value = self.aspect_prediction is not None and self.vocabulary is not None and theirs.is_file()
        heads = "aspect_prediction.tables"
        left = super()._copy_matching(
            {n: t for n, t in source.items() if not (by_value and n.startswith(heads))}, directory
        )
        if by_value:
            loaded = AspectVocabulary.load(theirs)
            copied = copy_value_rows(self.aspect_prediction, self.vocabulary, source, loaded, heads)
            left = [name for name in left if not copied.get(name)]
        data = read_config_dict(directory)
        implicit = ImplicitSlot(data.get("implicit_slot", ImplicitSlot.OTHER))
        slots = list(data.get("aspects", ())) + ([OTHER] if implicit is ImplicitSlot.OTHER else [])
        for tower_name, tower in self.towers.items():
            name = f"towers.{tower_name}.extractor.queries"
            extractor = tower.extractor
            if name not in left or name not in source or not isinstance(extractor, AspectExtractionNetwork):
                continue
            if source[name].shape[0] != len(slots):
                continue
            with torch.no_grad():
                for row, slot in enumerate(extractor.names):
                    if slot in slots:
                        extractor.queries[row] = source[name][slots.index(slot)]
            left.remove(name)
        return left

    def save_pretrained(self, directory: str | Path, tokenizer: PreTrainedTokenizerBase) -> Path:
        target = super().save_pretrained(directory, tokenizer)
        if self.vocabulary is not None:
            self.vocabulary.save(target / VOCABULARY_FILE)
        return target

    def load_weights(self, directory: str | Path) -> None:
        """Weights, and the vocabulary when the directory has one (it travels with the weights)."""
        super().load_weights(directory)
        if (Path(directory) / VOCABULARY_FILE).is_file():
            self.attach_vocabulary(AspectVocabulary.load(Path(directory) / VOCABULARY_FILE))


class MultiAspectEncoder(AspectTowerEncoder):
    """The encoder of every `MultiAspectConfig`: BERT -> aspect tower -> embedding, plus aspect heads."""

    config_class = MultiAspectConfig
    config: MultiAspectConfig

    def transformer_layers(self) -> int | None:
        if self.config.drop_last_layer:
            return int(self.config.backbone["num_hidden_layers"]) - 1
        return None

    def build_aspect_tower(self) -> AspectTower:
        cfg = self.config
        extractor = build_extractor(
            cfg.representation,
            cfg.extracted_slots,
            cfg.hidden_size,
            order=cfg.first_token_order or None,
            initializer_range=float(cfg.backbone.get("initializer_range", 0.02)),
            pooling=cfg.pooling,
        )
        return AspectTower(
            extractor,
            cfg.fusion,
            cfg.hidden_size,
            cfg.projection_dim,
            cls_slot=cfg.implicit_slot is ImplicitSlot.CLS,
            presence_learning=cfg.aspects if cfg.presence_learning else (),
            pooling=cfg.pooling,
            projection_init=cfg.projection_init,
        )

    def prediction_vocabulary_sizes(self) -> dict[str, int]:
        return dict(self.config.aspect_vocabulary_sizes) if self.config.aspect_learning else {}

    def auxiliary_loss(self, output: EncoderOutput, labels: AspectLabels) -> torch.Tensor:
        """Σ_{a ∈ A \\ {OTHER}} (L_AP^a + L_APP^a) of one side (Eq. 7; λ-weighted in Eq. 8, madral-kdd22)."""
        cfg = self.config
        if not cfg.uses_aspect_labels:
            return super().auxiliary_loss(output, labels)
        if labels.aspects != tuple(cfg.aspects):
            raise ValueError(f"labels are for aspects {labels.aspects}, the model has {cfg.aspects}")
        return aspect_learning_loss(
            output.aspect_logits,
            output.presence_logits,
            labels,
            prediction=cfg.aspect_learning,
            presence=cfg.presence_learning,
        )

    def aspect_labels(
        self, annotations: Sequence[Annotations], tokenize: Tokenize | None = None
    ) -> AspectLabels:
        """Label tensors for a batch of records' `aspects` (None = record not annotated)."""
        if self.vocabulary is None:
            raise ValueError(
                "no aspect vocabulary attached: pass vocabulary= to new_encoder, or load a model "
                f"directory that has {VOCABULARY_FILE}"
            )
        return AspectLabels.from_annotations(annotations, self.vocabulary, self.config.aspects, tokenize)


# The variants: each a config with other defaults, and the encoder class the registry maps its name to.


@dataclass(frozen=True)
class MadrConfig(MultiAspectConfig):
    """MADR: aspect extraction and fusion without aspect annotations (latent aspects, madral-kdd22 §5)."""

    variant: ClassVar[str] = "madr"
    model_id: str = "madr"
    aspect_learning: bool = False
    presence_learning: bool = False
    drop_last_layer: bool = True


@dataclass(frozen=True)
class MadralConfig(MultiAspectConfig):
    """MADRAL ("MADRAL-ori" in repro-ecir24): AEN + OTHER + presence weighting + AP/APP."""

    variant: ClassVar[str] = "madral"
    model_id: str = "madral"
    drop_last_layer: bool = True


@dataclass(frozen=True)
class MadralEnV1Config(MultiAspectConfig):
    """repro-ecir24 en-v1: MADRAL-ori with CLS instead of OTHER inside presence weighting (§5, §8.2)."""

    variant: ClassVar[str] = "madral-en-v1"
    model_id: str = "madral-en-v1"
    implicit_slot: ImplicitSlot = ImplicitSlot.CLS
    drop_last_layer: bool = True


@dataclass(frozen=True)
class MadralEnV2Config(MultiAspectConfig):
    """repro-ecir24 en-v2: en-v1 with the first k content tokens as aspect embeddings."""

    variant: ClassVar[str] = "madral-en-v2"
    model_id: str = "madral-en-v2"
    representation: Representation = Representation.FIRST_TOKENS
    fusion: FusionType = FusionType.CLS_GATING
    implicit_slot: ImplicitSlot = ImplicitSlot.CLS


@dataclass(frozen=True)
class NoFusionConfig(MultiAspectConfig):
    """repro-ecir24 §5.2 "Only CLS": aspect learning on the extra k aspect embeddings; CLS embeds."""

    variant: ClassVar[str] = "no-fusion"
    model_id: str = "no-fusion"
    drop_last_layer: bool = True
    fusion: FusionType = FusionType.NONE
    implicit_slot: ImplicitSlot = ImplicitSlot.CLS


class MadrEncoder(MultiAspectEncoder):
    config_class = MadrConfig


class MadralEncoder(MultiAspectEncoder):
    config_class = MadralConfig


class MadralEnV1Encoder(MultiAspectEncoder):
    config_class = MadralEnV1Config


class MadralEnV2Encoder(MultiAspectEncoder):
    config_class = MadralEnV2Config


class NoFusionEncoder(MultiAspectEncoder):
    config_class = NoFusionConfig


MADRAL_ENCODERS: tuple[type[MultiAspectEncoder], ...] = (
    MadrEncoder,
    MadralEncoder,
    MadralEnV1Encoder,
    MadralEnV2Encoder,
    NoFusionEncoder,
)
