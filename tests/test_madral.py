"""MADR / MADRAL and the repro-ecir24 variants: extraction, fusion, losses, save/load (tiny random BERTs)."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch
from torch.nn import functional
from transformers import PreTrainedTokenizerBase

from model import VARIANTS, AspectVocabulary, DenseEncoder, Side, load_encoder, new_encoder
from model.aspects import (
    IGNORE_INDEX,
    AspectExtractionNetwork,
    ClsGating,
    FirstTokens,
    FusionType,
    PresenceWeighting,
    WeightedSum,
    aspect_learning_loss,
    aspect_prediction_loss,
    aspect_presence_loss,
    pointwise_relevance_loss,
)
from model.aspects.labels import AspectLabels
from model.aspects.vocabulary import VOCABULARY_FILE
from model.madral import MadralConfig
from model.training import QueryExamples, Trainer, TrainingConfig, in_batch_softmax_loss
from model.training.trainer import validation_batches
from tests.conftest import tiny_backbone

ASPECTS = ("category", "brand", "color")
VOCABULARY = AspectVocabulary.from_records(
    [
        {"category": ["Socks"], "brand": ["Nike"], "color": ["White"]},
        {"category": ["Juicers"], "brand": ["Breville"], "color": ["Silver"]},
        {"category": ["Socks"], "brand": ["Adidas"]},
    ],
    ASPECTS,
)
TEXTS = ["socks", "white nike running socks for men with cushioning"]


def build(variant: str, seed: int = 0, **settings: object) -> tuple[DenseEncoder, PreTrainedTokenizerBase]:
    torch.manual_seed(seed)
    settings = {"backbone": tiny_backbone(), "projection_dim": 8, **settings}
    return new_encoder(variant, pretrained=False, vocabulary=VOCABULARY, **settings)


# Aspect Extraction Network (Eq. 1-2)


def test_aen_matches_equations_1_and_2_by_hand() -> None:
    aen = AspectExtractionNetwork(("a", "b"), hidden=2)
    with torch.no_grad():
        aen.queries.copy_(torch.eye(2))
        for layer in (aen.w_query, aen.w_key, aen.w_value):
            layer.weight.copy_(torch.eye(2))
    # Positions: CLS, token x=[1,0], token y=[0,1], PAD. CLS and PAD have huge scores if not masked.
    hidden = torch.tensor([[[9.0, 9.0], [1.0, 0.0], [0.0, 1.0], [5.0, 5.0]]])
    mask = torch.tensor([[1, 1, 1, 0]])
    slots = aen(hidden, mask)
    # Query a scores x and y as 1/sqrt(2) and 0: p = e^{1/√2} / (e^{1/√2} + 1) on x.
    p = math.exp(1 / math.sqrt(2)) / (math.exp(1 / math.sqrt(2)) + 1)
    torch.testing.assert_close(slots.attention[0], torch.tensor([[0.0, p, 1 - p, 0.0], [0.0, 1 - p, p, 0.0]]))
    torch.testing.assert_close(slots.get("a")[0], torch.tensor([p, 1 - p]))
    torch.testing.assert_close(slots.get("b")[0], torch.tensor([1 - p, p]))


def test_aen_gives_zero_attention_to_cls_and_padding_in_the_encoder() -> None:
    encoder, tokenizer = build("madral")
    batch = encoder.tokenize(tokenizer, TEXTS, Side.QUERY)
    output = encoder(batch, Side.QUERY)
    attention = output.aspect_attention
    assert output.aspect_slots == ("category", "brand", "color", "other")
    assert attention.shape == (2, 4, batch.input_ids.shape[1])
    assert torch.all(attention[:, :, 0] == 0)  # CLS
    padding = batch.attention_mask == 0
    assert padding[0].any() and torch.all(attention[0][:, padding[0]] == 0)
    torch.testing.assert_close(attention.sum(-1), torch.ones(2, 4))
    assert torch.all(attention[0][:, ~padding[0]][:, 1:] > 0)  # every real token after CLS, [SEP] included


# First-k content tokens (repro-ecir24 en-v2)


def test_first_tokens_reads_positions_one_to_k_in_the_configured_order() -> None:
    extractor = FirstTokens(ASPECTS, order=("category", "color", "brand"))
    hidden = torch.arange(2 * 6 * 3, dtype=torch.float).reshape(2, 6, 3)
    slots = extractor(hidden, torch.ones(2, 6))
    assert extractor.positions == (1, 3, 2) and extractor.min_length == 4
    torch.testing.assert_close(slots.get("category"), hidden[:, 1])
    torch.testing.assert_close(slots.get("color"), hidden[:, 2])
    torch.testing.assert_close(slots.get("brand"), hidden[:, 3])
    with pytest.raises(ValueError, match="must name each of"):
        FirstTokens(ASPECTS, order=("category", "brand"))


def test_en_v2_aspect_embeddings_are_the_transformer_outputs_at_positions_1_to_k() -> None:
    encoder, tokenizer = build("madral-en-v2", first_token_order=("category", "color", "brand"))
    batch = encoder.tokenize(tokenizer, TEXTS, Side.QUERY)
    output = encoder(batch, Side.QUERY)
    hidden = encoder.transformer(Side.QUERY)(
        input_ids=batch.input_ids, attention_mask=batch.attention_mask
    ).last_hidden_state
    assert output.aspect_slots == ASPECTS
    torch.testing.assert_close(output.aspect_embeddings, hidden[:, [1, 3, 2]])
    assert output.fusion_slots == (*ASPECTS, "cls")


def test_first_tokens_pad_texts_shorter_than_k() -> None:
    encoder, tokenizer = build("madral-en-v2")
    batch = encoder.tokenize(tokenizer, ["socks"], Side.QUERY)
    assert batch.input_ids.shape[1] == 3  # [CLS] socks [SEP]: no position 3 for the third aspect
    padded = batch.padded_to(4, 0)
    assert padded.input_ids[0].tolist()[-1] == 0 and padded.attention_mask[0].tolist() == [1, 1, 1, 0]
    output = encoder(batch, Side.QUERY)
    assert output.aspect_embeddings.shape == (1, 3, 32)
    alone = output.embedding
    together = encoder(encoder.tokenize(tokenizer, ["socks", TEXTS[1]], Side.QUERY), Side.QUERY).embedding
    torch.testing.assert_close(alone[0], together[0], atol=1e-5, rtol=1e-5)  # padding changes nothing


# Fusion networks (Eq. 4, Eq. 5, §6.3)


def test_weighted_sum_is_softmax_of_gamma_whatever_the_input() -> None:
    """Eq. 4: input-independent weights softmax(γ); neither CLS nor presence moves them."""
    fusion = WeightedSum(4)
    with torch.no_grad():
        fusion.gamma.copy_(torch.tensor([0.0, math.log(2.0), math.log(3.0), math.log(2.0)]))
    # softmax(γ) = (1, 2, 3, 2) / 8 on every row.
    expected = torch.tensor([[1 / 8, 2 / 8, 3 / 8, 2 / 8]] * 2)
    torch.testing.assert_close(fusion(torch.tensor([[1.0, -2.0], [5.0, 0.0]]), None), expected)
    presence = torch.tensor([[0.0, 1.0, 0.0, 1.0], [1.0, 1.0, 1.0, 1.0]])
    torch.testing.assert_close(fusion(torch.zeros(2, 2), presence), expected)


def test_presence_weighting_by_hand_and_absent_aspects_get_zero() -> None:
    fusion = PresenceWeighting(3)
    with torch.no_grad():
        fusion.gamma.copy_(torch.tensor([0.0, math.log(2.0), 0.0]))  # γ ∝ (1, 2, 1)
    presence = torch.tensor([[1.0, 0.5, 0.0]])
    # w ∝ P·γ = (1, 1, 0) -> (0.5, 0.5, 0.0)
    torch.testing.assert_close(fusion(torch.zeros(1, 2), presence), torch.tensor([[0.5, 0.5, 0.0]]))
    # All present: Eq. 5 reduces to Eq. 4's softmax(γ) = (0.25, 0.5, 0.25).
    torch.testing.assert_close(fusion(torch.zeros(1, 2), torch.ones(1, 3)), torch.tensor([[0.25, 0.5, 0.25]]))


def test_cls_gating_is_softmax_of_a_linear_layer_on_cls() -> None:
    gate = ClsGating(2, 3)
    with torch.no_grad():
        gate.gate.weight.copy_(torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]]))
        gate.gate.bias.zero_()
    total = math.e + 1 + 1
    # Row 0, CLS (1, 0): logits (1, 0, 0). Row 1, CLS (0, ln 2): logits (0, ln 2, 0) -> (1, 2, 1) / 4.
    expected = torch.tensor([[math.e / total, 1 / total, 1 / total], [0.25, 0.5, 0.25]])
    torch.testing.assert_close(gate(torch.tensor([[1.0, 0.0], [0.0, math.log(2.0)]]), None), expected)


def test_madral_forced_absent_color_gets_zero_weight_and_other_has_a_presence() -> None:
    encoder, tokenizer = build("madral")
    with torch.no_grad():
        encoder.towers["shared"].presence.layers["color"].bias.fill_(-math.inf)
    output = encoder.embed_texts(tokenizer, TEXTS, Side.DOCUMENT)
    color = output.fusion_slots.index("color")
    assert output.fusion_slots == ("category", "brand", "color", "other")
    assert torch.all(output.fusion_presence[:, color] == 0)
    assert torch.all(output.fusion_weights[:, color] == 0)
    assert torch.all(output.fusion_presence[:, 3] > 0)  # OTHER's presence is predicted (Table 8)
    torch.testing.assert_close(output.fusion_weights.sum(-1), torch.ones(2))
    assert output.presence_logits.shape == (2, 3)


def test_the_embedding_is_the_projected_weighted_sum_of_the_slots() -> None:
    encoder, tokenizer = build("madral-en-v1")
    batch = encoder.tokenize(tokenizer, TEXTS, Side.QUERY)
    output = encoder(batch, Side.QUERY)
    hidden = encoder.transformer(Side.QUERY)(
        input_ids=batch.input_ids, attention_mask=batch.attention_mask
    ).last_hidden_state
    slots = torch.cat([output.aspect_embeddings, hidden[:, :1]], dim=1)  # aspects + CLS
    fused = (output.fusion_weights[..., None] * slots).sum(1)
    expected = functional.normalize(encoder.towers["shared"].projection(fused), dim=-1)
    torch.testing.assert_close(output.embedding, expected)


def test_no_fusion_embeds_cls_alone() -> None:
    encoder, tokenizer = build("no-fusion")
    batch = encoder.tokenize(tokenizer, TEXTS, Side.QUERY)
    output = encoder(batch, Side.QUERY)
    hidden = encoder.transformer(Side.QUERY)(
        input_ids=batch.input_ids, attention_mask=batch.attention_mask
    ).last_hidden_state
    expected = functional.normalize(encoder.towers["shared"].projection(hidden[:, 0]), dim=-1)
    torch.testing.assert_close(output.embedding, expected)
    assert output.fusion_weights is None and output.fusion_slots == ()
    assert set(output.aspect_logits) == set(ASPECTS)


# Losses (Eq. 3, Eq. 6, §7.1)


def test_aspect_prediction_loss_by_hand() -> None:
    logits = torch.tensor([[0.0, 0.0, math.log(2.0)], [1.0, 0.0, 0.0], [5.0, 0.0, 0.0]])
    targets = torch.tensor([[0, 2], [1, IGNORE_INDEX], [IGNORE_INDEX, IGNORE_INDEX]])
    # Record 0: P = (1/4, 1/4, 2/4); annotations {0, 2}: -(log 1/4 + log 1/2) / 2.
    record0 = -(math.log(0.25) + math.log(0.5)) / 2
    # Record 1: P(1) = 1 / (e + 2); its second annotation is unseen and ignored.
    record1 = -math.log(1 / (math.e + 2))
    # Record 2 has no known annotation: masked, not averaged in.
    expected = (record0 + record1) / 2
    assert aspect_prediction_loss(logits, targets).item() == pytest.approx(expected, rel=1e-6)


def test_aspect_presence_loss_by_hand() -> None:
    logits = torch.tensor([0.0, 2.0, -1.0])
    targets = torch.tensor([1, 0, IGNORE_INDEX])
    # -log σ(0) = log 2;  -log(1 - σ(2)) = log(1 + e^2); the third is unknown.
    expected = (math.log(2.0) + math.log(1 + math.exp(2.0))) / 2
    assert aspect_presence_loss(logits, targets).item() == pytest.approx(expected, rel=1e-6)


def test_fully_masked_losses_are_zero_without_nan_gradients() -> None:
    logits = torch.randn(2, 3, requires_grad=True)
    loss = aspect_prediction_loss(logits, torch.full((2, 1), IGNORE_INDEX)) + aspect_presence_loss(
        logits[:, 0], torch.full((2,), IGNORE_INDEX)
    )
    loss.backward()
    assert loss.item() == 0.0
    assert torch.all(logits.grad == 0)


def test_aspect_learning_loss_sums_ap_and_app_over_aspects() -> None:
    logits = {"category": torch.tensor([[0.0, math.log(3.0)]]), "brand": torch.tensor([[0.0, 0.0]])}
    labels = AspectLabels(
        {"category": torch.tensor([[1]]), "brand": torch.tensor([[IGNORE_INDEX]])},
        torch.tensor([[1, 0]]),
    )
    presence = torch.tensor([[0.0, 0.0]])
    # AP: category -log(3/4), brand masked (0). APP: two labels at σ(0): 2 log 2.
    expected = -math.log(0.75) + 2 * math.log(2.0)
    assert aspect_learning_loss(logits, presence, labels).item() == pytest.approx(expected, rel=1e-6)
    only_ap = aspect_learning_loss(logits, None, labels, presence=False)
    assert only_ap.item() == pytest.approx(-math.log(0.75), rel=1e-6)


def test_pointwise_relevance_loss_by_hand() -> None:
    queries = torch.tensor([[1.0, 0.0], [1.0, 0.0]])
    documents = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    # Pair 0: cos 1, relevant: log(1 + e^{-1/τ}). Pair 1: cos 0, not relevant: log 2.
    expected = (math.log(1 + math.exp(-1 / 0.5)) + math.log(2.0)) / 2
    loss = pointwise_relevance_loss(queries, documents, torch.tensor([1, 0]), temperature=0.5)
    assert loss.item() == pytest.approx(expected, rel=1e-6)


def test_no_aspect_loss_reaches_other() -> None:
    encoder, tokenizer = build("madral")
    output = encoder(encoder.tokenize(tokenizer, TEXTS, Side.QUERY), Side.QUERY)
    labels = encoder.aspect_labels([{"category": ["Socks"], "brand": ["Nike"]}, {"color": ["Silver"]}])
    encoder.auxiliary_loss(output, labels).backward()
    tower = encoder.towers["shared"]
    other = tower.extractor.names.index("other")
    queries_grad = tower.extractor.queries.grad
    assert torch.all(queries_grad[other] == 0)
    assert all(queries_grad[i].abs().sum() > 0 for i in range(3))
    assert torch.all(tower.presence.layers["other"].weight.grad == 0)
    assert tower.presence.layers["color"].weight.grad.abs().sum() > 0
    assert set(encoder.aspect_prediction.aspects) == set(ASPECTS)


def test_unseen_values_are_masked_but_count_as_present() -> None:
    encoder, tokenizer = build("madral")
    output = encoder.embed_texts(tokenizer, TEXTS, Side.QUERY)
    labels = encoder.aspect_labels([{"brand": ["Puma"]}, {"brand": ["Nike", "Reebok"]}])
    nike = VOCABULARY.values("brand").values.index("nike")
    assert labels.values["brand"].tolist() == [[-100, -100], [nike, -100]]
    assert labels.presence[:, 1].tolist() == [1, 1]
    brand = aspect_prediction_loss(output.aspect_logits["brand"], labels.values["brand"])
    expected = -output.aspect_logits["brand"][1].log_softmax(-1)[nike]  # record 1's Nike alone
    torch.testing.assert_close(brand, expected)


def test_madr_has_no_aspect_loss_and_no_heads() -> None:
    encoder, tokenizer = build("madr")
    output = encoder.embed_texts(tokenizer, TEXTS, Side.QUERY)
    assert encoder.aspect_prediction is None and output.aspect_logits == {}
    assert not encoder.config.uses_aspect_labels
    assert encoder.auxiliary_loss(output, None).item() == 0.0


# Layers, towers, configuration


def test_drop_last_layer_removes_one_transformer_layer() -> None:
    layers = {
        name: len(build(name)[0].transformers["shared"].encoder.layer)
        for name in ("bibert", "madral", "madr", "madral-en-v2")
    }
    assert layers == {"bibert": 2, "madral": 1, "madr": 1, "madral-en-v2": 2}
    kept = build("madral", drop_last_layer=False)[0]
    assert len(kept.transformers["shared"].encoder.layer) == 2


def test_pretrained_madral_loads_the_first_layers_of_the_backbone() -> None:
    encoder, _ = new_encoder("madral", vocabulary=VOCABULARY)
    bibert, _ = new_encoder("bibert")
    layers = encoder.transformers["shared"].encoder.layer
    assert len(layers) == len(bibert.transformers["shared"].encoder.layer) - 1 == 5
    torch.testing.assert_close(
        layers[4].output.dense.weight, bibert.transformers["shared"].encoder.layer[4].output.dense.weight
    )


def test_separate_towers_share_the_prediction_heads() -> None:
    encoder, tokenizer = build("madral", shared_towers=False)
    assert set(encoder.towers) == {"query", "document"}
    query = encoder.embed_texts(tokenizer, TEXTS, Side.QUERY)
    document = encoder.embed_texts(tokenizer, TEXTS, Side.DOCUMENT)
    assert not torch.allclose(query.embedding, document.embedding)
    names = [name for name, _ in encoder.named_parameters() if name.startswith("aspect_prediction.")]
    assert sorted(names) == sorted(
        f"aspect_prediction.tables.{a}.{p}" for a in ASPECTS for p in ("weight", "bias")
    )


def test_config_validation_names_the_problem() -> None:
    with pytest.raises(ValueError, match="set implicit_slot='cls'"):
        build("no-fusion", implicit_slot="other")
    with pytest.raises(ValueError, match="aspect_vocabulary_sizes for exactly"):
        new_encoder("madral", pretrained=False, backbone=tiny_backbone())
    with pytest.raises(ValueError, match="first_token_order must name each"):
        build("madral-en-v2", first_token_order=("category", "brand"))
    with pytest.raises(ValueError, match="only applies to representation='first_tokens'"):
        build("madral", first_token_order=(*ASPECTS, "other"))
    with pytest.raises(ValueError, match="have no vocabulary values"):
        MadralConfig(
            backbone=tiny_backbone(), aspect_vocabulary_sizes={"category": 3, "brand": 0, "color": 1}
        )
    with pytest.raises(ValueError, match="is BiBERT"):
        build("no-fusion", aspect_learning=False, presence_learning=False)
    with pytest.raises(ValueError, match="'fusion_type' is not a valid FusionType"):
        build("madral", fusion="fusion_type")


def test_weighted_sum_fusion_ignores_presence() -> None:
    encoder, tokenizer = build("madral", fusion=FusionType.WEIGHTED_SUM, presence_learning=False)
    output = encoder.embed_texts(tokenizer, TEXTS, Side.QUERY)
    assert encoder.towers["shared"].presence is None and output.fusion_presence is None
    torch.testing.assert_close(output.fusion_weights, torch.full((2, 4), 0.25))  # γ starts uniform
    with torch.no_grad():
        encoder.towers["shared"].fusion.gamma.copy_(torch.tensor([math.log(3.0), 0.0, 0.0, math.log(3.0)]))
    output = encoder.embed_texts(tokenizer, TEXTS, Side.QUERY)
    # softmax(γ) = (3, 1, 1, 3) / 8 for both texts, whatever their content.
    torch.testing.assert_close(output.fusion_weights, torch.tensor([[3 / 8, 1 / 8, 1 / 8, 3 / 8]] * 2))


def test_config_round_trips_through_json_with_enums_and_tuples() -> None:
    config = build("madral-en-v2", first_token_order=("category", "color", "brand"))[0].config
    data = config.to_dict()
    assert data["fusion"] == "cls_gating" and data["representation"] == "first_tokens"
    assert data["first_token_order"] == ["category", "color", "brand"]
    assert type(config).from_dict(data) == config


# Save -> load, for every registered variant


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_save_then_load_gives_identical_outputs(tmp_path, variant: str) -> None:
    small = {"dimensions": 256, "winners": 8} if variant == "uhd" else {}  # not n = 81,920 per bucket
    if variant == "zero-shot":
        small = {"projection_dim": None}  # its identity projection is as wide as the backbone
    encoder, tokenizer = build(variant, shared_towers=False, **small)
    encoder.save_pretrained(tmp_path, tokenizer)
    loaded, loaded_tokenizer = load_encoder(tmp_path)
    assert type(loaded) is type(encoder) and loaded.config == encoder.config
    for side in Side:
        expected = encoder.embed_texts(tokenizer, TEXTS, side)
        actual = loaded.embed_texts(loaded_tokenizer, TEXTS, side)
        torch.testing.assert_close(actual.embedding, expected.embedding)
        assert actual.aspect_logits.keys() == expected.aspect_logits.keys()
        for name in expected.aspect_logits:
            torch.testing.assert_close(actual.aspect_logits[name], expected.aspect_logits[name])
        for field in ("presence_logits", "fusion_weights", "fusion_presence"):
            torch.testing.assert_close(getattr(actual, field), getattr(expected, field))
    if (tmp_path / VOCABULARY_FILE).is_file():
        assert loaded.vocabulary == VOCABULARY
        (tmp_path / VOCABULARY_FILE).unlink()  # the config alone sizes the heads
        again, _ = load_encoder(tmp_path)
        torch.testing.assert_close(
            again.embed_texts(tokenizer, TEXTS, Side.QUERY).embedding,
            encoder.embed_texts(tokenizer, TEXTS, Side.QUERY).embedding,
        )


def test_the_fine_tuning_loss_is_eq_8_of_its_parts(tmp_path) -> None:
    """L_SCE + w·L_CE + λ Σ_a (L_AP^a + L_APP^a)(Q) + (L_AP^a + L_APP^a)(D) (Eq. 8, madral-kdd22)."""
    encoder, tokenizer = build("madral")
    encoder.eval()  # no dropout: the parts below see the embeddings the trainer saw
    queries, positives, negatives = (
        ["white nike socks", "breville juicer"],
        ["nike socks", "juicer"],
        ["socks"],
    )
    query_aspects = [{"brand": ["Nike"], "color": ["White"]}, None]
    positive_aspects = [{"category": ["Socks"], "brand": ["Nike"]}, {"category": ["Juicers"]}]
    negative_aspects = [{"category": ["Socks"], "brand": ["Adidas"]}]
    examples = [
        QueryExamples(
            queries[0],
            (positives[0],),
            tuple(negatives),
            query_aspects[0],
            (positive_aspects[0],),
            tuple(negative_aspects),
        ),
        QueryExamples(queries[1], (positives[1],), (), query_aspects[1], (positive_aspects[1],)),
    ]
    (batch,) = validation_batches(examples, batch_size=2)  # query 0 has a hard negative, query 1 none
    config = TrainingConfig(
        pointwise_loss_weight=0.3, aspect_loss_weight=0.5, device="cpu", show_progress=False
    )
    with torch.no_grad():
        loss = Trainer(encoder, tokenizer, config, tmp_path).batch_loss(batch)
        q = encoder(encoder.tokenize(tokenizer, queries, Side.QUERY), Side.QUERY)
        d = encoder(encoder.tokenize(tokenizer, positives + negatives, Side.DOCUMENT), Side.DOCUMENT)
    temperature = encoder.config.temperature
    sce = in_batch_softmax_loss(q.embedding, d.embedding[:2], d.embedding[2:], temperature)
    # L_CE pairs: each query with its positive (relevant), query 0 with its hard negative (not).
    pairs = torch.cat([q.embedding, q.embedding[:1]])
    ce = pointwise_relevance_loss(pairs, d.embedding, torch.tensor([1, 1, 0]), temperature)
    labels_q = encoder.aspect_labels(query_aspects, tokenizer.tokenize)
    labels_d = encoder.aspect_labels(positive_aspects + negative_aspects, tokenizer.tokenize)
    aspects = encoder.auxiliary_loss(q, labels_q) + encoder.auxiliary_loss(d, labels_d)
    assert min(sce.item(), ce.item(), aspects.item()) > 0
    torch.testing.assert_close(loss, sce + 0.3 * ce + 0.5 * aspects)
    # madral-kdd22's ablation of aspect learning on one side: only that side's aspect losses count.
    for side, output, labels in (("query", q, labels_q), ("document", d, labels_d)):
        one_side = dataclasses.replace(config, aspect_sides=(side,))
        with torch.no_grad():
            partial = Trainer(encoder, tokenizer, one_side, tmp_path).batch_loss(batch)
        torch.testing.assert_close(partial, sce + 0.3 * ce + 0.5 * encoder.auxiliary_loss(output, labels))
    with pytest.raises(ValueError, match="aspect_sides"):
        dataclasses.replace(config, aspect_sides=("item",))


def test_the_trainer_fits_a_multi_aspect_variant_and_the_aspect_loss_reaches_the_heads(tmp_path) -> None:
    encoder, tokenizer = build("madral-en-v2", projection_dim=16)
    heads = {name: p.detach().clone() for name, p in encoder.aspect_prediction.named_parameters()}
    examples = [
        QueryExamples(
            f"{color} {item}",
            (f"{color} {item} for sale",),
            (f"{item} in another shade",),
            {"color": [color]},
            ({"category": [item], "color": [color]},),
            ({"category": [item]},),
        )
        for color in ("white", "silver", "green")
        for item in ("socks", "juicers")
    ]
    config = TrainingConfig(
        max_steps=2,
        batch_size=3,
        learning_rate=1e-3,
        weight_decay=0.0,
        aspect_loss_weight=0.1,
        show_progress=False,
    )
    report = Trainer(encoder, tokenizer, config, tmp_path).fit(examples)
    assert report.steps == 2 and math.isfinite(report.final_train_loss) and report.final_train_loss > 0
    loaded = load_encoder(tmp_path)[0]
    assert loaded.vocabulary == VOCABULARY
    # The prediction tables get gradient from the λ term alone: they moved, so it was in the loss.
    moved = [
        name for name, p in loaded.aspect_prediction.named_parameters() if not torch.equal(p, heads[name])
    ]
    assert moved
