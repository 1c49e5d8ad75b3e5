"""Condenser (Gao & Callan 2021; the baseline of repro-ecir24 Table 1 and mural-wsdm24 Table 3)."""

from __future__ import annotations

import pytest
import torch

from jobs.experiment import ExperimentConfig
from model import Side, load_encoder, new_encoder
from model.bibert import BiBertEncoder
from model.condenser import CONDENSER_HEADS, CondenserConfig, CondenserEncoder
from model.mlm import IGNORE_INDEX, mask_for_mlm, masked_lm_loss
from model.training import Pretrainer, PretrainingConfig, PretrainingRecord
from pipelines.experiment.variant import variant_training
from tests.conftest import tiny_backbone

TEXTS = ["white nike socks", "a silver breville juicer made by breville for the kitchen", "lamp"]


def build(**settings: object) -> tuple[CondenserEncoder, object]:
    torch.manual_seed(0)
    backbone = {**tiny_backbone(), "num_hidden_layers": 4}
    encoder, tokenizer = new_encoder(
        "condenser", pretrained=False, backbone=backbone, projection_dim=8, max_document_length=24, **settings
    )
    assert isinstance(encoder, CondenserEncoder)
    return encoder, tokenizer


def test_the_head_reads_half_the_backbone_unless_told_and_refuses_a_layer_it_lacks() -> None:
    backbone = {**tiny_backbone(), "num_hidden_layers": 4}
    assert CondenserConfig(backbone=backbone).condensed_layer == 2
    assert CondenserConfig(backbone=backbone, early_layer=1).condensed_layer == 1
    with pytest.raises(ValueError, match="early_layer"):
        CondenserConfig(backbone=backbone, early_layer=4)
    with pytest.raises(ValueError, match="head_layers"):
        CondenserConfig(backbone=backbone, head_layers=0)


def test_the_loss_is_the_heads_mlm_over_late_cls_and_early_tokens_plus_the_backbones() -> None:
    encoder, tokenizer = build()
    encoder.eval()
    batch = encoder.tokenize(tokenizer, TEXTS, Side.DOCUMENT)
    with torch.no_grad():
        loss = encoder.pretraining_loss(
            batch,
            tokenizer,
            Side.DOCUMENT,
            [None] * 3,
            torch.Generator().manual_seed(7),
            mask_probability=0.4,
        )
        ids, labels = mask_for_mlm(
            batch.input_ids,
            tokenizer.all_special_ids,
            0.4,
            torch.Generator().manual_seed(7),
            mask_token_id=tokenizer.mask_token_id,
            vocab_size=tokenizer.vocab_size,
        )
        assert (labels != IGNORE_INDEX).any()
        tower = encoder.transformer(Side.DOCUMENT)
        # Layer by layer by hand: the early states are layer 2's output of 4.
        mask = batch.attention_mask
        additive = (1.0 - mask[:, None, None, :].float()) * torch.finfo(torch.float32).min
        states = tower.embeddings(input_ids=ids)
        outputs = []
        for layer in tower.encoder.layer:
            out = layer(states, attention_mask=additive)
            states = out[0] if isinstance(out, tuple) else out
            outputs.append(states)
        early, late = outputs[1], outputs[-1]
        head_states = torch.cat([late[:, :1], early[:, 1:]], dim=1)
        for layer in encoder.condenser_head(Side.DOCUMENT).layers:
            out = layer(head_states, attention_mask=additive)
            head_states = out[0] if isinstance(out, tuple) else out
        words = tower.get_input_embeddings().weight
        head = encoder.mlm_head(Side.DOCUMENT)
        backbone_mlm = masked_lm_loss(head, late, words, labels)
        condensed_mlm = masked_lm_loss(head, head_states, words, labels)
    assert loss.mlm.item() == pytest.approx((backbone_mlm + condensed_mlm).item(), rel=1e-4)
    assert loss.total.item() == pytest.approx(loss.mlm.item()) and loss.aspect.item() == 0.0


def test_late_layers_reach_the_head_only_through_cls() -> None:
    encoder, tokenizer = build()
    batch = encoder.tokenize(tokenizer, TEXTS, Side.DOCUMENT)
    tower = encoder.transformer(Side.DOCUMENT)
    late = torch.randn(3, batch.input_ids.shape[1], 32, requires_grad=True)
    early = torch.randn(3, batch.input_ids.shape[1], 32)
    encoder.condenser_head(Side.DOCUMENT)(late[:, 0], early, batch.attention_mask).sum().backward()
    assert late.grad[:, 0].abs().sum() > 0 and late.grad[:, 1:].abs().sum() == 0
    assert tower is encoder.transformer(Side.QUERY)  # shared towers: one head


def test_the_head_is_saved_with_a_pretrained_model_and_embedding_is_bibert_s(tmp_path) -> None:
    encoder, tokenizer = build()
    records = [PretrainingRecord(text, Side.DOCUMENT) for text in TEXTS * 4]
    config = PretrainingConfig(max_steps=2, batch_size=4, seed=3)
    Pretrainer(encoder, tokenizer, config, tmp_path / "pre").fit(records)
    loaded, _ = load_encoder(tmp_path / "pre", "cpu")
    assert CONDENSER_HEADS in loaded._modules
    for name, value in encoder.state_dict().items():
        torch.testing.assert_close(loaded.state_dict()[name], value)
    # Without its heads, the model embeds as a BiBERT with the same weights does.
    bibert = BiBertEncoder(loaded.config)
    kept = {k: v for k, v in loaded.state_dict().items() if not k.startswith((CONDENSER_HEADS, "mlm_heads"))}
    bibert.load_state_dict(kept)
    batch = loaded.tokenize(tokenizer, TEXTS, Side.QUERY)
    with torch.no_grad():
        torch.testing.assert_close(
            loaded(batch, Side.QUERY).embedding, bibert.eval()(batch, Side.QUERY).embedding
        )


def test_the_experiment_pretrains_condenser_and_fine_tunes_it() -> None:
    training = variant_training(ExperimentConfig(), "condenser")
    assert training.pretrained_from == "condenser" and training.loop.aspect_loss_weight == 0.0
    assert "condenser" in ExperimentConfig().variants
