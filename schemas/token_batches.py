"""The encoder's input as its graphs read it: wordpiece ids padded on the right, and their mask.

One layout for the model's batches (`model.batch_tokenizer.BatchTokenizer`) and a server's queries
(`serving.query_encoder`): a query must reach the exported graph exactly as `madr search` hands it to the
model, or their vectors part.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np


def right_padded(
    ids: Sequence[Sequence[int]], pad_id: int, min_width: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """(input_ids, attention_mask), int64 arrays of shape (len(ids), max(longest, `min_width`)): each row's
    ids first, then `pad_id`; the mask 1 on the ids."""
    lengths = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
    width = max(int(lengths.max(initial=0)), min_width)
    mask = np.arange(width) < lengths[:, None]
    input_ids = np.full((len(ids), width), pad_id, dtype=np.int64)
    # Row-major boolean assignment fills each row's first `length` places, in order.
    input_ids[mask] = np.fromiter(itertools.chain.from_iterable(ids), np.int64, int(lengths.sum()))
    return input_ids, mask.astype(np.int64)


__all__ = ["right_padded"]
