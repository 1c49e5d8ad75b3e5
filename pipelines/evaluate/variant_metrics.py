"""What an experiment measures of a trained variant outside the Beam evaluation: the ranking task over
judged products, aspect Accuracy@1/@3 on test queries and on products no model trained on, and whether
the document embeddings collapsed. `madr experiment` adds these to each variant's row.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq

from evaluation import RelevanceRule
from evaluation.collapse import mean_pairwise_cosine
from model import Side, text_for_model
from model.text_encoder import TextEncoder
from pipelines.evaluate.annotation_quality import held_out_products, tuned_products
from pipelines.evaluate.judged_ranking import aspect_accuracy, rerank_judged
from pipelines.evaluate.sparse import is_sparse_model, sparse_ranking_rows
from pipelines.io.parquet_reading import read_embeddings
from pipelines.layout import DatasetLayout
from schemas.splits import HeldOutProducts


def unseen_products(data: DatasetLayout, rule: HeldOutProducts) -> list[dict[str, Any]]:
    """The annotated products that `rule` holds out and that no model trained on, nor on a near-duplicate:
    `held_out_products`, the evaluation's own set, less the judged products of the train and valid
    queries (fine-tuning reads those). Pre-training skips what `rule` holds (`PretrainingPlan.held_out`)."""
    return held_out_products(data.products, rule, tuned_products(data.queries, data.judgments, "test"))


def variant_metrics(
    data: DatasetLayout, folder: Path, rule: RelevanceRule, held_out: list[dict[str, Any]]
) -> dict[str, Any]:
    """Ranking-task rows per query, aspect Accuracy@1/@3 for test queries and the `held_out` products, and
    the mean pairwise cosine of a dense variant's document embeddings (its collapse, if near 1).

    `folder` is a variant's run: its `model`, `embeddings` and `eval` (a sparse variant's indexes)."""
    model = TextEncoder.load(folder / "model")
    encoder, tokenizer = model.encoder, model.tokenizer
    queries = [q for q in pq.read_table(data.queries).to_pylist() if q["split"] == "test"]
    judgments: dict[str, dict[str, int]] = {}
    for row in pq.read_table(data.judgments).to_pylist():
        judgments.setdefault(row["query_id"], {})[row["product_id"]] = row["grade"]
    document_cosine = None
    if is_sparse_model(folder / "model"):
        pairs = [(q["query_id"], q["text"]) for q in queries]
        ranking_rows = sparse_ranking_rows(folder / "eval", encoder, tokenizer, pairs, judgments, rule)
    else:
        outputs = model.outputs([q["text"] for q in queries], Side.QUERY)
        vectors = (
            np.concatenate([o.embedding.float().cpu().numpy() for o in outputs])
            if outputs
            else np.zeros((0, 1))
        )
        query_vectors = {q["query_id"]: vectors[i] for i, q in enumerate(queries)}
        ids, matrix, _ = read_embeddings(str(folder / "embeddings"))
        product_vectors = dict(zip(ids, matrix, strict=True))
        ranking_rows = rerank_judged(query_vectors, product_vectors, judgments, rule)
        document_cosine = mean_pairwise_cosine(matrix)  # a collapsed row is marked (evaluation.collapse)

    def aspects_of(records: list[dict]) -> list[Any]:
        return [dict(r["aspects"]) if r["aspects"] else None for r in records]

    query_accuracy = aspect_accuracy(model, [q["text"] for q in queries], aspects_of(queries), Side.QUERY)
    product_accuracy = aspect_accuracy(
        model,
        [text_for_model(p, encoder.config) for p in held_out],
        aspects_of(held_out),
        Side.DOCUMENT,
    )
    return {
        "ranking_rows": ranking_rows,
        "query_accuracy": asdict(query_accuracy) if query_accuracy else None,
        "product_accuracy": asdict(product_accuracy) if product_accuracy else None,
        "document_cosine": document_cosine,
    }
