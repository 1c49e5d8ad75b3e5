"""The ranking task and aspect Accuracy@1 of `madr experiment`, on cases with known answers."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from model import Side, new_encoder
from model.aspects.vocabulary import AspectVocabulary
from pipelines.evaluation import RelevanceRule
from pipelines.judged_ranking import aspect_accuracy, rerank_judged
from tests.conftest import tiny_backbone


def test_rerank_orders_judged_products_by_score() -> None:
    query = {"q": np.array([1.0, 0.0])}
    products = {"a": np.array([0.9, 0.1]), "b": np.array([0.1, 0.9]), "c": np.array([0.5, 0.5])}
    perfect = rerank_judged(query, products, {"q": {"a": 3, "c": 1, "b": 0}}, RelevanceRule())
    assert perfect == [{"query_id": "q", "ndcg@5": 1.0, "ndcg@10": 1.0, "ndcg@50": 1.0, "auc": 1.0}]
    inverted = rerank_judged(query, products, {"q": {"b": 3, "c": 1, "a": 0}}, RelevanceRule())[0]
    assert inverted["auc"] == 0.0 and inverted["ndcg@5"] < 0.6


def test_aspect_accuracy_counts_top1_in_the_annotations() -> None:
    records = [
        {"category": ["Socks"], "brand": ["Nike"], "color": ["Red"]},
        {"category": ["Lamps"], "brand": ["Acme"], "color": ["Blue"]},
    ]
    vocabulary = AspectVocabulary.from_records(records, ("category", "brand", "color"))
    encoder, tokenizer = new_encoder(
        "madral", pretrained=False, backbone=tiny_backbone(), vocabulary=vocabulary
    )
    socks = vocabulary.values("category").id_of("socks")
    with torch.no_grad():  # force every prediction of category to "socks"
        encoder.aspect_prediction.tables["category"].bias[socks] = 100.0
    result = aspect_accuracy(
        encoder,
        tokenizer,
        ["a", "b", "c"],
        [{"category": ["Socks"]}, {"category": ["Lamps"]}, None],
        Side.DOCUMENT,
    )
    assert result.accuracy["category"] == pytest.approx(0.5) and result.counts == {"category": 2}
