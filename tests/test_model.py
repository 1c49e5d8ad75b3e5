"""BiBERT and the model directory format, on tiny random BERT configs."""

from __future__ import annotations

import json

import pytest
import torch

from model import Side, load_encoder, new_encoder, variant_class
from tests.conftest import tiny_backbone

TEXTS = ["white nike socks", "breville juicer with a long description " * 5]


def test_bibert_embeddings_are_unit_length_and_projected() -> None:
    encoder, tokenizer = new_encoder("bibert", pretrained=False, backbone=tiny_backbone(), projection_dim=8)
    output = encoder.embed_texts(tokenizer, TEXTS, Side.QUERY)
    assert output.embedding.shape == (2, 8)
    torch.testing.assert_close(output.embedding.norm(dim=-1), torch.ones(2))
    assert output.aspect_logits == {} and output.fusion_weights is None


def test_query_truncation_uses_the_query_length() -> None:
    encoder, tokenizer = new_encoder(
        "bibert", pretrained=False, backbone=tiny_backbone(), max_query_length=8, max_document_length=16
    )
    assert encoder.tokenize(tokenizer, TEXTS, Side.QUERY).input_ids.shape[1] == 8
    assert encoder.tokenize(tokenizer, TEXTS, Side.DOCUMENT).input_ids.shape[1] == 16


def test_separate_towers_give_different_encodings() -> None:
    torch.manual_seed(0)
    encoder, tokenizer = new_encoder(
        "bibert", pretrained=False, backbone=tiny_backbone(), shared_towers=False
    )
    query = encoder.embed_texts(tokenizer, TEXTS, Side.QUERY).embedding
    document = encoder.embed_texts(tokenizer, TEXTS, Side.DOCUMENT).embedding
    assert not torch.allclose(query, document)
    assert set(encoder.transformers) == {"query", "document"}


@pytest.mark.parametrize("shared", [True, False])
def test_save_then_load_gives_identical_outputs(tmp_path, shared: bool) -> None:
    encoder, tokenizer = new_encoder(
        "bibert", pretrained=False, backbone=tiny_backbone(), shared_towers=shared, model_version="7"
    )
    encoder.save_pretrained(tmp_path, tokenizer)
    loaded, loaded_tokenizer = load_encoder(tmp_path)
    assert json.loads((tmp_path / "config.json").read_text())["variant"] == "bibert"
    assert loaded.config == encoder.config
    for side in Side:
        torch.testing.assert_close(
            loaded.embed_texts(loaded_tokenizer, TEXTS, side).embedding,
            encoder.embed_texts(tokenizer, TEXTS, side).embedding,
        )


def test_pretrained_backbone_weights_are_loaded() -> None:
    encoder, _ = new_encoder("bibert")
    assert encoder.config.hidden_size == 384
    assert encoder.transformers["shared"].config.num_hidden_layers == 6
    # Pre-trained word embeddings are not the N(0, 0.02) of a random init.
    assert encoder.transformers["shared"].embeddings.word_embeddings.weight.std().item() > 0.03


def test_errors_name_the_problem(tmp_path) -> None:
    with pytest.raises(ValueError, match="unknown variant 'madral-x'; known variants: bibert"):
        variant_class("madral-x")
    with pytest.raises(FileNotFoundError, match=r"config\.json is missing"):
        load_encoder(tmp_path)
    with pytest.raises(ValueError, match="projection_dim must be positive"):
        new_encoder("bibert", pretrained=False, backbone=tiny_backbone(), projection_dim=0)
