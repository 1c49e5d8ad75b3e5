"""Aspect layers start from the backbone (value tables, AEN), the optimiser's two rates, and the
fidelity fixes of issue 10 that are configuration: en-v1, no-fusion, DSSM's table, MURAL's tables."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from model import Side, new_encoder
from model.aspects import AspectExtractionNetwork, AspectPredictionHeads, AspectVocabulary, FusionType
from model.aspects.extraction import Representation
from model.aspects.fusion import ImplicitSlot
from model.aspects.initialisation import initialise_extraction, initialise_value_tables, text_states
from model.training.optimizer import adamw_with_head_rate
from tests.conftest import tiny_backbone

ASPECTS = ("category", "brand", "color")
VOCABULARY = AspectVocabulary.from_records(
    [
        {"category": ["Socks"], "brand": ["Nike"], "color": ["White"]},
        {"category": ["Juicers"], "brand": ["Breville"], "color": ["Silver"]},
        {"category": ["Cookbooks"], "brand": ["Adidas"], "color": ["Red"]},
    ],
    ASPECTS,
)


def test_value_tables_make_each_value_state_predict_its_own_value() -> None:
    heads = AspectPredictionHeads(4, {"brand": 3})
    states = torch.tensor([[5.0, 1.0, 0.0, 0.0], [5.0, 0.0, 1.0, 0.0], [5.0, 0.0, 0.0, 1.0]])
    initialise_value_tables(heads, {"brand": states}, logit_spread=2.0)
    table = heads.tables["brand"]
    # Rows are the states minus their mean [5, 1/3, 1/3, 1/3], so the shared 5 is gone.
    direction = table.weight / table.weight.norm(dim=1, keepdim=True)
    expected = torch.tensor([[2.0, -1, -1], [-1, 2, -1], [-1, -1, 2]]) / 6**0.5
    torch.testing.assert_close(direction[:, 1:], expected)
    torch.testing.assert_close(direction[:, 0], torch.zeros(3))
    assert torch.all(table.bias == 0)
    logits = table(states)
    assert logits.argmax(-1).tolist() == [0, 1, 2]
    assert logits.std().item() == pytest.approx(2.0, rel=1e-5)


def test_value_tables_refuse_states_of_the_wrong_shape() -> None:
    heads = AspectPredictionHeads(4, {"brand": 3})
    with pytest.raises(ValueError, match="brand: \\(2, 4\\) value states for a table of \\(3, 4\\)"):
        initialise_value_tables(heads, {"brand": torch.ones(2, 4)})


def test_extraction_starts_attending_to_tokens_along_its_aspect() -> None:
    torch.manual_seed(0)  # OTHER keeps its random query: the test must not depend on the suite's order
    network = AspectExtractionNetwork(("brand", "other"), hidden=3)
    tokens = torch.tensor([[0.0, 0.0, 1.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [1.0, 1.0, 0.0]])
    initialise_extraction(network, {"brand": torch.tensor([0.0, 0.0, 1.0])}, tokens, attention_spread=2.0)
    for projection in (network.w_query, network.w_key, network.w_value):
        torch.testing.assert_close(projection.weight, torch.eye(3))
    # Logits of the sample tokens against the brand query spread by exactly 2.
    logits = tokens @ network.queries[0] * network.scale
    assert logits.std().item() == pytest.approx(2.0, rel=1e-5)
    # In a text [CLS, t0, t1, t2], the brand slot attends most to t0, the token along its direction.
    hidden = torch.cat([torch.zeros(1, 3), tokens[:3]])[None]
    slots = network(hidden, torch.ones(1, 4))
    brand = slots.attention[0, 0]
    assert brand[0] == 0 and brand.argmax().item() == 1 and brand[1] > 0.9
    # OTHER has no direction: it keeps its small random query and reads the tokens almost evenly.
    other = slots.attention[0, 1, 1:]
    assert (other.max() - other.min()).item() < 0.01


def test_new_madral_starts_its_heads_from_the_value_names(tiny_backbone_dir: Path) -> None:
    torch.manual_seed(0)
    encoder, tokenizer = new_encoder("madral", backbone_path=tiny_backbone_dir, vocabulary=VOCABULARY)
    torch.manual_seed(0)
    plain, _ = new_encoder(
        "madral", backbone_path=tiny_backbone_dir, vocabulary=VOCABULARY, initialise_aspects=False
    )
    names = VOCABULARY.values("brand").values
    states = text_states(encoder.transformer(Side.DOCUMENT), tokenizer, names)
    rows = encoder.aspect_prediction.tables["brand"].weight
    # Each row is its value's centred state, up to one positive scale for the table.
    centred = states - states.mean(0)
    scale = (rows * centred).sum() / (centred * centred).sum()
    assert scale > 0
    torch.testing.assert_close(rows, centred * scale)
    assert not torch.allclose(plain.aspect_prediction.tables["brand"].weight, rows)
    network = encoder.towers["shared"].extractor
    torch.testing.assert_close(network.w_value.weight, torch.eye(network.queries.shape[1]))
    # The trained weights of a later load are not touched: loading is not initialising.
    assert not torch.allclose(plain.towers["shared"].extractor.w_value.weight, network.w_value.weight)


def test_mural_unshared_tables_start_from_the_loaded_backbone(tiny_backbone_dir: Path) -> None:
    """mural-wsdm24 §4.2: mean wordpiece embeddings of the *pre-trained* backbone, not the random one."""
    encoder, tokenizer = new_encoder(
        "mural", backbone_path=tiny_backbone_dir, vocabulary=VOCABULARY, granularities=["phrase"]
    )
    saved = load_file(str(tiny_backbone_dir / "model.safetensors"))
    words = next(v for k, v in saved.items() if k.endswith("word_embeddings.weight"))
    names = VOCABULARY.values("category").values
    pieces = tokenizer(names[0], add_special_tokens=False)["input_ids"]
    table = encoder.value_embeddings("category", "phrase")
    torch.testing.assert_close(table[0], words[pieces].mean(0))


def test_optimizer_gives_the_backbone_and_the_new_layers_their_own_rates() -> None:
    encoder, _ = new_encoder(
        "madral", pretrained=False, backbone=tiny_backbone(), vocabulary=VOCABULARY, projection_dim=8
    )
    optimizer = adamw_with_head_rate(encoder, 5e-5, 1e-3, weight_decay=0.01)
    rate_of = {id(p): group["lr"] for group in optimizer.param_groups for p in group["params"]}
    decay_of = {id(p): group["weight_decay"] for group in optimizer.param_groups for p in group["params"]}
    named = dict(encoder.named_parameters())
    assert len(rate_of) == len(named)
    for name, parameter in named.items():
        assert rate_of[id(parameter)] == (5e-5 if name.startswith("transformers.") else 1e-3), name
    assert decay_of[id(named["aspect_prediction.tables.brand.weight"])] == 0.01
    assert decay_of[id(named["aspect_prediction.tables.brand.bias"])] == 0.0
    same = adamw_with_head_rate(encoder, 5e-5, None, weight_decay=0.01)
    assert {group["lr"] for group in same.param_groups} == {5e-5}


def test_en_v1_is_madral_with_cls_in_presence_weighting_and_no_fusion_reads_the_aen() -> None:
    """repro-ecir24 §5 and §8.2: en-v1 differs from MADRAL-ori only by CLS in place of OTHER."""
    v1, _ = new_encoder(
        "madral-en-v1", pretrained=False, backbone=tiny_backbone(), vocabulary=VOCABULARY, projection_dim=8
    )
    ori, _ = new_encoder(
        "madral", pretrained=False, backbone=tiny_backbone(), vocabulary=VOCABULARY, projection_dim=8
    )
    assert v1.config.fusion is ori.config.fusion is FusionType.PRESENCE_WEIGHTING
    assert v1.config.implicit_slot is ImplicitSlot.CLS and ori.config.implicit_slot is ImplicitSlot.OTHER
    assert v1.config.drop_last_layer and ori.config.drop_last_layer
    tokenizer = new_encoder("bibert", pretrained=False, backbone=tiny_backbone())[1]
    output = v1(v1.tokenize(tokenizer, ["white nike socks"], Side.DOCUMENT), Side.DOCUMENT)
    assert output.fusion_slots == ("category", "brand", "color", "cls")
    assert output.fusion_presence[0, -1].item() == 1.0  # CLS counts as always present
    none, _ = new_encoder(
        "no-fusion", pretrained=False, backbone=tiny_backbone(), vocabulary=VOCABULARY, projection_dim=8
    )
    assert none.config.representation is Representation.ATTENTION
    assert isinstance(none.towers["shared"].extractor, AspectExtractionNetwork)


def test_dssm_table_starts_from_a_trained_bibert(tmp_path: Path) -> None:
    bibert, tokenizer = new_encoder("bibert", pretrained=False, backbone=tiny_backbone(), projection_dim=8)
    with torch.no_grad():
        bibert.transformer(Side.DOCUMENT).get_input_embeddings().weight.mul_(3.0)
    bibert.save_pretrained(tmp_path / "bibert", tokenizer)
    dssm, _ = new_encoder(
        "dssm", backbone=tiny_backbone(), projection_dim=8, word_embeddings_from=str(tmp_path / "bibert")
    )
    torch.testing.assert_close(
        dssm.transformers["shared"].word_embeddings.weight,
        bibert.transformer(Side.DOCUMENT).get_input_embeddings().weight,
    )
    with pytest.raises(FileNotFoundError, match=r"no model\.safetensors"):
        new_encoder("dssm", backbone=tiny_backbone(), word_embeddings_from=str(tmp_path))


def test_en_v1_and_no_fusion_warm_start_from_a_madral_model(tmp_path: Path) -> None:
    """repro-ecir24 §8.1: both fine-tune MADRAL-ori's pre-trained model; its tensors carry over."""
    settings = {
        "pretrained": False,
        "backbone": tiny_backbone(),
        "vocabulary": VOCABULARY,
        "projection_dim": 8,
    }
    torch.manual_seed(1)
    madral, tokenizer = new_encoder("madral", **settings)
    madral.save_pretrained(tmp_path, tokenizer)
    source = madral.state_dict()
    for variant in ("madral-en-v1", "no-fusion"):
        torch.manual_seed(2)
        target, _ = new_encoder(variant, **settings)
        left = target.warm_start_from(tmp_path)
        state = target.state_dict()
        assert not [name for name in left if name.startswith(("transformers.", "aspect_prediction."))]
        for name, tensor in state.items():
            if name.startswith(("transformers.", "aspect_prediction.")) or ".presence.layers.brand" in name:
                assert torch.equal(tensor, source[name]), name
        # MADRAL's AEN has a fourth query, OTHER's; the aspect rows are copied by slot name.
        queries = target.towers["shared"].extractor.queries
        assert torch.equal(queries, source["towers.shared.extractor.queries"][:3])
        assert "towers.shared.extractor.queries" not in left


