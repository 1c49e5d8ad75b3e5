"""UHD-BERT trains as its paper says: the hinge loss of Eq. 8, the paper's buckets, fixed weight sparsity.

Tiny random BERTs (2 layers, 32 wide) and n = 256; the loss values are worked out by hand.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from model.backbone import backbone_config_dict, bundled_backbone_path, load_tokenizer
from model.batch import Side
from model.training import QueryExamples, TrainingConfig
from model.training.trainer import Trainer, validation_batches
from model.uhd import UhdConfig, UhdEncoder, UhdOutput, in_batch_hinge_loss, paper_bucket_layers
from tests.conftest import tiny_backbone

QUERIES = ["red running shoes", "oak dining table", "steel kettle"]
POSITIVES = ["nike red running shoe size 10", "solid oak dining table for six", "stainless steel kettle"]
NEGATIVES = ["blue rain jacket", "pine bookshelf", "ceramic teapot"]


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer()


def make_encoder(**settings: object) -> UhdEncoder:
    torch.manual_seed(0)
    return UhdEncoder(UhdConfig(backbone=tiny_backbone(), dimensions=256, winners=8, **settings)).eval()


def _buckets(rows: list[list[list[float]]]) -> UhdOutput:
    buckets = torch.tensor(rows)
    return UhdOutput(embedding=buckets.flatten(1) / buckets.shape[1] ** 0.5, buckets=buckets)


def test_retrieval_loss_is_eq_8_with_hard_negatives_by_hand() -> None:
    # Two buckets of n = 3. Rel = Σ_j B_q^j · B_d^j (Eq. 7), worked out per pair:
    queries = _buckets([[[0.6, 0.8, 0.0], [1.0, 0.0, 0.0]], [[0.0, 0.0, 1.0], [0.0, 0.6, 0.8]]])
    documents = _buckets(
        [
            [[0.6, 0.8, 0.0], [0.8, 0.6, 0.0]],  # q0's positive: Rel(q0) = 1.0 + 0.8 = 1.8, Rel(q1) = 0.36
            [[0.0, 0.6, 0.8], [0.0, 0.6, 0.8]],  # q1's positive: Rel(q0) = 0.48, Rel(q1) = 0.8 + 1.0 = 1.8
            [[0.8, 0.0, 0.6], [0.6, 0.0, 0.8]],  # hard negative: Rel(q0) = 0.48 + 0.6, Rel(q1) = 0.6 + 0.64
        ]
    )
    # q0: max(0, 1 - 1.8 + 0.48) + max(0, 1 - 1.8 + 1.08) = 0 + 0.28
    # q1: max(0, 1 - 1.8 + 0.36) + max(0, 1 - 1.8 + 1.24) = 0 + 0.44; the mean over queries is 0.36.
    loss = make_encoder().retrieval_loss(queries, documents, positives=2)
    assert loss.item() == pytest.approx(0.36, abs=1e-6)
    # Without the hard negative only in-batch negatives remain, and each of them is past the margin.
    assert make_encoder().retrieval_loss(queries, _buckets_of(documents, 2), positives=2).item() == 0.0


def _buckets_of(output: UhdOutput, count: int) -> UhdOutput:
    assert output.buckets is not None
    return UhdOutput(embedding=output.embedding[:count], buckets=output.buckets[:count])


def test_hinge_loss_refuses_fewer_documents_than_queries() -> None:
    with pytest.raises(ValueError, match="positive column per query"):
        in_batch_hinge_loss(torch.zeros(3, 2))


def test_the_trainer_optimises_the_hinge_loss_not_softmax(tokenizer, tmp_path: Path) -> None:
    encoder = make_encoder(bucket_layers=(1, 2))
    examples = [
        QueryExamples(query=q, positives=(p,), hard_negatives=(n,))
        for q, p, n in zip(QUERIES, POSITIVES, NEGATIVES, strict=True)
    ]
    (batch,) = validation_batches(examples, batch_size=3)
    config = TrainingConfig(pointwise_loss_weight=0.0, device="cpu", show_progress=False)
    with torch.no_grad():
        loss = Trainer(encoder, tokenizer, config, tmp_path).batch_loss(batch).item()
        queries = encoder(encoder.tokenize(tokenizer, QUERIES, Side.QUERY), Side.QUERY)
        documents = encoder(encoder.tokenize(tokenizer, POSITIVES + NEGATIVES, Side.DOCUMENT), Side.DOCUMENT)
    assert queries.buckets is not None and documents.buckets is not None
    # Eq. 7 then Eq. 8 written out: document i is query i's positive, the other five its negatives.
    rel = [
        [sum(float(queries.buckets[i, j] @ documents.buckets[d, j]) for j in range(2)) for d in range(6)]
        for i in range(3)
    ]
    by_hand = sum(max(0.0, 1 - rel[i][i] + rel[i][d]) for i in range(3) for d in range(6) if d != i) / 3
    assert loss == pytest.approx(by_hand, rel=1e-5)
    # Rel is `buckets` times the embedding's dot product, so the loss is not the softmax one in disguise.
    dots = queries.embedding @ documents.embedding.T
    torch.testing.assert_close(dots * 2, torch.tensor(rel))
    softmax = super(UhdEncoder, encoder).retrieval_loss(queries, documents, 3).item()
    assert softmax != pytest.approx(loss, rel=1e-3)


def test_defaults_are_the_papers() -> None:
    assert paper_bucket_layers(12) == (2, 4, 6, 8, 10, 12)  # §4.2 on BERT-base
    assert paper_bucket_layers(6) == (1, 2, 3, 4, 5, 6)
    assert paper_bucket_layers(2) == (1, 2) and paper_bucket_layers(1) == (1,)
    config = UhdConfig(backbone=backbone_config_dict(bundled_backbone_path()))  # the 6-layer MiniLM
    assert config.bucket_layers == (1, 2, 3, 4, 5, 6)
    assert (config.dimensions, config.winners, config.weight_sparsity) == (81_920, 80, 0.7)  # A.1
    assert config.projection_dim == 6 * 81_920  # "close to half a million" dimensions (footnote 1)
    assert UhdConfig(backbone=tiny_backbone(), dimensions=64, winners=2).bucket_layers == (1, 2)
    assert UhdConfig(
        backbone=tiny_backbone(), dimensions=64, winners=2, bucket_layers=(2,)
    ).bucket_layers == (2,)


def test_masked_weights_are_zero_and_stay_zero_through_training(tokenizer, tmp_path: Path) -> None:
    encoder = make_encoder()
    layers = [layer for towers in encoder.wta_layers.values() for layer in towers]
    assert len(layers) == 2  # the default buckets of a 2-layer backbone
    hidden = encoder.config.hidden_size
    kept = hidden - round(0.7 * hidden)
    before = []
    for layer in layers:
        assert (layer.weight_mask.sum(dim=1) == kept).all()
        assert (layer.linear.weight[~layer.weight_mask] == 0).all()
        before.append(layer.linear.weight.detach().clone())
    # The real loop (its optimiser, weight decay, clipping, schedule), with a rate large enough that
    # every step moves the weights it reaches.
    examples = [
        QueryExamples(query=q, positives=(p,), hard_negatives=(n,))
        for q, p, n in zip(QUERIES * 2, POSITIVES * 2, NEGATIVES[::-1] * 2, strict=True)
    ]
    config = TrainingConfig(
        batch_size=3, learning_rate=1e-2, warmup_fraction=0.0, pointwise_loss_weight=0.0,
        device="cpu", show_progress=False,
    )  # fmt: skip
    report = Trainer(encoder, tokenizer, config, tmp_path / "model").fit(examples)
    assert report.steps == 2 and report.final_train_loss > 0
    for layer, old in zip(layers, before, strict=True):
        weight = layer.linear.weight.detach()
        assert (weight[~layer.weight_mask] == 0).all()
        assert (weight[layer.weight_mask] != old[layer.weight_mask]).any()
