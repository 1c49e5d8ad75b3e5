"""Every training loss against a value worked out by hand on tiny tensors (issue 10).

Each expected value is written out with plain `math` (log, exp), the arithmetic in
the comments, never by calling the torch function the loss itself uses. Probabilities
are chosen as small fractions (logits ln 2, ln 3, ...) so the hand values stay exact.

- madral-kdd22: L_AP (Eq. 3), L_APP (Eq. 6), their sum over aspects (Eq. 7, the λ term
  of Eq. 8), L_CE (§7.1) and L_SCE (Eq. 8);
- mural-wsdm24: the group-wise contrastive loss (Eq. 2) and its grouping (Eq. 3-5);
- the MLM loss (madral-kdd22 Eq. 7, mural-wsdm24 Eq. 8) over the masked positions.

UHD-BERT's hinge loss (uhd-bert Eq. 8) is checked by hand in tests/test_uhd.py.
"""

from __future__ import annotations

import math

import pytest
import torch
from transformers import BertConfig

from model.aspects import (
    IGNORE_INDEX,
    aspect_learning_loss,
    aspect_prediction_loss,
    aspect_presence_loss,
    pointwise_relevance_loss,
)
from model.aspects.labels import AspectLabels
from model.mlm import MlmHead, masked_lm_loss
from model.mural_aspects import Grouping, aspect_groups, group_contrastive_loss
from model.mural_aspects import aspect_learning_loss as mural_aspect_learning_loss
from model.training import in_batch_softmax_loss

LN2, LN3, LN5 = math.log(2.0), math.log(3.0), math.log(5.0)
X = IGNORE_INDEX


def close(actual: torch.Tensor, expected: float) -> None:
    assert actual.item() == pytest.approx(expected, rel=1e-6, abs=1e-7)


# --- madral-kdd22 Eq. 3: aspect prediction ------------------------------------------------


def test_aspect_prediction_loss_by_hand_with_padding_unseen_values_and_an_unlabelled_record() -> None:
    logits = torch.tensor([[0.0, LN2, LN5], [LN3, 0.0, 0.0], [10.0, -3.0, 7.0]], requires_grad=True)
    # X first in record 0: gathering its clamped id 0 without the mask would add -log(1/8).
    targets = torch.tensor([[X, 1, 2], [0, X, X], [X, X, X]])
    # Record 0: P = (1, 2, 5) / 8; A = {1, 2}: -(log 2/8 + log 5/8) / 2 = (log 4 + log 8/5) / 2.
    record0 = (math.log(4.0) + math.log(8 / 5)) / 2  # 0.9281
    # Record 1: P = (3, 1, 1) / 5; A = {0}: -log 3/5 (the two X are not in |A|).
    record1 = math.log(5 / 3)  # 0.5108
    # Record 2: no known annotation, so it is not in the batch mean at all.
    expected = (record0 + record1) / 2  # 0.7195, whereas a flat mean over the 3 annotations is 0.7890
    loss = aspect_prediction_loss(logits, targets)
    close(loss, expected)
    loss.backward()
    # d/dz of record r's loss is P - mean of its one-hots, then / 2 (two labelled records):
    # record 0: ((1/8, 2/8, 5/8) - (0, 1/2, 1/2)) / 2 = (1/16, -1/8, 1/16);
    # record 1: ((3/5, 1/5, 1/5) - (1, 0, 0)) / 2 = (-1/5, 1/10, 1/10); record 2: 0.
    expected_grad = torch.tensor([[1 / 16, -1 / 8, 1 / 16], [-1 / 5, 1 / 10, 1 / 10], [0.0, 0.0, 0.0]])
    torch.testing.assert_close(logits.grad, expected_grad)


def test_aspect_prediction_loss_of_a_batch_without_known_values_is_zero() -> None:
    logits = torch.tensor([[1.0, 2.0], [3.0, -1.0]], requires_grad=True)
    loss = aspect_prediction_loss(logits, torch.tensor([[X], [X]]))
    loss.backward()
    assert loss.item() == 0.0 and torch.equal(logits.grad, torch.zeros(2, 2))


