"""Aspect vocabularies, their label tensors, and the Beam transform that builds them."""

from __future__ import annotations

import json

import apache_beam as beam
import pytest
import torch
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from model.aspects import IGNORE_INDEX, UNSEEN, AspectLabels, AspectValues, AspectVocabulary, Granularity
from model.backbone import load_tokenizer
from pipelines.train.vocabulary import BuildAspectVocabulary

ASPECTS = ("category", "brand", "color")

RECORDS = [
    {"product_id": "p1", "aspects": {"category": ["Socks"], "brand": ["Nike"], "color": ["White"]}},
    {"product_id": "p2", "aspects": {"category": ["Socks", "Sportswear"], "brand": ["NIKE"]}},
    {"product_id": "p3", "aspects": {"category": ["Juicers"], "brand": ["Breville"]}},
    {"product_id": "p4", "aspects": {"category": ["Socks"], "brand": ["Adidas"], "color": ["white"]}},
    {"product_id": "p5", "aspects": {}},
]


def test_values_are_ordered_by_count_then_name_and_filtered_by_min_count() -> None:
    vocabulary = AspectVocabulary.from_records((r["aspects"] for r in RECORDS), ASPECTS, min_count=2)
    # socks: p1, p2, p4 = 3; sportswear and juicers once each -> dropped at min_count 2.
    assert vocabulary.values("category") == AspectValues(("socks",), (3,), ("Socks",))
    # "Nike" and "NIKE" are one value; spelled once each, the tie goes to the one that sorts first.
    assert vocabulary.values("brand") == AspectValues(("nike",), (2,), ("NIKE",))
    assert vocabulary.values("color") == AspectValues(("white",), (2,), ("White",))
    everything = AspectVocabulary.from_records((r["aspects"] for r in RECORDS), ASPECTS)
    assert everything.values("category").values == ("socks", "juicers", "sportswear")
    assert everything.values("brand").values == ("nike", "adidas", "breville")
    assert everything.sizes() == {"category": 3, "brand": 3, "color": 1}
    assert everything.sizes(("color", "brand")) == {"color": 1, "brand": 3}


def test_encode_maps_unseen_values_to_the_ignored_id_and_empty_to_nothing() -> None:
    vocabulary = AspectVocabulary.from_records((r["aspects"] for r in RECORDS), ASPECTS)
    assert vocabulary.encode("category", ["Juicers", "  SOCKS "]) == [1, 0]
    assert vocabulary.encode("brand", ["Puma", "Nike", "nike"]) == [UNSEEN, 0]
    assert UNSEEN == IGNORE_INDEX == -100
    assert vocabulary.encode("color", []) == []
    assert vocabulary.decode("brand", [2, 0]) == ["breville", "nike"]
    with pytest.raises(KeyError, match="no aspect 'size'"):
        vocabulary.encode("size", ["XL"])


def test_word_and_token_granularities_split_values() -> None:
    annotations = [{"category": ["Kitchen & Dining"]}, {"category": ["Dining Chairs"]}]
    words = AspectVocabulary.from_records(annotations, ("category",), granularity=Granularity.WORD)
    assert words.values("category") == AspectValues(("dining", "chairs", "kitchen"), (2, 1, 1))
    assert words.encode("category", ["Dining room"]) == [0, UNSEEN]

    tokenize = load_tokenizer().tokenize
    tokens = AspectVocabulary.from_records(
        [{"brand": ["Breville"]}], ("brand",), granularity=Granularity.TOKEN, tokenize=tokenize
    )
    # A rare brand is several wordpieces; equal counts sort alphabetically.
    assert tokens.values("brand").values == tuple(sorted(tokenize("breville"))) == ("##eville", "br")
    with pytest.raises(ValueError, match="tokenize function"):
        tokens.encode("brand", ["Breville"])


def test_save_and_load_round_trip(tmp_path) -> None:
    vocabulary = AspectVocabulary.from_records(
        (r["aspects"] for r in RECORDS), ASPECTS, min_count=1, granularity=Granularity.WORD
    )
    path = vocabulary.save(tmp_path)
    assert path.name == "aspect_vocabulary.json"
    assert AspectVocabulary.load(tmp_path) == vocabulary
    assert AspectVocabulary.load(path).granularity is Granularity.WORD
    data = json.loads(path.read_text())
    assert data["aspects"]["brand"] == {"values": ["nike", "adidas", "breville"], "counts": [2, 1, 1]}
    path.write_text(json.dumps({**data, "format": "something-else"}))
    with pytest.raises(ValueError, match="not a madr-aspect-vocabulary"):
        AspectVocabulary.load(path)


