"""The ranking task and the aspect prediction task of madral-kdd22 §8.3.

Ranking task: each test query re-ranks its own judged products by the model's
score; NDCG@k (gain 2^rel - 1) and per-query AUC are computed on that ranking.
Aspect prediction task: Accuracy@1 of the top predicted value per aspect, over
records annotated with that aspect. Both are small (one query's judged products,
a sample of products), so they run on the driver against the model directly.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from transformers import PreTrainedTokenizerBase

from model import DenseEncoder, Side
from model.aspects.vocabulary import normalise_value
from pipelines.evaluation import MetricSpec, RelevanceRule, evaluate_query, parse_metrics

RANKING_METRICS = ("ndcg@5", "ndcg@10", "ndcg@50", "auc")


def encode(
    encoder: DenseEncoder,
    tokenizer: PreTrainedTokenizerBase,
    texts: Sequence[str],
    side: Side,
    batch_size: int = 64,
) -> list[Any]:
    """EncoderOutputs of consecutive batches (inference mode)."""
    return [
        encoder.embed_texts(tokenizer, list(texts[start : start + batch_size]), side)
        for start in range(0, len(texts), batch_size)
    ]


def rerank_judged(
    query_vectors: Mapping[str, np.ndarray],
    product_vectors: Mapping[str, np.ndarray],
    judgments: Mapping[str, Mapping[str, int]],
    rule: RelevanceRule,
    metrics: Sequence[str] = RANKING_METRICS,
) -> list[dict[str, float]]:
    """Per-query ranking-task metrics; judged products without an embedding are left out."""
    specs: tuple[MetricSpec, ...] = parse_metrics(metrics)
    rows = []
    for query_id, vector in sorted(query_vectors.items()):
        judged = {pid: grade for pid, grade in judgments.get(query_id, {}).items() if pid in product_vectors}
        if not judged:
            continue
        scores = {pid: float(np.dot(vector, product_vectors[pid])) for pid in judged}
        ranking = sorted(judged, key=lambda pid: (-scores[pid], pid))
        rows.append({"query_id": query_id, **evaluate_query(ranking, judged, specs, rule)})
    return rows


@dataclass(frozen=True)
class AspectAccuracy:
    """Accuracy@1 per aspect and the number of annotated records it is over."""

    accuracy: dict[str, float]
    counts: dict[str, int]


@torch.inference_mode()
def aspect_accuracy(
    encoder: DenseEncoder,
    tokenizer: PreTrainedTokenizerBase,
    texts: Sequence[str],
    annotations: Sequence[Mapping[str, Sequence[str]] | None],
    side: Side,
) -> AspectAccuracy | None:
    """Top-1 predicted value among the record's annotated values, per aspect; None without aspect heads."""
    vocabulary = getattr(encoder, "vocabulary", None)
    if vocabulary is None:
        return None
    hits: dict[str, int] = defaultdict(int)
    counts: dict[str, int] = defaultdict(int)
    outputs = encode(encoder, tokenizer, texts, side)
    offset = 0
    for output in outputs:
        if not output.aspect_logits:
            return None
        size = output.embedding.shape[0]
        for aspect, logits in output.aspect_logits.items():
            top = logits.argmax(dim=-1).tolist()
            for row in range(size):
                wanted = (annotations[offset + row] or {}).get(aspect) or []
                if not wanted:
                    continue
                counts[aspect] += 1
                predicted = vocabulary.decode(aspect, [top[row]])[0]
                hits[aspect] += predicted in {normalise_value(value) for value in wanted}
        offset += size
    return AspectAccuracy({a: hits[a] / counts[a] for a in counts}, dict(counts))
