"""The bi-encoder base class every variant derives from, and its artifact format.

A variant is a `DenseEncoder` subclass paired with its `EncoderConfig` subclass.
The base owns what all variants share: one or two transformer towers (shared or
separate for queries and documents), tokenisation lengths, device placement and
the self-describing directory written by `save_pretrained`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import torch
from safetensors.torch import save_file
from torch import nn
from transformers import BertModel, PreTrainedTokenizerBase

from model.backbone import load_pretrained_transformer, new_transformer
from model.batch import EncoderOutput, PretrainingLoss, Side, TokenizedBatch
from model.batch_tokenizer import BatchTokenizer
from model.config import EncoderConfig
from model.leading_positions import last_hidden_at_leading_positions
from model.mlm import MlmHead, mask_for_mlm, masked_lm_loss
from model.ranking_losses import in_batch_softmax_loss
from model.weights_file import WEIGHTS_FILE, load_checked_weights, read_weights

if TYPE_CHECKING:
    from model.aspects.labels import AspectLabels
    from model.aspects.vocabulary import AspectVocabulary

MLM_HEADS = "mlm_heads"  # attribute (and state-dict prefix) of the per-tower MLM heads


class DenseEncoder(nn.Module):
    """Base of every variant: towers, tokenisation, save/load. Subclasses define `forward`."""

    config_class: ClassVar[type[EncoderConfig]] = EncoderConfig
    # State-dict prefixes of the modules `prepare_pretraining` adds: a state dict holding any of them
    # is a pre-trained model's, and `load_state_dict` recreates them first.
    pretraining_modules: ClassVar[tuple[str, ...]] = (MLM_HEADS,)
    # The file, beside the weights, of the vocabulary that names this variant's predicted aspect values
    # (`vocabulary`); None: the variant predicts none. Read alone by `model.registry.load_vocabulary`.
    vocabulary_file: ClassVar[str | None] = None

    def __init__(self, config: EncoderConfig) -> None:
        super().__init__()
        if not isinstance(config, self.config_class):
            raise TypeError(f"{type(self).__name__} needs a {self.config_class.__name__}")
        self.config = config
        # True while a pass needs every position of the last layer (MLM pre-training reads them all).
        self.every_position = False
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

    def initialise_from_backbone(self, tokenizer: PreTrainedTokenizerBase) -> None:
        """Start layers that sit above the backbone from its pre-trained weights (nothing by default).

        Called once on a new encoder after `load_backbone_weights` and `attach_vocabulary`,
        never on a trained model being loaded.
        """

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

    def retrieval_loss(
        self, queries: EncoderOutput, documents: EncoderOutput, positives: int
    ) -> torch.Tensor:
        """The ranking loss of one batch: L_SCE of Eq. 8 (madral-kdd22) unless the variant has its own.

        Query i's positive is document i for i < `positives`; the remaining documents
        are hard negatives, and every document is a negative of every other query.
        """
        return in_batch_softmax_loss(
            queries.embedding,
            documents.embedding[:positives],
            documents.embedding[positives:] if documents.embedding.shape[0] > positives else None,
            self.config.temperature,
        )

    def transformer(self, side: Side) -> BertModel:
        key = "shared" if self.config.shared_towers else Side(side).value
        return self.transformers[key]

    def sequence_output(
        self, batch: TokenizedBatch, side: Side, positions_read: int | None = None
    ) -> torch.Tensor:
        """The transformer's last hidden states (B, L, H); with `positions_read` and in eval mode,
        only the first `positions_read` of them, computed without the rest of the last layer."""
        transformer = self.transformer(side)
        shortcut = positions_read is not None and not (self.training or self.every_position)
        if shortcut and batch.input_ids.shape[1] > positions_read:
            return last_hidden_at_leading_positions(
                transformer, batch.input_ids, batch.attention_mask, positions_read
            )
        return transformer(input_ids=batch.input_ids, attention_mask=batch.attention_mask).last_hidden_state

    def max_length(self, side: Side) -> int:
        if Side(side) is Side.QUERY:
            return self.config.max_query_length
        return self.config.max_document_length

    def forward(self, batch: TokenizedBatch, side: Side) -> EncoderOutput:
        raise NotImplementedError

    def tokenize(self, tokenizer: PreTrainedTokenizerBase, texts: list[str], side: Side) -> TokenizedBatch:
        # NumPy arrays from the Rust tokenizer, then shared with torch (`model.batch_tokenizer`): it matters
        # where a GPU leaves tokenising as the cost.
        input_ids, attention_mask = self.batch_tokenizer(tokenizer, self.max_length(side))(texts)
        return TokenizedBatch(torch.from_numpy(input_ids), torch.from_numpy(attention_mask))

    def batch_tokenizer(self, tokenizer: PreTrainedTokenizerBase, max_length: int) -> BatchTokenizer:
        """`tokenizer` at `max_length` as a `BatchTokenizer`, made once (again if tokens were added)."""
        made: dict[int, BatchTokenizer] = self.__dict__.setdefault("_batch_tokenizers", {})
        found = made.get(max_length)
        if found is None or found.tokenizer is not tokenizer or found.vocabulary_size != len(tokenizer):
            found = made[max_length] = BatchTokenizer(tokenizer, max_length)
        return found

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
        load_checked_weights(self, Path(directory) / WEIGHTS_FILE, self.config.variant)

    def warm_start_from(self, directory: str | Path) -> list[str]:
        """Copy every tensor of a trained model whose name and shape match this one's.

        For fine-tuning a variant from another variant's pre-trained model when the two
        differ only in layers pre-training does not train (repro-ecir24 §8.1: en-v1 "only
        differs during fine-tuning" from MADRAL-ori). Returns the names left at their
        initialisation; the caller decides whether that is acceptable.
        """
        return self._copy_matching(read_weights(Path(directory) / WEIGHTS_FILE), directory)

    def _copy_matching(self, source: Mapping[str, torch.Tensor], directory: str | Path) -> list[str]:
        """`warm_start_from` on the already read tensors of the model in `directory`."""
        own = self.state_dict()
        matched = {
            name: tensor for name, tensor in source.items() if name in own and own[name].shape == tensor.shape
        }
        self.load_state_dict(matched, strict=False)
        return sorted(set(own) - set(matched))

    # --- pre-training: L_MLM + λp Σ_{a ≠ OTHER} (L_AP^a + L_APP^a) (Eq. 7, madral-kdd22) ----------------

    def prepare_pretraining(self) -> None:
        """Add one MLM head per tower, unless there are heads already (idempotent).

        A head (`model.mlm.MlmHead`) owns a BERT transform and an output bias; its decoder
        is the tower's word-embedding matrix, passed in on every call, so nothing is tied
        and safetensors saving keeps working. Heads are created on demand: models never
        pre-trained keep their state dict, and `load_state_dict` recreates the heads of
        a saved pre-trained model. Call this before building an optimiser over `parameters()`.
        """
        self.add_tower_modules(
            MLM_HEADS, lambda tower: MlmHead(tower.config, tower.get_input_embeddings().num_embeddings)
        )

    def add_tower_modules(self, name: str, build: Callable[[BertModel], nn.Module]) -> None:
        """One `build(tower)` per tower under attribute `name`, on this model's device; made once."""
        if name in self._modules:
            return
        device = next(self.parameters()).device
        modules = nn.ModuleDict({key: build(tower) for key, tower in self.transformers.items()})
        self.add_module(name, modules.to(device))

    def tower_module(self, name: str, side: Side) -> nn.Module:
        """The module of `add_tower_modules(name, ...)` for `side`'s tower (pre-training's heads)."""
        self.prepare_pretraining()
        return self._modules[name]["shared" if self.config.shared_towers else Side(side).value]

    def mlm_head(self, side: Side) -> MlmHead:
        return self.tower_module(MLM_HEADS, side)

    def load_state_dict(
        self, state_dict: Mapping[str, Any], strict: bool = True, assign: bool = False
    ) -> Any:
        """nn.Module's, after recreating the pre-training heads when `state_dict` holds some."""
        prefixes = tuple(f"{module}." for module in self.pretraining_modules)
        if any(name.startswith(prefixes) for name in state_dict):
            self.prepare_pretraining()
        return super().load_state_dict(state_dict, strict=strict, assign=assign)

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
        """Eq. 7 (madral-kdd22) on one side's batch, with λp = `aspect_weight` (Eq. 7 has none: 1).

        `mlm_weight` scales L_MLM (Eq. 7: 1). At 0 nothing is masked and the aspect losses are
        computed on the text as it is: a sentence-embedding backbone learns the aspects without
        the MLM steps that pull it away from what it knew (docs/RESULTS.md, "zero-shot").

        Content tokens are masked with BERT's 80/10/10 scheme ([CLS], [SEP], [PAD] and the
        other special tokens never are); the masked batch goes through the model once, the
        MLM head scores the chosen positions from the transformer's last layer, and, when
        the variant learns aspects, `auxiliary_loss` (Σ_{a ≠ OTHER} L_AP^a + L_APP^a) is
        computed on the same pass's output. `annotations` run parallel to the batch.
        """
        side = Side(side)
        size = batch.input_ids.shape[0]
        if len(annotations) != size:
            raise ValueError(f"{len(annotations)} annotations for a batch of {size} texts")
        learns = aspect_weight > 0 and self.config.uses_aspect_labels
        if mlm_weight == 0:
            if not learns:
                raise ValueError(
                    f"mlm_weight=0 leaves {self.config.variant} nothing to pre-train: it learns no aspects "
                    "(or aspect_weight is 0)"
                )
            labels = self.aspect_labels(annotations, tokenizer.tokenize).to(batch.input_ids.device)
            output = self(batch, side)
            aspect = self.auxiliary_loss(output, labels)
            return PretrainingLoss(
                total=aspect_weight * aspect,
                mlm=aspect.new_zeros(()),
                aspect=aspect,
                aspect_accuracy=labels.top1_accuracy(output.aspect_logits),
            )
        self.prepare_pretraining()
        if tokenizer.mask_token_id is None:
            raise ValueError("the tokenizer has no [MASK] token; MLM pre-training needs one")
        masked_ids, mlm_labels = mask_for_mlm(
            batch.input_ids,
            tokenizer.all_special_ids,
            mask_probability,
            generator,
            mask_token_id=tokenizer.mask_token_id,
            vocab_size=int(self.config.backbone["vocab_size"]),
        )
        masked = TokenizedBatch(masked_ids, batch.attention_mask)
        labels = self.aspect_labels(annotations, tokenizer.tokenize) if learns else None
        mlm, output = self.masked_lm_loss(masked, side, mlm_labels, with_output=labels is not None)
        if output is None or labels is None:
            return PretrainingLoss(total=mlm_weight * mlm, mlm=mlm, aspect=mlm.new_zeros(()))
        labels = labels.to(mlm.device)
        aspect = self.auxiliary_loss(output, labels)
        return PretrainingLoss(
            total=mlm_weight * mlm + aspect_weight * aspect,
            mlm=mlm,
            aspect=aspect,
            aspect_accuracy=labels.top1_accuracy(output.aspect_logits),
        )

    def masked_lm_loss(
        self, masked: TokenizedBatch, side: Side, mlm_labels: torch.Tensor, with_output: bool
    ) -> tuple[torch.Tensor, EncoderOutput | None]:
        """L_MLM of the masked batch from the last layer's states, and the model's output when the
        aspect loss needs it (one pass). A variant with another pre-training objective over the masked
        text (Condenser's head) overrides this."""
        hidden, output = self._pretraining_pass(masked, side, with_output=with_output)
        words = self.transformer(side).get_input_embeddings().weight
        return masked_lm_loss(self.mlm_head(side), hidden, words, mlm_labels), output

    def _pretraining_pass(
        self, masked: TokenizedBatch, side: Side, with_output: bool
    ) -> tuple[torch.Tensor, EncoderOutput | None]:
        """Last-layer states of the masked batch, and the model's output when the aspect loss needs it.

        With the output, the states are read off the tower during `forward` (one pass);
        positions a variant pads on beyond the batch's length are dropped.
        """
        transformer = self.transformer(side)
        if not with_output:
            states = transformer(input_ids=masked.input_ids, attention_mask=masked.attention_mask)
            return states.last_hidden_state, None
        captured: list[torch.Tensor] = []
        handle = transformer.register_forward_hook(lambda _module, _inputs, out: captured.append(out[0]))
        self.every_position = True  # in eval mode too (held-out MLM): no leading-positions shortcut
        try:
            output = self(masked, side)
        finally:
            handle.remove()
            self.every_position = False
        if len(captured) != 1:
            raise RuntimeError(
                f"{type(self).__name__}.forward ran its transformer {len(captured)} times; "
                "override pretraining_loss for this variant"
            )
        return captured[0][:, : masked.input_ids.shape[1]], output