@pytest.mark.parametrize("extra", [(), ({"category": ["Kettles"], "brand": ["Smeg"], "color": ["Cream"]},)])
def test_a_warm_start_copies_prediction_rows_by_value_not_by_class_id(tmp_path: Path, extra: tuple) -> None:
    """A vocabulary counted over other products orders its classes otherwise (Socks twice: first here, last
    in VOCABULARY), with as many classes or more: each value keeps the row the source learnt for it,
    and a value the source never had keeps its initialisation."""
    records = [
        {"category": ["Cookbooks"], "brand": ["Adidas"], "color": ["Red"]},
        {"category": ["Socks"], "brand": ["Nike"], "color": ["White"]},
        {"category": ["Socks"], "brand": ["Nike"], "color": ["White"]},
        {"category": ["Juicers"], "brand": ["Breville"], "color": ["Silver"]},
        *extra,
    ]
    reordered = AspectVocabulary.from_records(records, ASPECTS)
    assert all(reordered.values(a).values[0] != VOCABULARY.values(a).values[0] for a in ASPECTS)
    settings = {"pretrained": False, "backbone": tiny_backbone(), "projection_dim": 8}
    torch.manual_seed(1)
    madral, tokenizer = new_encoder("madral", vocabulary=VOCABULARY, **settings)
    madral.save_pretrained(tmp_path, tokenizer)
    torch.manual_seed(2)
    target, _ = new_encoder("madral-en-v1", vocabulary=reordered, **settings)
    fresh = {n: t.clone() for n, t in target.state_dict().items()}
    left = target.warm_start_from(tmp_path)
    assert not [name for name in left if name.startswith("aspect_prediction.")]
    for aspect in ASPECTS:
        learnt = madral.aspect_prediction.tables[aspect].weight
        source_rows = dict(zip(VOCABULARY.values(aspect).values, learnt, strict=True))
        for row, value in enumerate(reordered.values(aspect).values):
            weight = target.aspect_prediction.tables[aspect].weight[row]
            expected = source_rows.get(value, fresh[f"aspect_prediction.tables.{aspect}.weight"][row])
            assert torch.equal(weight, expected), (aspect, value)


