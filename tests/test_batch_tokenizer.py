"""`model.batch_tokenizer`: the Rust tokenizer's ids, padded in NumPy, equal transformers' call."""

from __future__ import annotations

import numpy as np
import pytest

from model import Side, new_encoder
from model.backbone import load_tokenizer
from model.batch_tokenizer import BatchTokenizer

AWKWARD = [
    "",
    "Wüsthof Classic 8\" chef's knife — ÉDITION spéciale",
    "北京 烤鸭 kettle 電気ケトル",
    "a " * 300,  # truncated
    "under_score snake_case CamelCaseWord x y z",
    "tab\tnew\nline\u200bzero-width \u202ebidi",
    "emoji 🫖 teapot 1.5 l, 2200 W",
]


@pytest.mark.parametrize("max_length", [8, 64, 512])
def test_the_ids_and_mask_equal_the_tokenizer_call(max_length: int) -> None:
    tokenizer = load_tokenizer()
    expected = tokenizer(AWKWARD, padding=True, truncation=True, max_length=max_length, return_tensors="np")
    input_ids, mask = BatchTokenizer(tokenizer, max_length)(AWKWARD)
    np.testing.assert_array_equal(input_ids, expected["input_ids"])
    np.testing.assert_array_equal(mask, expected["attention_mask"])
    assert input_ids.dtype == mask.dtype == np.int64


def test_the_shared_tokenizer_calls_do_not_change_it() -> None:
    tokenizer = load_tokenizer()
    batch = BatchTokenizer(tokenizer, 16)
    tokenizer(["x"], padding="max_length", truncation=True, max_length=4)  # sets the shared backend
    text = ["a longer text of more than four tokens"]
    expected = tokenizer(text, truncation=True, max_length=16, return_tensors="np")["input_ids"]
    assert expected.shape[1] > 4
    np.testing.assert_array_equal(batch(text)[0], expected)


def test_an_encoder_makes_a_new_one_when_tokens_are_added(tiny_backbone_dir) -> None:
    encoder, tokenizer = new_encoder("bibert", backbone_path=tiny_backbone_dir, pretrained=False)
    before = encoder.tokenize(tokenizer, ["[NEWTOKEN] socks"], Side.DOCUMENT).input_ids
    tokenizer.add_tokens(["[NEWTOKEN]"])
    after = encoder.tokenize(tokenizer, ["[NEWTOKEN] socks"], Side.DOCUMENT).input_ids
    assert after.shape[1] < before.shape[1] and int(after[0, 1]) == len(tokenizer) - 1
