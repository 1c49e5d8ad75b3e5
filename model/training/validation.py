"""The retrieval metric that selects the fine-tuned checkpoint (and stops training).

madral-kdd22 and repro-ecir24 keep the checkpoint that retrieves best on validation
data, not the one with the lowest loss: a loss mixes L_SCE, L_CE and the aspect
losses, and can fall while ranking gets worse. Here each validation query ranks one
pool, every judged document of the validation split (its positives and hard
negatives, and everyone else's), and the metric is MRR@10 of its positives, the
ranking a search server would produce over that pool.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from model.batch import Side
from model.encoder import DenseEncoder
from model.training.config import QueryExamples

VALIDATION_METRIC = "mrr@10"


@torch.no_grad()
def validation_mrr(
    encoder: DenseEncoder,
    tokenizer: object,
    examples: Sequence[QueryExamples],
    batch_size: int = 64,
    depth: int = 10,
) -> float:
    """Mean over queries of 1/rank of the first positive within the top `depth` of the pool (0 beyond)."""
    if not examples:
        raise ValueError("validation needs at least one query")
    pool = list(dict.fromkeys(text for ex in examples for text in (*ex.positives, *ex.hard_negatives)))
    position = {text: i for i, text in enumerate(pool)}
    training = encoder.training
    encoder.eval()
    try:
        documents = _embed(encoder, tokenizer, pool, Side.DOCUMENT, batch_size)
        queries = _embed(encoder, tokenizer, [ex.query for ex in examples], Side.QUERY, batch_size)
    finally:
        encoder.train(training)
    top = (queries @ documents.T).topk(min(depth, len(pool)), dim=-1).indices.tolist()
    total = 0.0
    for ex, ranked in zip(examples, top, strict=True):
        relevant = {position[text] for text in ex.positives}
        total += next((1.0 / (rank + 1) for rank, doc in enumerate(ranked) if doc in relevant), 0.0)
    return total / len(examples)


def _embed(
    encoder: DenseEncoder, tokenizer: object, texts: list[str], side: Side, batch_size: int
) -> torch.Tensor:
    device = next(encoder.parameters()).device
    rows = [
        encoder(encoder.tokenize(tokenizer, texts[i : i + batch_size], side).to(device), side).embedding
        for i in range(0, len(texts), batch_size)
    ]
    return torch.cat(rows).float()
