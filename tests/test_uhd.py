"""UHD-BERT (uhd-bert) on tiny random BERTs and small n: WTA, pooling, buckets, binarisation."""

from __future__ import annotations

import json

import pytest
import torch

from model.backbone import load_tokenizer
from model.batch import Side
from model.sparse import (
    WinnerTakeAll,
    binarize,
    masked_max_pool,
    pooled_winners,
    to_sparse,
    winner_take_all,
)
from model.uhd import UhdConfig, UhdEncoder, UhdOutput, in_batch_hinge_loss
from tests.conftest import tiny_backbone

TEXTS = ["red nike running shoes", "kitchen knife set with a wooden block", "lamp"]


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer()


def make_encoder(**settings: object) -> UhdEncoder:
    torch.manual_seed(0)
    settings = {"dimensions": 256, "winners": 8, "bucket_layers": (1, 2), **settings}
    return UhdEncoder(UhdConfig(backbone=tiny_backbone(), **settings)).eval()


def test_wta_keeps_exactly_k_winners_and_passes_gradients_only_through_them() -> None:
    scores = torch.randn(3, 5, 50, requires_grad=True)
    sparse = winner_take_all(scores, 7)
    assert ((sparse != 0).sum(dim=-1) == 7).all()
    winners = torch.zeros_like(scores, dtype=torch.bool).scatter(-1, scores.topk(7, dim=-1).indices, True)
    assert torch.equal(sparse[winners], scores[winners])
    upstream = torch.randn_like(scores)
    (sparse * upstream).sum().backward()
    assert torch.equal(scores.grad, torch.where(winners, upstream, torch.zeros_like(upstream)))
    assert (scores.grad[~winners] == 0).all()
    with pytest.raises(ValueError, match="k must be"):
        winner_take_all(scores, 51)


def test_max_pool_ignores_padding() -> None:
    tokens = torch.tensor([[[1.0, 0.0, 2.0], [0.0, 3.0, 0.0], [9.0, 9.0, 9.0]]])
    pooled = masked_max_pool(tokens, torch.tensor([[1, 1, 0]]))
    assert pooled.tolist() == [[1.0, 3.0, 2.0]]


@pytest.mark.parametrize("shift", [0.0, -1.0, -4.0])
def test_pooled_winners_is_the_max_pool_of_the_winners(shift: float) -> None:
    # Eq. 3 then Eq. 4, composed, is the reference; a negative shift makes dimensions that every real
    # token picks pool to a negative value, and rounding makes tokens tie on a dimension.
    torch.manual_seed(2)
    scores = (torch.randn(4, 9, 40, dtype=torch.float64) + shift).round(decimals=1) + 0.05
    mask = (torch.rand(4, 9) > 0.3).long()
    mask[:, 0] = 1
    mask[3, 1:] = 0  # a text of one token: each of its winners is picked by every real token
    composed, fused = scores.clone().requires_grad_(), scores.clone().requires_grad_()
    expected = masked_max_pool(winner_take_all(composed, 6), mask)
    pooled = pooled_winners(fused, 6, mask)
    assert torch.equal(pooled, expected)
    if shift < -2:
        assert (pooled[3] < 0).any()  # the one-token text: values the clamp must leave negative
    upstream = torch.randn_like(expected)
    (expected * upstream).sum().backward()
    (pooled * upstream).sum().backward()
    torch.testing.assert_close(fused.grad, composed.grad)
    with pytest.raises(ValueError, match="k must be"):
        pooled_winners(scores, 41, mask)


def test_padding_does_not_change_a_text_bucket(tokenizer) -> None:
    encoder = make_encoder()
    alone = encoder(encoder.tokenize(tokenizer, TEXTS[2:], Side.QUERY), Side.QUERY)
    padded_batch = encoder.tokenize(tokenizer, TEXTS, Side.QUERY)
    assert padded_batch.attention_mask[2].sum() < padded_batch.attention_mask.shape[1]
    padded = encoder(padded_batch, Side.QUERY)
    torch.testing.assert_close(padded.buckets[2], alone.buckets[0])


def test_binarized_bucket_is_exactly_the_winners_of_the_real_tokens() -> None:
    torch.manual_seed(1)
    layer = WinnerTakeAll(16, 64)
    with torch.no_grad():
        layer.linear.bias.fill_(10.0)  # every score positive, so each winner survives the max-pool
    tokens, mask = torch.randn(1, 4, 16), torch.tensor([[1, 1, 1, 0]])
    per_token = binarize(layer(tokens, 3))
    winners = layer.scores(tokens).topk(3, dim=-1).indices
    for t in range(4):
        assert set(per_token[0, t].nonzero().flatten().tolist()) == set(winners[0, t].tolist())
    bucket = binarize(masked_max_pool(layer(tokens, 3), mask))
    expected = set(winners[0, :3].flatten().tolist())  # the padded token's winners stay out
    assert set(bucket[0].nonzero().flatten().tolist()) == expected
    assert set(bucket.unique().tolist()) == {0.0, 1.0}


