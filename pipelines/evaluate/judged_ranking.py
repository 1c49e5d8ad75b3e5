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

import numpy as np
import torch

from evaluation import MetricSpec, RelevanceRule, evaluate_query, parse_metrics
from model import Side
from model.abstention import EVERY_PREDICTION, AbstentionRule, folded_words
from model.aspects.calibration import aspect_probabilities
from model.aspects.vocabulary import UNSEEN
from model.text_encoder import TextEncoder

RANKING_METRICS = ("ndcg@5", "ndcg@10", "ndcg@50", "auc")


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
    """Accuracy@1 per aspect over every annotated record, how many that is, and how many of them the
    model could not get right.

    A record whose annotated values are all `UNSEEN` (outside the vocabulary: below its min count,
    or a brand the model never saw) counts as a miss: on another catalog that is what a reader of
    the annotations gets. `out_of_vocabulary` counts them, and `accuracy_in_vocabulary` leaves them
    out (what the heads reach on the values they know, the papers' Table 4 view).
    """

    accuracy: dict[str, float]
    counts: dict[str, int]
    out_of_vocabulary: dict[str, int] = field(default_factory=dict)
    accuracy_at_3: dict[str, float] = field(default_factory=dict)  # repro-ecir24 Table 4 reports @3
    # Calibration at `min_confidence`: the share of records that get a value written (sure enough and,
    # for stated aspects, named by the text: `AbstentionRule`), and the precision of those values.
    min_confidence: float = 0.0
    confident_coverage: dict[str, float] = field(default_factory=dict)
    confident_accuracy: dict[str, float | None] = field(default_factory=dict)
    accuracy_in_vocabulary: dict[str, float | None] = field(default_factory=dict)
    # Whether the confidences are calibrated: per aspect, for each tenth of the confidence range that
    # holds records, their count, mean confidence and Accuracy@1 (a reliability diagram's points).
    reliability: dict[str, list[dict[str, float]]] = field(default_factory=dict)

    def out_of_vocabulary_share(self, aspect: str) -> float:
        return self.out_of_vocabulary.get(aspect, 0) / self.counts[aspect] if self.counts.get(aspect) else 0.0


# Reliability diagrams split the confidence range into this many equal bins.
RELIABILITY_BINS = 10


@torch.inference_mode()
def aspect_accuracy(
    model: TextEncoder,
    texts: Sequence[str],
    annotations: Sequence[Mapping[str, Sequence[str]] | None],
    side: Side,
    rule: AbstentionRule | None = None,
) -> AspectAccuracy | None:
    """Top-1 predicted value among the record's annotated values, per aspect; None without aspect heads.
    `model` encodes as it was loaded (an embed run's runtime and precision, or the torch model).

    The annotations are encoded into class ids by the call the aspect labels of training use
    (`AspectVocabulary.encode`, with the tokenizer for word or token vocabularies), so a hit is
    exactly "the argmax is a class the aspect prediction loss targets for this record". The coverage
    and precision columns apply `rule` (default: every prediction is written) to the record's text.
    """
    encoder, tokenizer = model.encoder, model.tokenizer
    vocabulary = getattr(encoder, "vocabulary", None)
    if vocabulary is None:
        return None
    rule = rule or EVERY_PREDICTION
    hits: dict[str, int] = defaultdict(int)
    hits_at_3: dict[str, int] = defaultdict(int)
    counts: dict[str, int] = defaultdict(int)
    out_of_vocabulary: dict[str, int] = defaultdict(int)
    written: dict[str, int] = defaultdict(int)
    written_hits: dict[str, int] = defaultdict(int)
    # Per aspect and tenth of the confidence range: [records, summed confidence, hits].
    bins: dict[str, list[list[float]]] = defaultdict(lambda: [[0, 0.0, 0] for _ in range(RELIABILITY_BINS)])
    outputs = model.outputs(texts, side)
    offset = 0
    for output in outputs:
        if not output.aspect_logits:
            return None
        size = output.embedding.shape[0]
        for aspect, logits in output.aspect_logits.items():
            top3 = logits.topk(min(3, logits.shape[-1]), dim=-1).indices.tolist()
            temperature = encoder.config.aspect_temperatures.get(aspect, 1.0)
            confidence = aspect_probabilities(logits, temperature).max(dim=-1).values.tolist()
            for row in range(size):
                wanted = (annotations[offset + row] or {}).get(aspect) or []
                if not wanted:
                    continue
                classes = set(vocabulary.encode(aspect, wanted, tokenizer.tokenize)) - {UNSEEN}
                counts[aspect] += 1
                out_of_vocabulary[aspect] += not classes
                hit = top3[row][0] in classes
                hits[aspect] += hit
                hits_at_3[aspect] += bool(classes.intersection(top3[row]))
                tenth = bins[aspect][min(RELIABILITY_BINS - 1, int(confidence[row] * RELIABILITY_BINS))]
                tenth[0] += 1
                tenth[1] += confidence[row]
                tenth[2] += hit
                value = vocabulary.spell(aspect, top3[row][0])
                if rule.keeps(aspect, value, confidence[row], folded_words(texts[offset + row])):
                    written[aspect] += 1
                    written_hits[aspect] += hit
        offset += size
    known = {a: counts[a] - out_of_vocabulary[a] for a in counts}
    return AspectAccuracy(
        {a: hits[a] / counts[a] for a in counts},
        dict(counts),
        {a: n for a, n in out_of_vocabulary.items() if n},
        {a: hits_at_3[a] / counts[a] for a in counts},
        rule.min_confidence,
        {a: written[a] / counts[a] for a in counts},
        {a: (written_hits[a] / written[a] if written[a] else None) for a in counts},
        {a: (hits[a] / known[a] if known[a] else None) for a in counts},
        {
            a: [
                {"count": n, "mean_confidence": total / n, "accuracy": right / n}
                for n, total, right in bins[a]
                if n
            ]
            for a in counts
        },
    )