# --- madral-kdd22 Eq. 6: aspect presence prediction ---------------------------------------


def test_aspect_presence_loss_by_hand_and_unknown_records_are_left_out() -> None:
    logits = torch.tensor([LN3, LN3, 0.0, 5.0], requires_grad=True)
    targets = torch.tensor([1, 0, 0, X])
    # σ(ln 3) = 3/4 and σ(0) = 1/2.
    # y=1, P=3/4: -log 3/4 = log 4/3;  y=0, P=3/4: -log(1 - 3/4) = log 4;  y=0, P=1/2: log 2.
    # The 4th is unknown: not "absent" (that would add log(1 + e^5) = 5.0067).
    expected = (math.log(4 / 3) + math.log(4.0) + LN2) / 3  # 0.7893
    loss = aspect_presence_loss(logits, targets)
    close(loss, expected)
    loss.backward()
    # d/dz = (σ(z) - y) / 3 known labels: (3/4 - 1, 3/4, 1/2) / 3, and 0 for the unknown one.
    torch.testing.assert_close(logits.grad, torch.tensor([-1 / 12, 1 / 4, 1 / 6, 0.0]))


# --- madral-kdd22 Eq. 7 (and the λ term of Eq. 8): the sum over the explicit aspects -------


def _two_aspect_case() -> tuple[dict[str, torch.Tensor], torch.Tensor, AspectLabels]:
    logits = {
        "category": torch.tensor([[0.0, LN2, LN5], [LN3, 0.0, 0.0]]),
        "color": torch.tensor([[0.0, 0.0], [LN3, 0.0]]),
    }
    labels = AspectLabels(
        {"category": torch.tensor([[2, X], [X, X]]), "color": torch.tensor([[X], [0]])},
        torch.tensor([[1, 0], [0, 1]]),  # record 0 has a category only, record 1 a color only
    )
    presence = torch.tensor([[LN3, 0.0], [0.0, LN3]])  # columns in labels.aspects order
    return logits, presence, labels


def test_aspect_learning_loss_is_the_sum_over_aspects_of_ap_and_app_by_hand() -> None:
    logits, presence, labels = _two_aspect_case()
    # AP category: record 0 alone, P = (1, 2, 5) / 8, A = {2}: log 8/5.
    # AP color: record 1 alone, P = (3, 1) / 4, A = {0}: log 4/3.
    ap = math.log(8 / 5) + math.log(4 / 3)  # 0.7577
    # APP category: y = (1, 0) at z = (ln 3, 0): (log 4/3 + log 2) / 2.
    # APP color:    y = (0, 1) at z = (0, ln 3): (log 2 + log 4/3) / 2.
    app = (math.log(4 / 3) + LN2) / 2 + (LN2 + math.log(4 / 3)) / 2  # 0.9808
    close(aspect_learning_loss(logits, presence, labels), ap + app)
    close(aspect_learning_loss(logits, None, labels, presence=False), ap)
    close(aspect_learning_loss(logits, presence, labels, prediction=False), app)
    # Swapped columns pair category's labels with color's logits: category y = (1, 0) at z = (0, ln 3)
    # gives (log 2 + log 4) / 2, color y = (0, 1) at z = (ln 3, 0) the same; together log 8, not 0.9808.
    close(aspect_learning_loss(logits, presence.flip(1), labels, prediction=False), math.log(8.0))


def test_aspect_learning_loss_refuses_missing_heads_or_logits() -> None:
    logits, presence, labels = _two_aspect_case()
    with pytest.raises(ValueError, match="no prediction head"):
        aspect_learning_loss({"category": logits["category"]}, presence, labels)
    with pytest.raises(ValueError, match="needs presence logits"):
        aspect_learning_loss(logits, None, labels)
    with pytest.raises(ValueError, match="neither prediction nor presence"):
        aspect_learning_loss(logits, presence, labels, prediction=False, presence=False)


