"""MURAL / MUR (mural-wsdm24) on tiny random BERTs: guiding tokens, MLM, grouping, losses, fusion."""

from __future__ import annotations

import json
import math

import pytest
import torch
from transformers import BertTokenizerFast, PreTrainedTokenizerBase

from model.annotations import annotate
from model.aspects.labels import AspectLabels
from model.backbone import load_tokenizer
from model.batch import Side
from model.encoder import DenseEncoder
from model.mlm import masked_lm_loss
from model.mural import MuralConcatEncoder, MuralEncoder, MurEncoder
from model.mural_aspects import (
    Grouping,
    aspect_groups,
    aspect_learning_loss,
    build_labels,
    build_vocabularies,
    group_contrastive_loss,
    vocabulary_sizes,
)
from model.mural_config import MuralConfig, MurConfig
from model.mural_tokens import IGNORE_INDEX, insert_guiding_tokens, mask_for_mlm
from model.registry import experiment_role, load_vocabulary
from model.text import text_for_model
from tests.conftest import tiny_backbone

ASPECTS = ("category", "brand", "color")
RECORDS = [
    {"category": ["Handmade Products"], "brand": ["Nike"], "color": ["Red"]},
    {"category": ["Home & Kitchen", "Handmade Products"]},
    None,  # not annotated at all
]
TEXTS = ["red nike running shoes", "hand made kitchen knife set with a long description " * 3, "lamp"]


@pytest.fixture
def tokenizer() -> PreTrainedTokenizerBase:
    # A fresh one per test: a model registers its guiding tokens on the tokenizer it is given.
    return load_tokenizer()


def make_encoder(
    tokenizer: PreTrainedTokenizerBase, cls: type[MuralEncoder] = MuralEncoder, **settings: object
) -> tuple[MuralEncoder, dict]:
    torch.manual_seed(0)
    vocabularies = build_vocabularies(RECORDS, ASPECTS, tokenizer)
    settings.setdefault("value_vocabulary_sizes", vocabulary_sizes(vocabularies, ASPECTS))
    config = cls.config_class(backbone=tiny_backbone(), projection_dim=8, max_document_length=24, **settings)
    encoder = cls(config)
    encoder.attach_vocabularies(vocabularies, tokenizer)
    return encoder, vocabularies


def test_insert_guiding_tokens_shifts_content_and_keeps_max_length() -> None:
    ids = torch.tensor([[101, 5, 6, 7, 8, 102], [101, 9, 102, 0, 0, 0]])
    mask = (ids != 0).long()
    batch = insert_guiding_tokens(ids, mask, [900, 901], max_length=7)
    assert batch.input_ids.tolist() == [[101, 900, 901, 5, 6, 7, 102], [101, 900, 901, 9, 102, 0, 0]]
    assert batch.attention_mask.tolist() == [[1] * 7, [1, 1, 1, 1, 1, 0, 0]]
    unlimited = insert_guiding_tokens(ids, mask, [900, 901])
    assert unlimited.input_ids[0].tolist() == [101, 900, 901, 5, 6, 7, 8, 102]


@pytest.mark.parametrize("grouping", [g.value for g in Grouping])
def test_tokenize_puts_guiding_tokens_at_positions_1_to_k(tokenizer, grouping: str) -> None:
    encoder, _ = make_encoder(tokenizer, grouping=grouping, max_query_length=16)
    count = len(encoder.groups)
    for side in Side:
        batch = encoder.tokenize(tokenizer, TEXTS, side)
        assert batch.input_ids.shape[1] == encoder.max_length(side)  # the long text fills it exactly
        assert batch.input_ids[:, 1 : 1 + count].tolist() == [list(encoder.guiding_token_ids)] * len(TEXTS)
        assert tokenizer.convert_ids_to_tokens(encoder.guiding_token_ids) == list(encoder.guiding_tokens)
        plain = tokenizer(TEXTS[0])["input_ids"]
        assert batch.input_ids[0, 1 + count : count + len(plain)].tolist() == plain[1:]
        assert batch.input_ids[1, -1].item() == tokenizer.sep_token_id  # truncation keeps [SEP]


