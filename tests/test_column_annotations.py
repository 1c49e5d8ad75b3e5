"""`ColumnAnnotator` writes what `annotate` gives record by record: the embed stage's annotation columns
did not change when it began building them column-wise (issue 64)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from model import Side, new_encoder
from model.abstention import AbstentionRule
from model.annotations import ANNOTATION_COLUMNS, ColumnAnnotator, annotate
from model.aspects import AspectVocabulary
from tests.conftest import tiny_backbone

ASPECTS = ("category", "brand", "color")
VOCABULARY = AspectVocabulary.from_records(
    [
        {"category": ["Socks"], "brand": ["Nike"], "color": ["White"]},
        {"category": ["Juicers"], "brand": ["Breville"], "color": ["Silver"]},
        {"category": ["Cookbooks"], "brand": ["Wüsthof"], "color": ["Matte Black"]},
    ],
    ASPECTS,
)
TEXTS = [
    "Nike white running socks",
    "Breville juicer, silver",
    "WUSTHOF cookbook in matte-black",
    "a plain text stating nothing",
    "",
    "nike NIKE Nike",
]


def _as_rows(columns: dict) -> list[dict]:
    """Arrow map columns -> what `RecordAnnotations.as_row` gives, floats as the float32 stored."""
    rows = []
    for row in range(len(next(iter(columns.values())))):
        record = {}
        for name in ANNOTATION_COLUMNS:
            pairs = columns[name][row].as_py()
            record[name] = None if pairs is None else dict(pairs)
        rows.append(record)
    return rows


def _stored(row: dict) -> dict:
    """`as_row`'s values as the float32 a Parquet file holds."""
    return {
        name: None
        if value is None
        else {k: v if isinstance(v, str) else float(np.float32(v)) for k, v in value.items()}
        for name, value in row.items()
    }


@pytest.mark.parametrize("variant", ["bibert", "mtbert", "madral", "mural"])
@pytest.mark.parametrize("rule", [AbstentionRule(), AbstentionRule(min_confidence=0.34), None])
def test_columns_equal_the_record_annotations(variant: str, rule: AbstentionRule | None) -> None:
    with torch.random.fork_rng():
        torch.manual_seed(3)
        encoder, tokenizer = new_encoder(
            variant, pretrained=False, backbone=tiny_backbone(), vocabulary=VOCABULARY, projection_dim=8
        )
    output = encoder.embed_texts(tokenizer, TEXTS, Side.DOCUMENT)
    expected = [_stored(notes.as_row()) for notes in annotate(encoder, output, rule, TEXTS)]
    annotator = ColumnAnnotator(encoder, rule)
    assert _as_rows(annotator(output, TEXTS)) == expected
    assert _as_rows(annotator(output, TEXTS)) == expected  # its per-class lookups, kept, give the same
    if variant != "bibert":
        assert any(row["aspect_values"] for row in expected) and any(
            row["aspect_confidences"] for row in expected
        )
