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
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from transformers import PreTrainedTokenizerBase

from evaluation import MetricSpec, RelevanceRule, evaluate_query, parse_metrics
from model import DenseEncoder, Side
from model.aspects.vocabulary import UNSEEN

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
    """Accuracy@1 per aspect, the number of records it is over, and the annotated records left out.

    `out_of_vocabulary` counts records whose annotated values are all `UNSEEN` (filtered by the
    vocabulary's min count, or never counted): no class can match them, and training ignores them.
    """

    accuracy: dict[str, float]
    counts: dict[str, int]
    out_of_vocabulary: dict[str, int] = field(default_factory=dict)
    accuracy_at_3: dict[str, float] = field(default_factory=dict)  # repro-ecir24 Table 4 reports @3
    # Calibration at `min_confidence`: the share of records whose top value is that sure, and
    # Accuracy@1 over them (what a reader of the annotations written at that threshold gets).
    min_confidence: float = 0.0
    confident_coverage: dict[str, float] = field(default_factory=dict)
    confident_accuracy: dict[str, float | None] = field(default_factory=dict)


@torch.inference_mode()
def aspect_accuracy(
    encoder: DenseEncoder,
    tokenizer: PreTrainedTokenizerBase,
    texts: Sequence[str],
    annotations: Sequence[Mapping[str, Sequence[str]] | None],
    side: Side,
    min_confidence: float = 0.0,
) -> AspectAccuracy | None:
    """Top-1 predicted value among the record's annotated values, per aspect; None without aspect heads.

    The annotations are encoded into class ids by the call the aspect labels of training use
    (`AspectVocabulary.encode`, with the tokenizer for word or token vocabularies), so a hit is
    exactly "the argmax is a class the aspect prediction loss targets for this record".
    """
    vocabulary = getattr(encoder, "vocabulary", None)
    if vocabulary is None:
        return None
    hits: dict[str, int] = defaultdict(int)
    hits_at_3: dict[str, int] = defaultdict(int)
    counts: dict[str, int] = defaultdict(int)
    out_of_vocabulary: dict[str, int] = defaultdict(int)
    confident: dict[str, int] = defaultdict(int)
    confident_hits: dict[str, int] = defaultdict(int)
    outputs = encode(encoder, tokenizer, texts, side)
    offset = 0
    for output in outputs:
        if not output.aspect_logits:
            return None
        size = output.embedding.shape[0]
        for aspect, logits in output.aspect_logits.items():
            top3 = logits.topk(min(3, logits.shape[-1]), dim=-1).indices.tolist()
            sure = (torch.softmax(logits.float(), dim=-1).max(dim=-1).values >= min_confidence).tolist()
            for row in range(size):
                wanted = (annotations[offset + row] or {}).get(aspect) or []
                if not wanted:
                    continue
                classes = set(vocabulary.encode(aspect, wanted, tokenizer.tokenize)) - {UNSEEN}
                if not classes:
                    # A value below the vocabulary's min count can never be the argmax; scoring it as a
                    # miss would cap Accuracy@1 below 1.0 by the catalog's long tail, not by the model.
                    out_of_vocabulary[aspect] += 1
                    continue
                counts[aspect] += 1
                hits[aspect] += top3[row][0] in classes
                hits_at_3[aspect] += bool(classes.intersection(top3[row]))
                confident[aspect] += sure[row]
                confident_hits[aspect] += sure[row] and top3[row][0] in classes
        offset += size
    return AspectAccuracy(
        {a: hits[a] / counts[a] for a in counts},
        dict(counts),
        dict(out_of_vocabulary),
        {a: hits_at_3[a] / counts[a] for a in counts},
        min_confidence,
        {a: confident[a] / counts[a] for a in counts},
        {a: (confident_hits[a] / confident[a] if confident[a] else None) for a in counts},
    )