def test_labels_pad_mask_unseen_values_and_mark_presence() -> None:
    vocabulary = AspectVocabulary.from_records((r["aspects"] for r in RECORDS), ASPECTS)
    labels = AspectLabels.from_annotations(
        [
            {"category": ["Socks", "Juicers"], "brand": ["Puma"]},  # Puma is unseen but present
            {},  # annotated, nothing applies: absent
            None,  # not annotated at all: unknown
        ],
        vocabulary,
        ASPECTS,
    )
    assert labels.aspects == ASPECTS
    assert labels.values["category"].tolist() == [[0, 1], [-100, -100], [-100, -100]]
    assert labels.values["brand"].tolist() == [[-100], [-100], [-100]]
    assert labels.values["color"].tolist() == [[-100], [-100], [-100]]
    assert labels.presence.tolist() == [[1, 1, 0], [0, 0, 0], [-100, -100, -100]]
    assert labels.presence.dtype == torch.long


def _vocabulary_of(records: list[dict], **kwargs) -> AspectVocabulary:
    return AspectVocabulary.from_records((r.get("aspects") or {} for r in records), **kwargs)


def test_beam_transform_counts_records_and_filters(local_runner) -> None:
    expected = AspectVocabulary.from_counts(
        {"category": {"socks": 3}, "brand": {"nike": 2}, "color": {"white": 2}},
        min_count=2,
        spellings={"category": {"socks": "Socks"}, "brand": {"nike": "NIKE"}, "color": {"white": "White"}},
    )
    assert expected == _vocabulary_of(RECORDS, aspects=ASPECTS, min_count=2)
    with TestPipeline(runner=local_runner) as pipeline:
        vocabulary = (
            pipeline
            | beam.Create(RECORDS)
            | BuildAspectVocabulary(ASPECTS, min_count=2, granularity="phrase")
        )
        assert_that(vocabulary, equal_to([expected]))


def test_beam_transform_word_granularity_and_missing_aspects(local_runner) -> None:
    records = [*RECORDS, {"product_id": "p6", "aspects": {"category": ["Kitchen & Dining"]}}]
    expected = _vocabulary_of(records, aspects=("category", "material"), granularity=Granularity.WORD)
    assert expected.values("category").values[0] == "socks"
    assert expected.sizes() == {"category": 5, "material": 0}  # an aspect nobody annotates stays, empty
    with TestPipeline(runner=local_runner) as pipeline:
        vocabulary = (
            pipeline
            | beam.Create(records)
            | BuildAspectVocabulary(("category", "material"), granularity=Granularity.WORD)
        )
        assert_that(vocabulary, equal_to([expected]))


def test_beam_transform_rejects_bad_settings() -> None:
    with pytest.raises(ValueError, match="min_count must be >= 1"):
        BuildAspectVocabulary(ASPECTS, min_count=0)
    with pytest.raises(ValueError, match="at least one aspect"):
        BuildAspectVocabulary(())


def test_predictions_are_spelled_as_the_catalog_spells_them_most_often(tmp_path) -> None:
    records = [
        {"brand": ["Wüsthof"]},
        {"brand": ["wüsthof"]},
        {"brand": ["Wüsthof"]},
        {"brand": ["  Le   Creuset "]},
        {"brand": ["LE CREUSET", "le creuset"]},  # one record: its first spelling counts, once
    ]
    vocabulary = AspectVocabulary.from_records(records, ("brand",))
    table = vocabulary.values("brand")
    assert table.values == ("wüsthof", "le creuset") and table.counts == (3, 2)
    assert [vocabulary.spell("brand", i) for i in range(2)] == ["Wüsthof", "LE CREUSET"]
    loaded = AspectVocabulary.load(vocabulary.save(tmp_path / "v.json"))
    assert loaded == vocabulary and loaded.spell("brand", 0) == "Wüsthof"
    # A vocabulary saved before spellings were kept still loads, and spells values as normalised.
    old = vocabulary.to_dict()
    del old["aspects"]["brand"]["spellings"]
    assert AspectVocabulary.from_dict(old).spell("brand", 0) == "wüsthof"
    with pytest.raises(ValueError, match="must normalise to its value"):
        AspectValues(("wüsthof",), (1,), ("Zwilling",))


def test_beam_transform_keeps_the_most_frequent_spelling(local_runner) -> None:
    records = [
        {"product_id": f"p{i}", "aspects": {"brand": [spelling]}}
        for i, spelling in enumerate(["Wüsthof", "WÜSTHOF", "Wüsthof"])
    ]
    expected = _vocabulary_of(records, aspects=("brand",))
    assert expected.spell("brand", 0) == "Wüsthof"
    with TestPipeline(runner=local_runner) as pipeline:
        vocabulary = pipeline | beam.Create(records) | BuildAspectVocabulary(("brand",))
        assert_that(vocabulary, equal_to([expected]))