def test_mlm_never_masks_special_or_guiding_tokens(tokenizer) -> None:
    encoder, _ = make_encoder(tokenizer)
    batch = encoder.tokenize(tokenizer, TEXTS, Side.DOCUMENT)
    protected = torch.isin(
        batch.input_ids, torch.tensor([*tokenizer.all_special_ids, *encoder.guiding_token_ids])
    )
    assert protected[:, : 1 + len(encoder.groups)].all() and (~protected).any()
    labelled = torch.zeros_like(protected)
    for seed in range(300):
        generator = torch.Generator().manual_seed(seed)
        masked, labels = encoder.mask_tokens(batch, tokenizer, Side.DOCUMENT, generator)
        assert (labels[protected] == IGNORE_INDEX).all()
        assert torch.equal(masked.input_ids[protected], batch.input_ids[protected])
        chosen = labels != IGNORE_INDEX
        assert torch.equal(labels[chosen], batch.input_ids[chosen])
        labelled |= chosen
    assert torch.equal(labelled, ~protected)  # every content token gets masked at some seed


def test_mlm_replacements_follow_80_10_10() -> None:
    ids = torch.randint(1000, 2000, (200, 100), generator=torch.Generator().manual_seed(1))
    ids[:, 0], ids[:, -1] = 101, 102  # [CLS] ... [SEP]
    content = ids >= 1000
    # vocab_size=1000 lies below every content id, so a random replacement is recognisable.
    masked, labels = mask_for_mlm(
        ids, [0, 101, 102], 1.0, torch.Generator().manual_seed(2), mask_token_id=103, vocab_size=1000
    )
    assert torch.equal(labels[content], ids[content]) and (labels[~content] == IGNORE_INDEX).all()
    assert torch.equal(masked[~content], ids[~content])
    as_mask = masked[content] == 103
    random = (masked[content] < 1000) & ~as_mask
    unchanged = masked[content] == ids[content]
    assert (as_mask | random | unchanged).all()
    for share, expected in ((as_mask, 0.8), (random, 0.1), (unchanged, 0.1)):
        assert abs(share.float().mean().item() - expected) < 0.01
    # With probability 0.15, about 15% of the content tokens are chosen and no special token ever is.
    _, labels = mask_for_mlm(
        ids, [0, 101, 102], 0.15, torch.Generator().manual_seed(3), mask_token_id=103, vocab_size=1000
    )
    chosen = labels != IGNORE_INDEX
    assert abs(chosen[content].float().mean().item() - 0.15) < 0.01 and not chosen[~content].any()


def test_guiding_token_embeddings_learn_from_mlm(tokenizer) -> None:
    encoder, _ = make_encoder(tokenizer, cls=MurEncoder)
    batch = encoder.tokenize(tokenizer, TEXTS, Side.DOCUMENT)
    masked, labels = encoder.mask_tokens(batch, tokenizer, Side.DOCUMENT, torch.Generator().manual_seed(0))
    encoder.pretraining_losses(masked, labels, {}, Side.DOCUMENT).total.backward()
    grad = encoder.transformer(Side.DOCUMENT).get_input_embeddings().weight.grad
    assert (grad[list(encoder.guiding_token_ids)].abs().sum(dim=1) > 0).all()


@pytest.mark.parametrize(("grouping", "groups"), [("single", 9), ("granularity", 3), ("aspect", 3)])
def test_forward_shapes_and_fusion_weights_sum_to_one(tokenizer, grouping: str, groups: int) -> None:
    encoder, _ = make_encoder(tokenizer, grouping=grouping)
    output = encoder(encoder.tokenize(tokenizer, TEXTS, Side.QUERY), Side.QUERY)
    assert output.embedding.shape == (3, 8)
    torch.testing.assert_close(output.embedding.norm(dim=-1), torch.ones(3))
    assert output.fusion_weights.shape == (3, groups) and output.group_encodings.shape == (3, groups, 32)
    torch.testing.assert_close(output.fusion_weights.sum(dim=-1), torch.ones(3))
    assert {name: logits.shape for name, logits in output.aspect_logits.items()} == {
        "category": (3, 2),
        "brand": (3, 1),
        "color": (3, 1),
    }
    # Each aspect's scores are h · e_v of the token that carries its phrase objective (§6.4).
    for aspect in ASPECTS:
        (k,) = [k for k, group in enumerate(encoder.groups) if (aspect, "phrase") in group.objectives]
        table = encoder.value_embeddings(aspect, "phrase", Side.QUERY)
        torch.testing.assert_close(output.aspect_logits[aspect], output.group_encodings[:, k] @ table.T)