def test_annotations_below_min_confidence_are_absent_but_keep_their_confidence() -> None:
    from model.abstention import AbstentionRule
    from model.annotations import annotate
    from model.batch import EncoderOutput

    encoder, _ = new_encoder(
        "madral", pretrained=False, backbone=tiny_backbone(), vocabulary=VOCABULARY, projection_dim=8
    )
    # brand logits: row 0 is sure of class 1 (P = e^4 / (e^4 + 2) = 0.9647), row 1 is uniform (1/3).
    brand = torch.tensor([[0.0, 4.0, 0.0], [0.0, 0.0, 0.0]])
    output = EncoderOutput(embedding=torch.zeros(2, 8), aspect_logits={"brand": brand})
    rows = annotate(encoder, output, AbstentionRule(0.5))
    # Written as the catalog spells the value most often ("Breville"), not as normalised ("breville").
    names = VOCABULARY.values("brand").spellings
    assert names[1] != VOCABULARY.values("brand").values[1]
    assert rows[0].aspect_values == {"brand": names[1]}
    assert rows[0].aspect_confidences["brand"] == pytest.approx(math.exp(4) / (math.exp(4) + 2), abs=1e-6)
    assert rows[1].aspect_values == {}  # absent: below 0.5
    assert rows[1].aspect_confidences["brand"] == pytest.approx(1 / 3, abs=1e-6)
    assert annotate(encoder, output)[1].aspect_values == {"brand": names[0]}  # default: every prediction
    with pytest.raises(ValueError, match="min_confidence must be in"):
        AbstentionRule(1.5)