def test_changing_k_at_inference_changes_the_non_zeros(tokenizer) -> None:
    encoder = make_encoder()
    batch = encoder.tokenize(tokenizer, TEXTS, Side.DOCUMENT)
    real_tokens = batch.attention_mask.sum(dim=1, keepdim=True)
    before = {name: p.clone() for name, p in encoder.state_dict().items()}
    counts = {}
    for k in (1, 8, 32):
        nonzeros = (encoder(batch, Side.DOCUMENT, winners=k).buckets != 0).sum(dim=-1)
        assert (nonzeros <= k * real_tokens).all() and (nonzeros >= 1).all()
        counts[k] = nonzeros
    assert (counts[1] < counts[8]).all() and (counts[8] < counts[32]).all()
    encoder.set_winners(1)
    assert torch.equal((encoder(batch, Side.DOCUMENT).buckets != 0).sum(dim=-1), counts[1])
    assert encoder.config.winners == 8
    assert all(torch.equal(p, before[name]) for name, p in encoder.state_dict().items())


def test_relevance_of_hand_made_buckets() -> None:
    """Eq. 7 on [batch, buckets, n] tensors written out: Rel(q, d) = Σ_j B_q^j · B_d^j."""
    query = UhdOutput(embedding=torch.zeros(1, 6), buckets=torch.tensor([[[0.6, 0.8, 0.0], [1.0, 0.0, 0.0]]]))
    documents = UhdOutput(
        embedding=torch.zeros(2, 6),
        buckets=torch.tensor([[[0.6, 0.8, 0.0], [0.0, 1.0, 0.0]], [[0.0, 0.0, 1.0], [0.6, 0.0, 0.8]]]),
    )
    # d0: (.36 + .64) + 0 = 1.0;  d1: 0 + .6 = 0.6.
    # Cross-bucket products (query bucket 1 · d0 bucket 2 = .8) never count.
    torch.testing.assert_close(UhdEncoder.relevance(query, documents), torch.tensor([[1.0, 0.6]]))


def test_relevance_is_the_sum_of_bucket_wise_dot_products(tokenizer) -> None:
    encoder = make_encoder(bucket_layers=(2, 1))
    queries = encoder(encoder.tokenize(tokenizer, TEXTS[:2], Side.QUERY), Side.QUERY)
    documents = encoder(encoder.tokenize(tokenizer, TEXTS, Side.DOCUMENT), Side.DOCUMENT)
    by_hand = sum(queries.buckets[:, j] @ documents.buckets[:, j].T for j in range(2))  # Eq. 7
    torch.testing.assert_close(UhdEncoder.relevance(queries, documents), by_hand)
    # The unit-length embedding ranks exactly as Eq. 7: its dot product is Rel / buckets.
    torch.testing.assert_close(queries.embedding @ documents.embedding.T, by_hand / 2)
    torch.testing.assert_close(documents.embedding.norm(dim=-1), torch.ones(3))
    sparse_q, sparse_d = UhdEncoder.sparse_buckets(queries), UhdEncoder.sparse_buckets(documents)
    assert len(sparse_q) == 2 and len(sparse_q[0]) == 2
    sparse_score = sum(sparse_q[0][j].dot(sparse_d[1][j]) for j in range(2))
    assert sparse_score == pytest.approx(by_hand[0, 1].item(), abs=1e-5)


def test_bucket_j_is_the_normalised_max_pool_of_layer_js_winners(tokenizer) -> None:
    """Eq. 4-6: B^j = L2norm(maxpool over real tokens of WTA^j(layer j's states)), in bucket_layers order."""
    encoder = make_encoder(bucket_layers=(2, 1))
    batch = encoder.tokenize(tokenizer, TEXTS, Side.QUERY)
    buckets = encoder(batch, Side.QUERY).buckets
    states = encoder.transformer(Side.QUERY)(
        input_ids=batch.input_ids, attention_mask=batch.attention_mask, output_hidden_states=True
    ).hidden_states
    wta = encoder.wta_layers["shared"]
    real = batch.attention_mask.bool()
    for position, layer in enumerate((2, 1)):
        winners = wta[position](states[layer], 8)
        for row in range(len(TEXTS)):
            pooled = winners[row][real[row]].max(dim=0).values  # padding never competes
            expected = pooled / pooled.norm()
            torch.testing.assert_close(buckets[row, position], expected)
            assert buckets[row, position].norm().item() == pytest.approx(1.0, abs=1e-6)
    # Swapping the layers' roles gives other buckets: the order is not a no-op.
    assert not torch.allclose(buckets[:, 0], buckets[:, 1])


def test_buckets_come_from_their_layers_and_the_tower_stops_at_the_deepest() -> None:
    encoder = make_encoder(bucket_layers=(1,))
    assert encoder.transformer(Side.QUERY).config.num_hidden_layers == 1
    assert encoder.config.projection_dim == 256
    two = make_encoder()
    assert two.config.projection_dim == 512 and len(two.wta_layers["shared"]) == 2
    # Empty means the paper's six evenly spread buckets: on a 2-layer backbone, both layers.
    assert make_encoder(bucket_layers=()).config.bucket_layers == (1, 2)