def test_fusion_is_cls_gating_over_guiding_tokens(tokenizer) -> None:
    """Eq. 6-7: w = softmax(U h(x_0) + b), h_X = Σ_k w_k h(o_k), then projection and L2 norm."""
    encoder, _ = make_encoder(tokenizer)
    encoder.eval()  # no dropout, so the hand computation sees the same hidden states
    batch = encoder.tokenize(tokenizer, TEXTS, Side.QUERY)
    output = encoder(batch, Side.QUERY)
    hidden = encoder.transformer(Side.QUERY)(
        input_ids=batch.input_ids, attention_mask=batch.attention_mask
    ).last_hidden_state
    gate, projection = encoder.gates["shared"].gate, encoder.projections["shared"]
    weights = torch.softmax(hidden[:, 0] @ gate.weight.T + gate.bias, dim=-1)
    fused = (weights[:, :, None] * hidden[:, 1:4]).sum(dim=1)
    torch.testing.assert_close(output.fusion_weights, weights)
    torch.testing.assert_close(output.embedding, torch.nn.functional.normalize(projection(fused), dim=-1))
    with_cls, _ = make_encoder(load_tokenizer(), fusion_includes_cls=True)
    assert with_cls(batch, Side.QUERY).fusion_weights.shape == (3, 4)


def test_grouping_schemes_cover_every_objective_once() -> None:
    aspects, granularities = ("category", "brand"), ("phrase", "word", "token")
    expected = {Grouping.SINGLE: 6, Grouping.GRANULARITY: 3, Grouping.ASPECT: 2}
    for grouping, count in expected.items():
        groups = aspect_groups(aspects, granularities, grouping)
        assert len(groups) == count
        objectives = [objective for group in groups for objective in group.objectives]
        assert sorted(objectives) == sorted((a, g) for a in aspects for g in granularities)
    by_aspect = aspect_groups(aspects, granularities, Grouping.ASPECT)
    assert [g.token for g in by_aspect] == ["[ASP_CATEGORY]", "[ASP_BRAND]"]
    assert by_aspect[1].objectives == (("brand", "phrase"), ("brand", "word"), ("brand", "token"))


def test_unshared_tables_start_at_mean_token_embeddings(tokenizer) -> None:
    encoder, vocabularies = make_encoder(tokenizer)
    words = encoder.transformer(Side.DOCUMENT).get_input_embeddings().weight
    phrases = vocabularies["phrase"].values("category").values
    assert phrases == ("handmade products", "home & kitchen")
    pieces = tokenizer.convert_tokens_to_ids(["hand", "##made", "products"])
    table = encoder.value_embeddings("category", "phrase")
    torch.testing.assert_close(table[0], words[pieces].mean(dim=0))
    tokens = vocabularies["token"].values("category").values
    row = tokens.index("##made")
    torch.testing.assert_close(
        encoder.value_embeddings("category", "token")[row], words[tokenizer.convert_tokens_to_ids("##made")]
    )


def test_shared_value_embeddings_pool_the_live_token_embeddings(tokenizer) -> None:
    encoder, _ = make_encoder(tokenizer, value_tables="shared")
    assert len(encoder.value_tables) == 0
    words = encoder.transformer(Side.DOCUMENT).get_input_embeddings().weight
    with torch.no_grad():
        words[tokenizer.convert_tokens_to_ids("products")] += 1.0  # training moves token embeddings...
    pieces = tokenizer.convert_tokens_to_ids(["hand", "##made", "products"])
    # ...and the shared value embeddings move with them (§4.2).
    torch.testing.assert_close(encoder.value_embeddings("category", "phrase")[0], words[pieces].mean(dim=0))


def test_group_contrastive_loss_matches_eq_2_by_hand() -> None:
    encodings = torch.tensor([[1.0, 0.0], [0.0, 2.0]])
    values = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    positives = torch.tensor([[True, False, True], [False, True, False]])
    # Row 0: logits (1, 0, 1); row 1: logits (0, 2, 2).
    row0 = -0.5 * ((1 - math.log(2 * math.e + 1)) + (1 - math.log(2 * math.e + 1)))
    row1 = -(2 - math.log(1 + 2 * math.exp(2)))
    torch.testing.assert_close(
        group_contrastive_loss(encodings, values, positives), torch.tensor([row0, row1])
    )


