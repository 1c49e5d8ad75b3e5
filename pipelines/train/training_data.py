"""Training examples from a dataset folder: judged queries with their documents' texts.

Only the products that some judgment of the wanted split refers to are kept in
memory; product shards are streamed in column-projected batches.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from apache_beam.io.filesystems import FileSystems

from model import document_text
from model.training import QueryExamples
from model.training.config import Annotations
from pipelines.io.product_reader import SkippedProducts, valid_products
from pipelines.layout import DatasetLayout
from schemas import validate_query

LOGGER = logging.getLogger(__name__)


@dataclass(frozen=True)
class TrainingSet:
    examples: list[QueryExamples]
    queries_without_positive: int
    judgments_without_product: int


def _read_table(path: str) -> pa.Table:
    with FileSystems.open(path) as handle:
        return pq.read_table(handle)


def load_training_set(
    dataset: str,
    split: str,
    text_of: Callable[[Mapping[str, Any]], str] = document_text,
    positive_min_grade: int = 2,
) -> TrainingSet:
    """QueryExamples of one split: grade >= `positive_min_grade` are positives, the rest hard negatives.

    `text_of` is what the model reads of a product (`model.text_for_model` for a config);
    aspect annotations travel with every query and document for the aspect losses.
    """
    layout = DatasetLayout(dataset)
    queries = [validate_query(q) for q in _read_table(layout.queries).to_pylist()]
    texts = {q["query_id"]: q["text"] for q in queries if q["split"] == split}
    query_aspects = {q["query_id"]: q["aspects"] or None for q in queries}
    judged: dict[str, list[tuple[str, int]]] = defaultdict(list)
    for row in _read_table(layout.judgments).to_pylist():
        if row["query_id"] in texts:
            judged[row["query_id"]].append((row["product_id"], row["grade"]))
    wanted = {pid for rows in judged.values() for pid, _ in rows}
    documents = _judged_documents(layout, wanted, text_of)
    examples, without_positive, missing = [], 0, 0
    for query_id in sorted(judged):
        positives, negatives = [], []
        for product_id, grade in judged[query_id]:
            if product_id not in documents:
                missing += 1
                continue
            (positives if grade >= positive_min_grade else negatives).append(documents[product_id])
        if not positives:
            without_positive += 1
            continue
        examples.append(
            QueryExamples(
                query=texts[query_id],
                positives=tuple(text for text, _ in positives),
                hard_negatives=tuple(text for text, _ in negatives),
                query_aspects=query_aspects[query_id],
                positive_aspects=tuple(aspects for _, aspects in positives),
                negative_aspects=tuple(aspects for _, aspects in negatives),
            )
        )
    if missing:
        LOGGER.warning("%d judgments refer to products missing from the catalog; skipped", missing)
    return TrainingSet(examples, without_positive, missing)


def _judged_documents(
    layout: DatasetLayout, wanted: set[str], text_of: Callable[[Mapping[str, Any]], str]
) -> dict[str, tuple[str, Annotations]]:
    documents: dict[str, tuple[str, Annotations]] = {}
    skipped = SkippedProducts()
    for product in valid_products(layout.products, skipped, only_ids=wanted):
        documents[product["product_id"]] = (text_of(product), product["aspects"] or None)
    if skipped.count:
        LOGGER.warning("judged products: %s", skipped.describe())
    return documents
