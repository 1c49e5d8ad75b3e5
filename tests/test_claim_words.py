"""bench.claim_words: a comparative word is held to the p-value beside it, "met" on a timing to the worst of
repeated runs; the documents as committed say nothing stronger than their figures."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.claim_words import DOCUMENTS, check_sentence, overstated, sentences, timing_met

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    ("sentence", "words"),
    [
        # The case: an overstated word beside p 0.02.
        ("MURAL-CONCAT is above zero-shot (+1.8 points, p 0.02).", ["above"]),
        ("Fused with BM25 it is ahead of the hybrid (NDCG@10 +2.3, p 0.019).", ["ahead"]),
        ("BiBERT is below it at R@1k (−4.4, p 0.68 after Holm).", ["below"]),
        ("The model beats BM25 (p 0.0024 to 0.054).", ["beats"]),  # a range: its worst end
        ("It is level with zero-shot (+6.4 points, p 0.001).", ["level"]),  # level beside a real difference
        ("The night is ahead of the peer (p ≥ 0.14).", ["ahead"]),
        ("X is ahead of Y, p 0.3.", ["ahead"]),  # a p-value at the end of the sentence
        ("no-fusion is ahead of BiBERT (p 0.3)", ["ahead"]),  # a name that starts with "no" denies nothing
        # Supported, denied, or a threshold: nothing to say.
        ("The model is ahead of zero-shot (+6.4 points, p 0.005 after Holm).", []),
        ("NDCG@10 is ahead (p < 1e-19).", []),
        ("UHD-BERT is behind on NDCG@5 (p < 0.01).", []),
        ("It is level with zero-shot at R@100 (+1.4, p 0.05).", []),
        ("No model is ahead of zero-shot at R@100 beyond chance (p 0.14).", []),
        ("The difference is not significant (p 0.3).", []),
        ("Three seeds, none below 0.01 (p 0.13 / 0.036 / 0.062).", []),
        ("It is ahead at R@100 (p 1e-9).", []),
        (
            "Per-query differences (55 % of the queries tie exactly), so a test at p < 0.01 detects 4.",
            [],
        ),
        ("The model is ahead of BM25 on the store.", []),  # no p-value quoted: the tables' marks decide
    ],
)
def test_words_are_held_to_the_p_value_beside_them(sentence: str, words: list[str]) -> None:
    assert [word for word, _ in check_sentence(sentence)] == words


def test_the_p_value_beside_a_word_is_the_one_in_its_clause() -> None:
    # "below" has its own p; "level" the next one, after the semicolon-free clause break at "level".
    assert (
        check_sentence("en-v2 is behind further down (R@1k −9.9, p 0.0005) and level at R@100 (p 0.68).")
        == []
    )
    assert [
        w for w, _ in check_sentence("It is ahead at the top and behind further down: +3.5 (p 0.68).")
    ] == ["behind"]


def test_a_timing_met_from_one_run_fails() -> None:
    assert check_sentence("The 5 % night took 545.8 s: the 10-minute target is met.") == [
        ("met", "on a timing without the worst of repeated runs")
    ]
    assert check_sentence("The worst of three nights took 638.3 s, so the target is not met.") == []
    assert check_sentence("The worst of three nights, 590.1 s, met the target.") == []
    assert check_sentence("Accuracy targets are met on these products.") == []  # not a timing


def test_timing_targets_need_the_worst_run_or_a_margin_beyond_the_spread() -> None:
    assert not timing_met([546.8, 638.3, 545.8], 600)  # the 1M night's three churn nights
    assert timing_met([546.8, 580.0], 600)
    assert not timing_met([545.8], 600)  # one run inside 15 % of the target
    assert timing_met([29.43], 45)
    assert not timing_met([1.527], 1.6, higher_is_better=True)
    assert timing_met([1.19], 1.0, higher_is_better=True) and not timing_met(
        [1.03], 1.0, higher_is_better=True
    )


def test_sentences_leave_out_tables_and_code() -> None:
    markdown = "Prose one. Prose two (p 0.5).\n\n| a | ahead (p 0.5) |\n\n```\nahead p 0.5\n```\n- item below"
    assert [text for _, text in sentences(markdown)] == ["Prose one.", "Prose two (p 0.5).", "- item below"]


def test_the_committed_documents_say_no_more_than_their_figures() -> None:
    found = [str(word) for document in DOCUMENTS for word in overstated(ROOT / document)]
    assert found == []