def test_aspect_loss_averages_within_then_across_groups() -> None:
    """Eq. 4 with missing annotations: averages over the objectives present, per group, then over groups."""
    torch.manual_seed(0)
    encodings = torch.randn(2, 2, 4)  # groups: phrase, word
    tables = {(a, g): torch.randn(3, 4) for a in ("category", "brand") for g in ("phrase", "word")}
    groups = aspect_groups(("category", "brand"), ("phrase", "word"), Grouping.GRANULARITY)
    presence = torch.tensor([[1, 1], [1, 0]])
    labels = {
        "phrase": AspectLabels(
            {"category": torch.tensor([[0, 2], [1, -100]]), "brand": torch.tensor([[1], [-100]])}, presence
        ),
        "word": AspectLabels(
            {"category": torch.tensor([[2], [0]]), "brand": torch.tensor([[-100], [-100]])}, presence
        ),
    }
    loss = aspect_learning_loss(groups, encodings, lambda a, g: tables[(a, g)], labels)

    def single(k: int, aspect: str, granularity: str, positives: list[list[int]]) -> torch.Tensor:
        return group_contrastive_loss(encodings[:, k], tables[(aspect, granularity)], torch.tensor(positives))

    category_phrase = single(0, "category", "phrase", [[1, 0, 1], [0, 1, 0]])
    brand_phrase = single(0, "brand", "phrase", [[0, 1, 0], [0, 0, 0]])
    category_word = single(1, "category", "word", [[0, 0, 1], [1, 0, 0]])
    first = ((category_phrase[0] + brand_phrase[0]) / 2 + category_word[0]) / 2
    second = (category_phrase[1] + category_word[1]) / 2
    torch.testing.assert_close(loss, (first + second) / 2)


def test_pretraining_losses_follow_eq_9_and_lambda_zero_has_no_aspect_loss(tokenizer) -> None:
    results = {}
    for cls in (MuralEncoder, MurEncoder):
        encoder, vocabularies = make_encoder(load_tokenizer(), cls=cls)
        local_tokenizer = load_tokenizer()
        encoder.register_guiding_tokens(local_tokenizer)
        batch = encoder.tokenize(local_tokenizer, TEXTS, Side.DOCUMENT)
        masked, mlm_labels = encoder.mask_tokens(
            batch, local_tokenizer, Side.DOCUMENT, torch.Generator().manual_seed(3)
        )
        labels = build_labels(RECORDS, vocabularies, ASPECTS, local_tokenizer)
        encoder.eval()  # no dropout, so the parts recomputed below see the same hidden states
        losses = encoder.pretraining_losses(masked, mlm_labels, labels, Side.DOCUMENT)
        with torch.no_grad():
            tower = encoder.transformer(Side.DOCUMENT)
            hidden = tower(input_ids=masked.input_ids, attention_mask=masked.attention_mask).last_hidden_state
            words = tower.get_input_embeddings().weight
            # L_MLM of Eq. 8: the shared MLM head's cross-entropy over the chosen positions.
            mlm = masked_lm_loss(encoder.mlm_heads["shared"], hidden, words, mlm_labels)
            aspect = encoder.aspect_loss(encoder(masked, Side.DOCUMENT), labels, Side.DOCUMENT)
        torch.testing.assert_close(losses.mlm, mlm)
        if cls is MuralEncoder:
            torch.testing.assert_close(losses.aspect, aspect)  # L_A of the same pass's guiding tokens
        losses.total.backward()
        results[cls] = (encoder, losses)
    mural, losses = results[MuralEncoder]
    assert losses.aspect.item() > 0 and mural.config.aspect_loss_weight == 0.1  # λ of §5.3.1
    torch.testing.assert_close(losses.total, losses.mlm + 0.1 * losses.aspect)
    assert mural.value_tables["category"]["word"].weight.grad.abs().sum() > 0
    mur, losses = results[MurEncoder]
    assert losses.aspect.item() == 0 and losses.total is losses.mlm
    assert all(p.grad is None for p in mur.value_tables.parameters())


