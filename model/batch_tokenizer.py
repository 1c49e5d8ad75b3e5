"""A batch of texts to padded id arrays, straight through the Rust tokenizer.

transformers' call on a fast tokenizer turns each text's `Encoding` into Python lists (ids, type ids,
attention mask, and the rest) and builds the arrays from those lists: on 256 product texts of the
generated catalog (373 characters on average, 128 tokens at most) that was a fifth of tokenizing, and
tokenizing is most of what a product costs the embed stage besides the model (bench.embed_stage_cost).
Here the Rust tokenizer is asked for the ids alone (`encode_batch_fast`: no offsets) and NumPy pads
them; the arrays are the call's with `padding=True, truncation=True` (tests/test_batch_tokenizer.py).
A tokenizer that pads or truncates on the left, or has no Rust backend, goes through the call as before.

The Rust tokenizer encodes a batch on all cores unless TOKENIZERS_PARALLELISM=false.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from tokenizers import Tokenizer
from transformers import PreTrainedTokenizerBase

from schemas.token_batches import right_padded


class BatchTokenizer:
    """`tokenizer` truncating to `max_length` ids, special tokens included, unpadded: its own copy of the
    Rust tokenizer, so the settings of transformers' calls on the shared one never change it."""

    def __init__(self, tokenizer: PreTrainedTokenizerBase, max_length: int) -> None:
        self.tokenizer = tokenizer
        self.max_length = max_length
        self.vocabulary_size = len(tokenizer)
        backend = getattr(tokenizer, "backend_tokenizer", None)
        plain = tokenizer.padding_side == "right" and tokenizer.truncation_side == "right"
        self.rust: Tokenizer | None = None
        if backend is not None and plain:
            self.rust = Tokenizer.from_str(backend.to_str())
            self.rust.no_padding()
            self.rust.enable_truncation(max_length)
        self.pad_id = int(tokenizer.pad_token_id or 0)

    def __call__(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """(input_ids, attention_mask), int64 arrays of shape (len(texts), longest), padded on the right."""
        if self.rust is None:
            encoded = self.tokenizer(
                list(texts), padding=True, truncation=True, max_length=self.max_length, return_tensors="np"
            )
            return encoded["input_ids"].astype(np.int64), encoded["attention_mask"].astype(np.int64)
        return right_padded(
            [encoding.ids for encoding in self.rust.encode_batch_fast(list(texts))], self.pad_id
        )