# --- madral-kdd22 §7.1 L_CE and Eq. 8 L_SCE -----------------------------------------------


def test_pointwise_relevance_loss_by_hand_with_temperature_and_bias() -> None:
    queries = torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    documents = torch.tensor([[0.6, 0.8], [0.0, 1.0], [0.6, 0.8]])
    relevant = torch.tensor([1, 0, 0])
    # cos = (0.6, 0, 0.8); τ = 0.5, bias -1: z = (0.2, -1, 0.6).
    # Relevant: -log σ(z) = log(1 + e^-z); not relevant: -log(1 - σ(z)) = log(1 + e^z).
    expected = (math.log(1 + math.exp(-0.2)) + math.log(1 + math.exp(-1.0)) + math.log(1 + math.exp(0.6))) / 3
    close(pointwise_relevance_loss(queries, documents, relevant, 0.5, bias=-1.0), expected)  # 0.6496
    # No bias: z = (1.2, 0, 1.6).
    no_bias = (math.log(1 + math.exp(-1.2)) + LN2 + math.log(1 + math.exp(1.6))) / 3  # 0.9134
    close(pointwise_relevance_loss(queries, documents, relevant, 0.5), no_bias)
    with pytest.raises(ValueError, match="same pairs"):
        pointwise_relevance_loss(queries, documents[:2], relevant, 0.5)


def test_in_batch_softmax_loss_by_hand_with_a_hard_negative() -> None:
    queries = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    positives = torch.tensor([[0.6, 0.8], [0.0, 1.0]])
    negatives = torch.tensor([[-1.0, 0.0]])
    # Query 0 vs (pos 0, pos 1, neg 0): cos (0.6, 0, -1), / τ=0.5: (1.2, 0, -2), target pos 0.
    query0 = -1.2 + math.log(math.exp(1.2) + 1 + math.exp(-2.0))
    # Query 1: cos (0.8, 1, 0) -> (1.6, 2, 0), target pos 1.
    query1 = -2.0 + math.log(math.exp(1.6) + math.exp(2.0) + 1)
    close(in_batch_softmax_loss(queries, positives, negatives, 0.5), (query0 + query1) / 2)  # 0.4425
    # Without the hard negative the last column goes: (1.2, 0) and (1.6, 2).
    without = (-1.2 + math.log(math.exp(1.2) + 1) + -2.0 + math.log(math.exp(1.6) + math.exp(2.0))) / 2
    close(in_batch_softmax_loss(queries, positives, None, 0.5), without)  # 0.3881


# --- mural-wsdm24 Eq. 2: group-wise contrastive aspect loss --------------------------------


def test_group_contrastive_loss_by_hand_uses_dot_products_and_skips_rows_without_positives() -> None:
    encodings = torch.tensor([[LN2, 0.0], [0.0, 0.0], [1.0, 1.0]])
    values = torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]])
    positives = torch.tensor([[True, True, False], [False, False, True], [False, False, False]])
    # Row 0: h·e = (ln 2, 0, 0), P = (2, 1, 1) / 4; A = {0, 1}: (log 2 + log 4) / 2 = 1.5 log 2.
    #   (A cosine would score (1, 0, 0) instead; the zero value has no cosine at all.)
    # Row 1: h·e = (0, 0, 0), P = 1/3 each; A = {2}: log 3.
    # Row 2: no positives: 0, for the caller to leave out.
    expected = torch.tensor([1.5 * LN2, LN3, 0.0])
    torch.testing.assert_close(group_contrastive_loss(encodings, values, positives), expected)


def _mural_tables() -> dict[tuple[str, str], torch.Tensor]:
    return {
        ("a", "phrase"): torch.tensor([[1.0, 0.0], [0.0, 1.0]]),
        ("b", "phrase"): torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]]),
        ("a", "word"): torch.tensor([[1.0, 0.0], [0.0, 1.0]]),
        ("b", "word"): torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0], [1.0, 1.0]]),
    }