def test_configs_validate_and_name_their_variants(tokenizer) -> None:
    assert (MuralConfig.variant, MurConfig.variant) == ("mural", "mur")
    with pytest.raises(ValueError, match="aspect_loss_weight = 0"):
        MurConfig(backbone=tiny_backbone(), aspect_loss_weight=0.1)
    with pytest.raises(ValueError, match="needs value_vocabulary_sizes"):
        MuralConfig(backbone=tiny_backbone())
    with pytest.raises(ValueError, match="grouping must be one of"):
        MurConfig(backbone=tiny_backbone(), grouping="joint")
    with pytest.raises(ValueError, match="guiding tokens"):
        MurConfig(backbone=tiny_backbone(), grouping="single", max_query_length=10)
    encoder, _ = make_encoder(tokenizer)
    with pytest.raises(ValueError, match="lacks MURAL's guiding tokens"):
        encoder(DenseEncoder.tokenize(encoder, tokenizer, TEXTS, Side.QUERY), Side.QUERY)


@pytest.mark.parametrize("shared_towers", [True, False])
def test_save_then_load_gives_identical_outputs(tmp_path, tokenizer, shared_towers: bool) -> None:
    encoder, _ = make_encoder(tokenizer, shared_towers=shared_towers, grouping="single")
    encoder.eval().save_pretrained(tmp_path, tokenizer)
    data = json.loads((tmp_path / "config.json").read_text())
    assert data["variant"] == "mural"
    loaded = MuralEncoder.from_config_dict(data)
    loaded.load_weights(tmp_path)
    loaded.eval()
    loaded_tokenizer = BertTokenizerFast.from_pretrained(str(tmp_path))
    assert loaded.config == encoder.config
    assert loaded_tokenizer.convert_tokens_to_ids(list(loaded.guiding_tokens)) == list(
        loaded.guiding_token_ids
    )
    for side in Side:
        expected = encoder.embed_texts(tokenizer, TEXTS, side)
        actual = loaded.embed_texts(loaded_tokenizer, TEXTS, side)
        torch.testing.assert_close(actual.embedding, expected.embedding)
        torch.testing.assert_close(actual.aspect_logits["category"], expected.aspect_logits["category"])


def test_loaded_model_names_its_predicted_values(tmp_path, tokenizer) -> None:
    encoder, vocabularies = make_encoder(tokenizer, grouping="single")
    encoder.eval().save_pretrained(tmp_path, tokenizer)
    loaded = MuralEncoder.from_config_dict(json.loads((tmp_path / "config.json").read_text()))
    loaded.load_weights(tmp_path)
    loaded.eval()
    assert loaded.vocabulary is not None
    assert loaded.vocabulary.values("category").values == vocabularies["phrase"].values("category").values
    output = loaded.embed_texts(BertTokenizerFast.from_pretrained(str(tmp_path)), TEXTS, Side.DOCUMENT)
    rows = annotate(loaded, output)
    # A value of the phrase vocabulary (not a class id), as the catalog spells it: what a reader can use.
    assert rows[0].aspect_values["category"] in vocabularies["phrase"].values("category").spellings
    assert set(rows[0].aspect_values) == {"category", "brand", "color"}
    # Read without the weights, the vocabulary is the loaded model's (the phrase level), not another level's.
    alone = load_vocabulary(tmp_path)
    assert alone is not None and alone.to_dict() == loaded.vocabulary.to_dict()
    assert alone.to_dict() != vocabularies["word"].to_dict()


def test_mural_concat_reads_documents_with_their_aspect_strings_and_queries_as_they_are(tokenizer) -> None:
    # mural-wsdm24 §5.1 (6): MURAL with BiBERT-CONCAT's document text; the model itself is MURAL's.
    encoder, _ = make_encoder(tokenizer, MuralConcatEncoder)
    product = {"title": "running shoes", "aspects": {"brand": ["Nike"], "color": ["Red"]}}
    assert text_for_model(product, encoder.config) == "running shoes . brand: Nike . color: Red"
    assert text_for_model(product, make_encoder(tokenizer)[0].config) == "running shoes"
    batch = encoder.tokenize(tokenizer, [text_for_model(product, encoder.config)], Side.DOCUMENT)
    assert encoder(batch, Side.DOCUMENT).embedding.shape == (1, 8)
    assert experiment_role("mural-concat").pretrained_from == "mural-concat"
