"""Baselines: MtBERT, MpBERT, DSSM and BiBERT-CONCAT (tiny random BERTs unless stated)."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.nn import functional
from transformers import BertModel, PreTrainedTokenizerBase

from model import (
    AspectVocabulary,
    DenseEncoder,
    Side,
    TokenizedBatch,
    document_text,
    document_text_with_aspects,
    new_encoder,
)
from model.baselines import DssmEncoder, WordpieceBag
from tests.conftest import tiny_backbone

ASPECTS = ("category", "brand", "color")
VOCABULARY = AspectVocabulary.from_records(
    [{"category": ["Socks"], "brand": ["Nike"], "color": ["White"]}, {"category": ["Juicers"]}], ASPECTS
)
TEXTS = ["socks", "white nike running socks for men with cushioning"]


def build(variant: str, **settings: object) -> tuple[DenseEncoder, PreTrainedTokenizerBase]:
    torch.manual_seed(0)
    settings = {"backbone": tiny_backbone(), "projection_dim": 8, **settings}
    return new_encoder(variant, pretrained=False, vocabulary=VOCABULARY, **settings)


def hidden_states(encoder: DenseEncoder, batch: TokenizedBatch, side: Side = Side.QUERY) -> torch.Tensor:
    return encoder.transformer(side)(
        input_ids=batch.input_ids, attention_mask=batch.attention_mask
    ).last_hidden_state


def test_mtbert_predicts_every_aspect_from_cls_and_embeds_cls() -> None:
    encoder, tokenizer = build("mtbert")
    batch = encoder.tokenize(tokenizer, TEXTS, Side.QUERY)
    output = encoder(batch, Side.QUERY)
    cls = hidden_states(encoder, batch)[:, 0]
    for index, name in enumerate(ASPECTS):
        torch.testing.assert_close(output.aspect_embeddings[:, index], cls)
        torch.testing.assert_close(output.aspect_logits[name], encoder.aspect_prediction.tables[name](cls))
    expected = functional.normalize(encoder.towers["shared"].projection(cls), dim=-1)
    torch.testing.assert_close(output.embedding, expected)
    assert output.fusion_weights is None and output.presence_logits.shape == (2, 3)
    labels = encoder.aspect_labels([{"category": ["Socks"]}, None])
    assert encoder.auxiliary_loss(output, labels).item() > 0
    with pytest.raises(ValueError, match="use fusion='none'"):
        build("mtbert", fusion="cls_gating")


def test_mpbert_fuses_the_first_m_token_encodings() -> None:
    encoder, tokenizer = build("mpbert")
    assert encoder.config.pooled_tokens == len(ASPECTS) + 1  # as many slots as MADRAL fuses
    batch = encoder.tokenize(tokenizer, TEXTS, Side.QUERY)
    output = encoder(batch, Side.QUERY)
    assert output.fusion_slots == ("token_0", "token_1", "token_2", "token_3")
    torch.testing.assert_close(output.aspect_embeddings, hidden_states(encoder, batch)[:, :4])
    torch.testing.assert_close(output.fusion_weights.sum(-1), torch.ones(2))
    assert output.aspect_logits == {} and output.presence_logits is None
    assert not encoder.config.uses_aspect_labels
    short = encoder(encoder.tokenize(tokenizer, ["socks"], Side.QUERY), Side.QUERY)  # 3 tokens, padded to 4
    torch.testing.assert_close(short.embedding[0], output.embedding[0], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("fusion", ["weighted_sum", "cls_gating"])
def test_mpbert_takes_other_fusions_but_not_none(fusion: str) -> None:
    encoder, tokenizer = build("mpbert", fusion=fusion, pooled_tokens=3)
    output = encoder.embed_texts(tokenizer, TEXTS, Side.DOCUMENT)
    assert output.fusion_weights.shape == (2, 3)
    with pytest.raises(ValueError, match="would be BiBERT"):
        build("mpbert", fusion="none")
    with pytest.raises(ValueError, match=r"pooled_tokens=1 must lie in \[2"):
        build("mpbert", pooled_tokens=1)


def test_dssm_has_no_transformer_and_embeds_the_mean_of_content_wordpieces() -> None:
    encoder, tokenizer = build("dssm", hidden_layers=())
    assert isinstance(encoder, DssmEncoder)
    assert not any(isinstance(module, BertModel) for module in encoder.modules())
    tower: WordpieceBag = encoder.transformers["shared"]
    batch = encoder.tokenize(tokenizer, TEXTS, Side.QUERY)
    output = encoder(batch, Side.QUERY)
    # Text 0 is [CLS] socks [SEP] [PAD]...: the mean is the embedding of "socks" alone.
    socks = tower.word_embeddings.weight[tokenizer.convert_tokens_to_ids("socks")]
    expected = functional.normalize(tower.projection(socks), dim=-1)
    torch.testing.assert_close(output.embedding[0], expected)
    # Text 1's mean covers its wordpieces between [CLS] and [SEP] only.
    ids = batch.input_ids[1][batch.attention_mask[1].bool()][1:-1]
    mean = tower.word_embeddings(ids).mean(0)
    torch.testing.assert_close(output.embedding[1], functional.normalize(tower.projection(mean), dim=-1))


def test_dssm_default_mlp_is_tanh_layers() -> None:
    encoder, _ = build("dssm")
    mlp = encoder.transformers["shared"].mlp
    assert [type(m) for m in mlp] == [nn.Linear, nn.Tanh, nn.Linear, nn.Tanh]
    assert mlp[0].in_features == 32 and mlp[2].out_features == 300
    with pytest.raises(ValueError, match="positive widths"):
        build("dssm", hidden_layers=(0,))


def test_dssm_starts_from_the_pretrained_word_embeddings() -> None:
    encoder, _ = new_encoder("dssm", shared_towers=False)
    bibert, _ = new_encoder("bibert")
    table = bibert.transformers["shared"].embeddings.word_embeddings.weight
    for side in ("query", "document"):
        torch.testing.assert_close(encoder.transformers[side].word_embeddings.weight, table)


def test_bibert_concat_reads_documents_with_aspects_after_indicators() -> None:
    encoder, tokenizer = build("bibert-concat")
    assert encoder.config.appends_aspects_to_documents
    others = [build(name)[0].config for name in ("bibert", "madral", "dssm")]
    assert not any(config.appends_aspects_to_documents for config in others)
    product = {
        "title": "Crew socks",
        "bullet_points": ["cotton"],
        "description": "soft " * 200,
        "aspects": {"brand": ["Nike"], "category": ["Clothing", "Socks"], "size": ["L"]},
    }
    text = document_text_with_aspects(product, ASPECTS)
    assert text.startswith("Crew socks . category: Clothing, Socks . brand: Nike . cotton . soft soft")
    assert "size" not in text and "color" not in text  # only the model's aspects, only those with values
    assert document_text(product).startswith("Crew socks . cotton . soft")  # unchanged
    # The aspects come before the long description, so truncation keeps them.
    batch = encoder.tokenize(tokenizer, [text], Side.DOCUMENT)
    kept = tokenizer.decode(batch.input_ids[0])
    assert "brand : nike" in kept and batch.input_ids.shape[1] == encoder.config.max_document_length