def _mural_labels(with_word: bool = True) -> dict[str, AspectLabels]:
    # Record 0: a/phrase {0}, b/phrase {1, 2}, a/word {1}; record 1: b/phrase {0} (its a/phrase
    # value was unseen, X); record 2: no annotations.
    presence = torch.tensor([[1, 1], [1, 1], [X, X]])
    labels = {
        "phrase": AspectLabels(
            {"a": torch.tensor([[0], [X], [X]]), "b": torch.tensor([[1, 2], [0, X], [X, X]])}, presence
        ),
        "word": AspectLabels(
            {"a": torch.tensor([[1], [X], [X]]), "b": torch.tensor([[X], [X], [X]])}, presence
        ),
    }
    return labels if with_word else {"phrase": labels["phrase"]}


def _mural_loss(grouping: Grouping, encodings: torch.Tensor, **labels: bool) -> torch.Tensor:
    groups = aspect_groups(("a", "b"), ("phrase", "word"), grouping)
    tables = _mural_tables()
    return mural_aspect_learning_loss(groups, encodings, lambda a, g: tables[(a, g)], _mural_labels(**labels))


# Per-objective values used below (h is the group's encoding):
#   a/phrase, h = (ln 3, 0): h·e = (ln 3, 0), P = (3, 1)/4, A = {0}: log 4/3
#   b/phrase, h = (ln 3, 0): h·e = (ln 3, 0, 0), P = (3, 1, 1)/5, A = {1, 2}: (log 5 + log 5)/2 = log 5
#   a/word,   h = (0, 0):    P = (1, 1)/2, A = {1}: log 2
#   a/word,   h = (ln 3, 0): P = (3, 1)/4, A = {1}: log 4
#   b/phrase, h = (0, ln 2): h·e = (0, ln 2, 0), P = (1, 2, 1)/4, A = {0}: log 4
A_PHRASE = math.log(4 / 3)
B_PHRASE = LN5
A_WORD_UNIFORM = LN2
A_WORD_SKEWED = math.log(4.0)
B_PHRASE_R1 = math.log(4.0)


def test_mural_granularity_grouping_by_hand() -> None:
    """Eq. 4: per record, the mean over the aspects present in each group, then over the groups present."""
    encodings = torch.tensor(
        [
            [[LN3, 0.0], [0.0, 0.0]],  # record 0: phrase token, word token
            [[0.0, LN2], [5.0, -5.0]],  # record 1: its word token has no labels
            [[7.0, 1.0], [2.0, 2.0]],  # record 2: not annotated, left out
        ]
    )
    record0 = ((A_PHRASE + B_PHRASE) / 2 + A_WORD_UNIFORM) / 2  # ((0.2877 + 1.6094) / 2 + 0.6931) / 2
    record1 = B_PHRASE_R1  # only b/phrase: its phrase group alone, 1.3863
    close(_mural_loss(Grouping.GRANULARITY, encodings), (record0 + record1) / 2)  # 1.1036
    # A batch whose labels lack a granularity: its objectives are skipped (implicit learning only).
    close(
        _mural_loss(Grouping.GRANULARITY, encodings, with_word=False),
        ((A_PHRASE + B_PHRASE) / 2 + record1) / 2,
    )


