"""MURAL and MUR: multi-granularity-aware aspect learning (mural-wsdm24).

Guiding tokens, one per aspect group, sit after [CLS] and before the content
(§4.1). Their final-layer encodings are trained to predict aspect values at
phrase, word and token granularity with a group-wise contrastive loss (Eq. 2-5)
and, being part of the input, by the masked-language-model loss as context (Eq. 8).
The retrieval embedding fuses them with weights computed from CLS (CLS-gating,
Eq. 6-7), then projects to `projection_dim` and L2-normalises.

MUR is the same model with λ = 0 in Eq. 9: no aspect learning, MLM only (§5.2).

Fine-tuning needs nothing beyond `forward` (in-batch softmax over `embedding`,
Eq. 10). Pre-training calls `mask_tokens` and then `pretraining_losses`; the generic
`pretraining_loss` hook of every encoder does both.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import accumulate
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.nn import functional
from transformers import BertConfig, PreTrainedTokenizerBase

from model.aspects.fusion import ClsGating
from model.aspects.vocabulary import AspectVocabulary, Granularity
from model.backbone import load_pretrained_transformer, load_tokenizer
from model.batch import EncoderOutput, PretrainingLoss, Side, TokenizedBatch
from model.encoder import DenseEncoder
from model.mlm import IGNORE_INDEX, MlmHead, mask_for_mlm
from model.mural_aspects import (
    GranularityLabels,
    aspect_learning_loss,
    build_labels,
    value_wordpieces,
    vocabulary_sizes,
)
from model.mural_config import MuralConcatConfig, MuralConfig, MurConfig, ValueTables
from model.mural_tokens import grow_word_embeddings, insert_guiding_tokens

WORD_EMBEDDINGS = "embeddings.word_embeddings.weight"


def granular_vocabulary_file(granularity: str) -> str:
    return f"aspect_vocabulary.{granularity}.json"


@dataclass
class MuralOutput(EncoderOutput):
    """Adds the final-layer guiding-token encodings h(o_1..o_K): [batch, K, hidden]."""

    group_encodings: torch.Tensor | None = None


@dataclass(frozen=True)
class MuralPretrainingLosses:
    total: torch.Tensor  # Eq. 9: mlm + λ · aspect
    mlm: torch.Tensor  # Eq. 8, averaged over masked tokens
    aspect: torch.Tensor  # Eq. 3-5; exactly 0 (and not computed) when λ = 0


class MuralEncoder(DenseEncoder):
    config_class = MuralConfig
    vocabulary_file = granular_vocabulary_file(Granularity.PHRASE.value)  # `vocabulary`: the phrase level

    def __init__(self, config: MuralConfig) -> None:
        super().__init__(config)
        self.groups = config.groups
        self.base_vocab_size = int(config.backbone["vocab_size"])
        # The guiding tokens take the ids right after the backbone's vocabulary, which is
        # what tokenizer.add_special_tokens gives them; `register_guiding_tokens` checks it.
        count = len(self.groups)
        self.guiding_token_ids = tuple(range(self.base_vocab_size, self.base_vocab_size + count))
        for transformer in self.transformers.values():
            grow_word_embeddings(transformer, count)
        hidden, names = config.hidden_size, list(self.transformers)
        slots = count + int(config.fusion_includes_cls)
        self.gates = nn.ModuleDict({name: ClsGating(hidden, slots) for name in names})
        self.projections = nn.ModuleDict({name: nn.Linear(hidden, config.projection_dim) for name in names})
        head_config = BertConfig.from_dict(config.backbone)
        self.mlm_heads = nn.ModuleDict(
            {name: MlmHead(head_config, self.base_vocab_size + count) for name in names}
        )
        self.value_tables = nn.ModuleDict()
        if ValueTables(config.value_tables) is ValueTables.UNSHARED:
            for aspect, tables in config.value_vocabulary_sizes.items():
                self.value_tables[aspect] = nn.ModuleDict(
                    {g: self._new_table(size, hidden) for g, size in tables.items()}
                )
        # Shared option: the wordpieces of every value, as (flat ids, offsets) for embedding_bag.
        self._value_pieces: dict[tuple[str, str], tuple[torch.Tensor, torch.Tensor]] = {}
        # V_a^g by granularity, as attached: what `pretraining_loss` builds its labels from.
        self._label_vocabularies: dict[str, AspectVocabulary] = {}

    def _new_table(self, size: int, hidden: int) -> nn.Embedding:
        table = nn.Embedding(size, hidden)
        nn.init.normal_(table.weight, 0.0, self.config.backbone.get("initializer_range", 0.02))
        return table

    def _tower(self, side: Side) -> str:
        return "shared" if self.config.shared_towers else Side(side).value

    @property
    def guiding_tokens(self) -> tuple[str, ...]:
        return tuple(group.token for group in self.groups)

    # --- tokenisation -------------------------------------------------------------

    def register_guiding_tokens(self, tokenizer: PreTrainedTokenizerBase) -> PreTrainedTokenizerBase:
        """Add the guiding tokens to `tokenizer` as special tokens (idempotent) and check their ids.

        Special tokens are never split by the tokenizer and are skipped when decoding;
        `save_pretrained` then writes them with the tokenizer.
        """
        tokens = list(self.guiding_tokens)
        ids = tuple(tokenizer.convert_tokens_to_ids(tokens))
        if ids != self.guiding_token_ids:
            # Tokens already present keep their ids, so a mismatched tokenizer still fails below.
            tokenizer.add_special_tokens({"extra_special_tokens": tokens}, replace_extra_special_tokens=False)
            ids = tuple(tokenizer.convert_tokens_to_ids(tokens))
        if ids != self.guiding_token_ids:
            raise ValueError(
                f"the tokenizer gives the guiding tokens ids {ids}, the model expects "
                f"{self.guiding_token_ids}: its vocabulary must match vocab_size={self.base_vocab_size}"
            )
        return tokenizer

    def tokenize(self, tokenizer: PreTrainedTokenizerBase, texts: list[str], side: Side) -> TokenizedBatch:
        """Tokenise to at most max_length(side) ids, guiding tokens at positions 1..K (§4.3)."""
        self.register_guiding_tokens(tokenizer)
        room = self.max_length(side) - len(self.groups)
        encoded = tokenizer(texts, padding=True, truncation=True, max_length=room, return_tensors="pt")
        return insert_guiding_tokens(
            encoded["input_ids"],
            encoded["attention_mask"],
            self.guiding_token_ids,
            max_length=self.max_length(side),
            pad_token_id=tokenizer.pad_token_id,
        )

    @property
    def vocabulary(self) -> AspectVocabulary | None:
        """The phrase-level V_a: the classes of `aspect_logits` (phrase scores, §6.4), for value names."""
        return self._label_vocabularies.get(Granularity.PHRASE.value)

    def save_pretrained(self, directory: str | Path, tokenizer: PreTrainedTokenizerBase) -> Path:
        """Also writes each attached V_a^g, so a loaded model names its predicted values (annotations)."""
        target = super().save_pretrained(directory, self.register_guiding_tokens(tokenizer))
        for granularity, vocabulary in self._label_vocabularies.items():
            vocabulary.save(target / granular_vocabulary_file(granularity))
        return target

    def load_weights(self, directory: str | Path) -> None:
        super().load_weights(directory)
        files = {g: Path(directory) / granular_vocabulary_file(g) for g in self.config.granularities}
        vocabularies = {g: AspectVocabulary.load(path) for g, path in files.items() if path.is_file()}
        if vocabularies:
            self.attach_vocabularies(vocabularies, load_tokenizer(directory), initialise=False)

    def load_backbone_weights(self, path: str | Path | None = None) -> None:
        """Pre-trained towers; the guiding rows start at the mean pre-trained embedding plus noise.

        Starting from the centre of the pre-trained embedding cloud keeps them on the
        scale the first layer expects; the noise keeps the K tokens distinct.
        """
        count, spread = len(self.groups), self.config.backbone.get("initializer_range", 0.02)
        for transformer in self.transformers.values():
            state = load_pretrained_transformer(path, self.transformer_layers()).state_dict()
            words = state[WORD_EMBEDDINGS]
            if words.shape[0] != self.base_vocab_size:
                raise ValueError(
                    f"{path} has {words.shape[0]} wordpieces, the config says {self.base_vocab_size}"
                )
            guides = words.mean(dim=0) + torch.randn(count, words.shape[1], dtype=words.dtype) * spread
            state[WORD_EMBEDDINGS] = torch.cat([words, guides])
            transformer.load_state_dict(state)

    # --- encoding -------------------------------------------------------------------

    def _hidden_states(self, batch: TokenizedBatch, side: Side) -> torch.Tensor:
        guides = torch.tensor(self.guiding_token_ids, device=batch.input_ids.device)
        if not torch.equal(batch.input_ids[:, 1 : 1 + len(guides)], guides.expand(len(batch.input_ids), -1)):
            raise ValueError(
                "batch lacks MURAL's guiding tokens at positions 1..K; use MuralEncoder.tokenize"
            )
        return self.transformer(side)(
            input_ids=batch.input_ids, attention_mask=batch.attention_mask
        ).last_hidden_state

    def _output(self, hidden: torch.Tensor, side: Side) -> MuralOutput:
        tower = self._tower(side)
        cls_encoding, groups = hidden[:, 0], hidden[:, 1 : 1 + len(self.groups)]
        slots = (
            torch.cat([cls_encoding[:, None], groups], dim=1) if self.config.fusion_includes_cls else groups
        )
        weights = self.gates[tower](cls_encoding, None)  # Eq. 6: softmax(U h(x_0) + b)
        fused = (weights.unsqueeze(-1) * slots).sum(dim=1)  # Eq. 7: Σ_k w_k h(o_k)
        embedding = functional.normalize(self.projections[tower](fused), dim=-1)
        return MuralOutput(
            embedding=embedding,
            aspect_logits=self._phrase_scores(groups, side),
            fusion_weights=weights,
            group_encodings=groups,
        )

    def forward(self, batch: TokenizedBatch, side: Side) -> MuralOutput:
        return self._output(self._hidden_states(batch, side), side)

    def _phrase_scores(self, groups: torch.Tensor, side: Side) -> dict[str, torch.Tensor]:
        """Phrase-value scores h_a^phrase · e_v per aspect, for annotation and accuracy (§6.4)."""
        scores = {}
        for k, group in enumerate(self.groups):
            for aspect, granularity in group.objectives:
                if granularity == "phrase" and self.has_value_embeddings(aspect, granularity):
                    scores[aspect] = groups[:, k] @ self.value_embeddings(aspect, granularity, side).T
        return scores

    # --- value tables ---------------------------------------------------------------

    def has_value_embeddings(self, aspect: str, granularity: str) -> bool:
        if ValueTables(self.config.value_tables) is ValueTables.UNSHARED:
            return aspect in self.value_tables and granularity in self.value_tables[aspect]
        return (aspect, granularity) in self._value_pieces

    def value_embeddings(self, aspect: str, granularity: str, side: Side = Side.DOCUMENT) -> torch.Tensor:
        """E_a^g: [|V_a^g|, hidden]."""
        if ValueTables(self.config.value_tables) is ValueTables.UNSHARED:
            return self.value_tables[aspect][granularity].weight
        if (aspect, granularity) not in self._value_pieces:
            raise ValueError(
                f"no value wordpieces for {aspect}/{granularity}: call attach_vocabularies first"
            )
        words = self.transformer(side).get_input_embeddings().weight
        flat, offsets = self._value_pieces[(aspect, granularity)]
        # Shared option, §4.2: average pooling of the backbone's token embeddings.
        return functional.embedding_bag(flat.to(words.device), words, offsets.to(words.device), mode="mean")

    @classmethod
    def vocabulary_settings(
        cls, vocabulary: AspectVocabulary, settings: dict[str, Any], tokenizer: PreTrainedTokenizerBase
    ) -> dict[str, Any]:
        """|V_a^g| for every (aspect, granularity), derived from a phrase vocabulary; none for MUR (λ = 0)."""
        fields = {f.name: f for f in dataclasses.fields(cls.config_class)}
        if not settings.get("aspect_loss_weight", fields["aspect_loss_weight"].default):
            return {}
        aspects = settings.get("aspects", fields["aspects"].default)
        granularities = settings.get("granularities", fields["granularities"].default)
        granular = cls.granular_vocabularies(vocabulary, granularities, tokenizer)
        return {"value_vocabulary_sizes": vocabulary_sizes(granular, aspects)}

    @staticmethod
    def granular_vocabularies(
        vocabulary: AspectVocabulary, granularities: Sequence[str], tokenizer: PreTrainedTokenizerBase
    ) -> dict[str, AspectVocabulary]:
        return {g: vocabulary.at_granularity(Granularity(g), tokenizer.tokenize) for g in granularities}

    def attach_vocabulary(self, vocabulary: AspectVocabulary, tokenizer: PreTrainedTokenizerBase) -> None:
        if self.config.aspect_loss_weight > 0:
            granular = self.granular_vocabularies(vocabulary, self.config.granularities, tokenizer)
            self.attach_vocabularies(granular, tokenizer)

    def attach_vocabularies(
        self,
        vocabularies: Mapping[str, AspectVocabulary],
        tokenizer: PreTrainedTokenizerBase,
        initialise: bool = True,
    ) -> None:
        """Bind V_a^g (granularity -> vocabulary) to the value tables.

        Unshared tables are initialised with the mean token embedding of each value
        (§4.2; from the document tower when towers are separate, as items carry most
        annotations; `initialise=False` when resuming a trained model). The shared
        option keeps the wordpieces to pool on every step; they are not saved with the
        weights, so a loaded shared-table model needs this call before aspect learning
        or phrase scores. Sizes must match the config.
        """
        unshared = ValueTables(self.config.value_tables) is ValueTables.UNSHARED
        self._label_vocabularies = dict(vocabularies)
        for aspect, granularity in self.config.objectives:
            if granularity not in vocabularies or aspect not in vocabularies[granularity]:
                continue
            pieces = value_wordpieces(vocabularies[granularity], aspect, tokenizer)
            expected = self.config.value_vocabulary_sizes.get(aspect, {}).get(granularity)
            if expected is not None and expected != len(pieces):
                raise ValueError(
                    f"{aspect}/{granularity} has {len(pieces)} values, the config says {expected}"
                )
            flat = torch.tensor([i for ids in pieces for i in ids], dtype=torch.long)
            offsets = torch.tensor([0, *accumulate(len(ids) for ids in pieces)][:-1], dtype=torch.long)
            if not unshared:
                self._value_pieces[(aspect, granularity)] = (flat, offsets)
            elif initialise and self.has_value_embeddings(aspect, granularity):
                words = self.transformer(Side.DOCUMENT).get_input_embeddings().weight.detach()
                mean = functional.embedding_bag(flat.to(words.device), words, offsets.to(words.device))
                with torch.no_grad():
                    self.value_tables[aspect][granularity].weight.copy_(mean)

    # --- pre-training -----------------------------------------------------------------

    def mask_tokens(
        self,
        batch: TokenizedBatch,
        tokenizer: PreTrainedTokenizerBase,
        side: Side,
        generator: torch.Generator,
    ) -> tuple[TokenizedBatch, torch.Tensor]:
        """MLM inputs for Eq. 8: never masks [CLS], [SEP], [PAD] or guiding tokens; labels -100 elsewhere."""
        probability = (
            self.config.query_mask_probability
            if Side(side) is Side.QUERY
            else self.config.document_mask_probability
        )
        special = {*tokenizer.all_special_ids, *self.guiding_token_ids}
        masked, labels = mask_for_mlm(
            batch.input_ids,
            sorted(special),
            probability,
            generator,
            mask_token_id=tokenizer.mask_token_id,
            vocab_size=self.base_vocab_size,
        )
        return TokenizedBatch(masked, batch.attention_mask), labels

    def aspect_loss(self, output: MuralOutput, labels: GranularityLabels, side: Side) -> torch.Tensor:
        """L_A of Eq. 3-5 on the guiding-token encodings; `labels`: granularity -> AspectLabels."""
        return aspect_learning_loss(
            self.groups, output.group_encodings, lambda a, g: self.value_embeddings(a, g, side), labels
        )

    def pretraining_losses(
        self, masked: TokenizedBatch, mlm_labels: torch.Tensor, aspect_labels: GranularityLabels, side: Side
    ) -> MuralPretrainingLosses:
        """Eq. 9, L_MLM + λ L_A, from one pass over the masked batch."""
        hidden = self._hidden_states(masked, side)
        targets = mlm_labels != IGNORE_INDEX
        words = self.transformer(side).get_input_embeddings().weight
        logits = self.mlm_heads[self._tower(side)](hidden[targets], words)
        mlm = functional.cross_entropy(logits, mlm_labels[targets]) if targets.any() else hidden.sum() * 0.0
        weight = self.config.aspect_loss_weight
        if weight == 0:
            aspect = mlm.new_zeros(())
            return MuralPretrainingLosses(total=mlm, mlm=mlm, aspect=aspect)
        aspect = self.aspect_loss(self._output(hidden, side), aspect_labels, side)
        return MuralPretrainingLosses(total=mlm + weight * aspect, mlm=mlm, aspect=aspect)

    def pretraining_loss(
        self,
        batch: TokenizedBatch,
        tokenizer: PreTrainedTokenizerBase,
        side: Side,
        annotations: Sequence[Mapping[str, Sequence[str]] | None],
        generator: torch.Generator,
        aspect_weight: float = 1.0,
        mask_probability: float = 0.15,
        mlm_weight: float = 1.0,
    ) -> PretrainingLoss:
        """Eq. 9 through `mask_tokens` and `pretraining_losses`.

        MURAL's own settings rule: λ is the config's `aspect_loss_weight` and the masking
        ratios its per-side `*_mask_probability` (§5.3.1), so `aspect_weight`,
        `mask_probability` and `mlm_weight` are not used. Labels come from the attached vocabularies.
        """
        size = batch.input_ids.shape[0]
        if len(annotations) != size:
            raise ValueError(f"{len(annotations)} annotations for a batch of {size} texts")
        masked, mlm_labels = self.mask_tokens(batch, tokenizer, side, generator)
        labels: GranularityLabels = {}
        if self.config.aspect_loss_weight > 0:
            if not self._label_vocabularies:
                raise ValueError(
                    "MURAL's aspect learning needs its value vocabularies: build the encoder with "
                    "new_encoder(..., vocabulary=...) or call attach_vocabularies"
                )
            labels = build_labels(annotations, self._label_vocabularies, self.config.aspects, tokenizer)
        losses = self.pretraining_losses(masked, mlm_labels, labels, side)
        return PretrainingLoss(total=losses.total, mlm=losses.mlm, aspect=losses.aspect)


class MurEncoder(MuralEncoder):
    config_class = MurConfig


class MuralConcatEncoder(MuralEncoder):
    config_class = MuralConcatConfig