def test_weight_sparsity_fixes_zero_inputs_per_unit() -> None:
    layer = WinnerTakeAll(10, 20, weight_sparsity=0.7)
    assert (layer.weight_mask.sum(dim=1) == 3).all()
    layer.scores(torch.randn(4, 10)).sum().backward()
    assert (layer.linear.weight.grad[~layer.weight_mask] == 0).all()
    assert (layer.linear.weight.grad[layer.weight_mask] != 0).all()


def test_config_validation() -> None:
    with pytest.raises(ValueError, match="winners <= dimensions"):
        UhdConfig(backbone=tiny_backbone(), dimensions=4, winners=5)
    with pytest.raises(ValueError, match="bucket_layers"):
        UhdConfig(backbone=tiny_backbone(), dimensions=8, winners=2, bucket_layers=(3,))
    config = UhdConfig(
        backbone=tiny_backbone(), projection_dim=16, dimensions=64, winners=2, bucket_layers=(2,)
    )
    assert config.projection_dim == 64  # n × buckets, whatever was passed


def test_hinge_loss_matches_eq_8_by_hand() -> None:
    """Σ_negatives max(0, margin - Rel(q, d+) + Rel(q, d-)) per query, averaged over the queries."""
    scores = torch.tensor([[0.9, 0.5, 0.0], [0.2, 0.1, 0.3]])  # column 2: a hard negative
    # Query 0: max(0, 1 - .9 + .5) + max(0, 1 - .9 + 0); query 1: max(0, 1 - .1 + .2) + max(0, 1 - .1 + .3).
    expected = ((0.6 + 0.1) + (1.1 + 1.2)) / 2
    assert in_batch_hinge_loss(scores).item() == pytest.approx(expected)


def test_hinge_loss_clamps_satisfied_margins_and_honours_the_margin_by_hand() -> None:
    scores = torch.tensor([[2.0, 0.5, 1.5], [0.0, 0.3, 0.1], [-1.0, 0.2, 3.0]], requires_grad=True)
    # Query 0 (d+ = 2.0): 1 - 2 + 0.5 = -0.5 -> 0;  1 - 2 + 1.5 = 0.5.          Sum 0.5
    # Query 1 (d+ = 0.3): 1 - 0.3 + 0 = 0.7;         1 - 0.3 + 0.1 = 0.8.        Sum 1.5
    # Query 2 (d+ = 3.0): 1 - 3 - 1 = -3 -> 0;       1 - 3 + 0.2 = -1.8 -> 0.   Sum 0
    # (Without the clamp the mean would be (0 + 1.5 - 4.8) / 3 = -1.1.)
    loss = in_batch_hinge_loss(scores)
    assert loss.item() == pytest.approx((0.5 + 1.5 + 0.0) / 3)
    loss.backward()
    # Each active term adds +1/3 to its negative and -1/3 to its positive; clamped terms add nothing.
    expected_grad = torch.tensor([[-1.0, 0.0, 1.0], [1.0, -2.0, 1.0], [0.0, 0.0, 0.0]]) / 3
    torch.testing.assert_close(scores.grad, expected_grad)
    # Margin 0.5: query 0: max(0, -1) + max(0, 0) = 0; query 1: 0.2 + 0.3 = 0.5; query 2: 0.
    assert in_batch_hinge_loss(scores, margin=0.5).item() == pytest.approx(0.5 / 3)


def test_to_sparse_keeps_only_non_zeros() -> None:
    vectors = torch.tensor([[0.0, 2.0, 0.0, -1.0], [0.0, 0.0, 0.0, 0.5]])
    rows = to_sparse(vectors)
    assert rows[0].indices.tolist() == [1, 3] and rows[0].values.tolist() == [2.0, -1.0]
    assert rows[1].binarized().values.tolist() == [1.0]


@pytest.mark.parametrize("shared_towers", [True, False])
def test_save_then_load_gives_identical_outputs(tmp_path, tokenizer, shared_towers: bool) -> None:
    encoder = make_encoder(shared_towers=shared_towers, weight_sparsity=0.5)
    encoder.save_pretrained(tmp_path, tokenizer)
    data = json.loads((tmp_path / "config.json").read_text())
    assert data["variant"] == "uhd" and data["projection_dim"] == 512
    torch.manual_seed(123)  # a different random init, including a different weight mask
    loaded = UhdEncoder.from_config_dict(data)
    loaded.load_weights(tmp_path)
    loaded.eval()
    assert loaded.config == encoder.config
    for side in Side:
        expected = encoder.embed_texts(tokenizer, TEXTS, side)
        actual = loaded.embed_texts(tokenizer, TEXTS, side)
        torch.testing.assert_close(actual.embedding, expected.embedding)
        torch.testing.assert_close(actual.buckets, expected.buckets)