def test_mural_single_and_aspect_groupings_by_hand() -> None:
    """Eq. 3 (one token per objective) and Eq. 5 (one token per aspect) on the same labels."""
    # SINGLE groups: a_phrase, a_word, b_phrase, b_word.
    single = torch.tensor(
        [
            [[LN3, 0.0], [0.0, 0.0], [LN3, 0.0], [9.0, 9.0]],
            [[4.0, 4.0], [4.0, 4.0], [0.0, LN2], [4.0, 4.0]],
            [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0], [7.0, 8.0]],
        ]
    )
    record0 = (A_PHRASE + A_WORD_UNIFORM + B_PHRASE) / 3  # b_word has no label: 3 objectives
    close(_mural_loss(Grouping.SINGLE, single), (record0 + B_PHRASE_R1) / 2)  # 1.1249
    # ASPECT groups: a (phrase, word), b (phrase, word); both granularities read the same token.
    by_aspect = torch.tensor(
        [
            [[LN3, 0.0], [LN3, 0.0]],
            [[4.0, 4.0], [0.0, LN2]],
            [[1.0, 2.0], [3.0, 4.0]],
        ]
    )
    record0 = ((A_PHRASE + A_WORD_SKEWED) / 2 + B_PHRASE) / 2  # (0.8370 + 1.6094) / 2
    close(_mural_loss(Grouping.ASPECT, by_aspect), (record0 + B_PHRASE_R1) / 2)  # 1.3048


def test_mural_aspect_loss_without_any_annotation_is_a_graph_keeping_zero() -> None:
    encodings = torch.ones(2, 2, 2, requires_grad=True)
    groups = aspect_groups(("a", "b"), ("phrase", "word"), Grouping.GRANULARITY)
    tables = _mural_tables()
    nothing = AspectLabels({"a": torch.full((2, 1), X), "b": torch.full((2, 1), X)}, torch.full((2, 2), X))
    labels = {"phrase": nothing, "word": nothing}
    loss = mural_aspect_learning_loss(groups, encodings, lambda a, g: tables[(a, g)], labels)
    loss.backward()
    assert loss.item() == 0.0 and torch.equal(encodings.grad, torch.zeros(2, 2, 2))


# --- MLM (madral-kdd22 Eq. 7, mural-wsdm24 Eq. 8) -------------------------------------------


def test_masked_lm_loss_is_the_mean_over_all_masked_positions_by_hand() -> None:
    head = MlmHead(BertConfig(hidden_size=2, hidden_act="gelu", layer_norm_eps=1e-12), vocab_size=3)
    with torch.no_grad():
        head.transform.dense.weight.copy_(torch.eye(2))
        head.transform.dense.bias.zero_()
        head.bias.copy_(torch.tensor([0.0, 0.5, -0.5]))
    words = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    hidden = torch.tensor(
        [[[5.0, 5.0], [2.0, 1.0], [1.0, 3.0]], [[3.0, 1.0], [4.0, 2.0], [1.0, 1.0]]], requires_grad=True
    )
    labels = torch.tensor([[X, 0, 1], [2, X, X]])
    # Transform: dense = identity, GELU is increasing for x > 0, and LayerNorm over two values maps
    # (u, v) to (1, -1) when u > v and to (-1, 1) when u < v. So (2, 1) and (3, 1) -> (1, -1),
    # (1, 3) -> (-1, 1). Logits = n · words + bias:
    #   n = (1, -1): (1, -1 + 0.5, 1 - 1 - 0.5) = (1, -0.5, -0.5)
    #   n = (-1, 1): (-1, 1 + 0.5, -1 + 1 - 0.5) = (-1, 1.5, -0.5)
    first = -1.0 + math.log(math.e + 2 * math.exp(-0.5))  # target 0 of (1, -0.5, -0.5)
    second = -1.5 + math.log(math.exp(-1.0) + math.exp(1.5) + math.exp(-0.5))  # target 1 of (-1, 1.5, -0.5)
    third = 0.5 + math.log(math.e + 2 * math.exp(-0.5))  # target 2 of (1, -0.5, -0.5)
    # The mean over the 3 chosen positions of the batch (not per text: that would be 1.0759).
    expected = (first + second + third) / 3  # 0.8116
    loss = masked_lm_loss(head, hidden, words, labels)
    assert loss.item() == pytest.approx(expected, rel=1e-5)
    loss.backward()
    assert torch.equal(hidden.grad[labels == X], torch.zeros(3, 2))  # unchosen positions get nothing
    nothing = masked_lm_loss(head, hidden, words, torch.full((2, 3), X))
    assert nothing.item() == 0.0 and nothing.requires_grad