def test_a_stated_aspect_abstains_when_the_text_does_not_name_the_value() -> None:
    """An unknown brand is not put on a known one: the value is written only when the text names it."""
    from model.abstention import AbstentionRule
    from model.annotations import annotate
    from model.batch import EncoderOutput

    encoder, _ = new_encoder(
        "madral", pretrained=False, backbone=tiny_backbone(), vocabulary=VOCABULARY, projection_dim=8
    )
    spelled = VOCABULARY.values("brand").spellings[1]  # "Breville"
    # Every row is sure of class 1 (P 0.96); only the first two texts name it (case and accents aside).
    brand = torch.tensor([[0.0, 4.0, 0.0]] * 4)
    output = EncoderOutput(embedding=torch.zeros(4, 8), aspect_logits={"brand": brand})
    texts = [
        f"{spelled.upper()} Barista Express, brushed steel",
        f"Espresso machine by {spelled.lower()}.",
        "Fellow Stagg EKG kettle",  # a brand the model does not know
        f"{spelled}x Toaster",  # the name only as part of another word
    ]
    rows = annotate(encoder, output, AbstentionRule(0.5), texts)
    assert [row.aspect_values for row in rows] == [{"brand": spelled}] * 2 + [{}, {}]
    assert all(row.aspect_confidences["brand"] > 0.9 for row in rows)  # reported either way
    trusting = annotate(encoder, output, AbstentionRule(0.5, stated_aspects=()), texts)
    assert all(row.aspect_values == {"brand": spelled} for row in trusting)
    with pytest.raises(ValueError, match="4 texts for 2"):
        annotate(
            encoder,
            EncoderOutput(embedding=torch.zeros(2, 8), aspect_logits={"brand": brand[:2]}),
            AbstentionRule(),
            texts,
        )


@pytest.mark.parametrize(
    ("text", "value", "stated"),
    [
        ("WÜSTHOF Classic Ikon 20 cm", "Wüsthof", True),
        ("Wusthof chef's knife", "Wüsthof", True),
        ("Fitted sheet, light grey", "Light Grey", True),
        ("Fitted sheet, grey", "Light Grey", False),
        ("Black Decker drill", "lack", False),
        ("Bettlaken weiß", "Weiss", True),
        ("anything", "  ", False),
    ],
)
def test_states_value_matches_whole_words_case_and_accents_aside(text: str, value: str, stated: bool) -> None:
    from model.abstention import folded_words, states_value

    assert states_value(folded_words(text), value) is stated


def test_top1_accuracy_of_a_batch_counts_labelled_pairs_only() -> None:
    from model.aspects.labels import AspectLabels

    labels = AspectLabels.from_annotations(
        [{"brand": ["Nike"], "color": ["White"]}, {"brand": ["Adidas", "Breville"]}, None],
        VOCABULARY,
        ("brand", "color"),
    )
    nike, breville = (VOCABULARY.values("brand").id_of(v) for v in ("nike", "breville"))
    brand = torch.full((3, 3), -5.0)
    brand[0, nike] = 5.0  # hit
    brand[1, breville] = 5.0  # hit: one of the record's two brands
    color = torch.zeros(3, 3)
    color[0, (VOCABULARY.values("color").id_of("white") + 1) % 3] = 5.0  # miss
    # Labelled pairs: (0, brand), (1, brand), (0, color); record 2 is unannotated.
    assert labels.top1_accuracy({"brand": brand, "color": color}) == pytest.approx(2 / 3)
    assert labels.top1_accuracy({}) is None


@pytest.mark.parametrize(
    ("text", "folded"),
    [
        ("Café Crème 2-Pack", " cafe creme 2 pack "),  # non-ASCII: accents dropped through NFKD
        ("Stainless STEEL, 1.5 L", " stainless steel 1 5 l "),  # ASCII: the fast path, same rule
        ("ﬁt Straße", " fit strasse "),  # a ligature and ß: casefold and NFKD both apply
    ],
)
def test_folded_words_casefolds_and_drops_accents_on_either_path(text: str, folded: str) -> None:
    from model.abstention import folded_words

    assert folded_words(text) == folded
