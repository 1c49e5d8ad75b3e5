"""`madr explain` and `madr neighbours`: the interpretability views of madral-kdd22 §9.4, and their configs.

explain (Table 8): for a query and a product, per aspect the predicted value, its
confidence P(x), the presence probability and the fusion weight, then the score.
neighbours (Table 9): the values nearest to one value in the learned aspect value
table U_a, by cosine of their rows.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from model import Side, load_encoder
from model.abstention import AbstentionRule
from model.annotations import RecordAnnotations
from model.aspects.vocabulary import VOCABULARY_FILE, AspectVocabulary, normalise_value
from model.text import text_for_model
from model.text_encoder import TextEncoder
from pipelines.io.parquet_reading import parquet_rows
from pipelines.settings.stage_config import input_checks, setting
from pipelines.storage.verify import verify_model
from schemas import PRODUCT_SCHEMA, InvalidRecord, validate_product, validate_query
from schemas.terminal_text import for_terminal

# A table cell shows at most this much of a predicted value.
CELL_CHARS = 40

# What `--product` takes as JSON: a catalog row's fields but its id (a stage's own columns are left out).
PRODUCT_FIELDS = tuple(name for name in PRODUCT_SCHEMA.names if name != "product_id")


@dataclass(frozen=True)
class Explanation:
    query: RecordAnnotations
    product: RecordAnnotations
    score: float

    def format(self) -> str:
        # Every aspect with a confidence, so one whose value was left out (unsure, or not named) still shows.
        sides = (self.query, self.product)
        aspects = sorted(
            {name for notes in sides for name in (*notes.fusion_weights, *notes.aspect_confidences)},
            key=lambda name: (name in ("other", "cls"), name),
        )
        if not aspects:
            return f"this variant has no aspect views; cosine score {self.score:.4f}"
        # Each column is as wide as its longest value, so value names are shown whole.
        rows = {
            side: [
                (label, [_cell(values.get(a)) for a in aspects])
                for label, values in (
                    ("prediction", notes.aspect_values),
                    ("confidence", notes.aspect_confidences),
                    ("presence", notes.aspect_presence),
                    ("weight", notes.fusion_weights),
                )
                if values  # a variant without fusion weights (MtBERT) gets no empty row
            ]
            for side, notes in (("Query", self.query), ("Product", self.product))
        }
        widths = [
            max([len(a), *(len(cells[i]) for side in rows.values() for _, cells in side)]) + 2
            for i, a in enumerate(aspects)
        ]

        def line(label: str, cells: list[str]) -> str:
            return f"  {label:<12}" + "".join(f"{c:>{w}}" for c, w in zip(cells, widths, strict=True))

        lines = []
        for side, side_rows in rows.items():
            lines += [f"{side}:", line("", list(aspects))]
            lines += [line(label, cells) for label, cells in side_rows]
        lines.append(f"Score (cosine): {self.score:.4f}")
        return "\n".join(lines)


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.3f}"
    return for_terminal(value, CELL_CHARS)


def _product(text: str) -> dict[str, Any]:
    """--product as the stages read a product: validated, so the model sees the same (NFC) text."""
    try:
        record = json.loads(text)
    except json.JSONDecodeError:
        record = {"title": text}
    if not isinstance(record, dict) or not record.get("title"):
        raise ValueError("--product as JSON must be an object with at least a 'title'")
    try:
        return validate_product({"product_id": "--product", **record})
    except InvalidRecord as error:
        raise ValueError(f"--product: {error.reason}") from None


def catalog_product(products: str | None, product_id: str) -> str:
    """The catalog record of `product_id` as JSON (what `--product` takes), read from `products`."""
    if not products:
        raise ValueError("--product_id needs --products, the catalog that holds it")
    wanted = " ".join(product_id.split())
    for row in parquet_rows(products):
        if row.get("product_id") == wanted:
            return json.dumps(
                {key: value for key, value in row.items() if key in PRODUCT_FIELDS}, default=str
            )
    raise ValueError(f"--product_id {product_id!r} is not in {products}")


def _query(text: str) -> str:
    try:
        return validate_query({"query_id": "--query", "text": text})["text"]
    except InvalidRecord as error:
        raise ValueError(f"--query: {error.reason}, e.g. --query 'breville juicer'") from None


@torch.inference_mode()
def explain(model_dir: str, query: str, product: str, verify: bool = True) -> Explanation:
    # The inputs first: a bad one is refused before the model is loaded.
    record, query = _product(product), _query(query)
    verify_model(model_dir, verify)
    model = TextEncoder.load(model_dir)
    text = text_for_model(record, model.encoder.config)
    # As `madr embed` writes them by default: brand and colour only where the text names them.
    rule = AbstentionRule()
    [query_side] = model.encode([query], Side.QUERY, annotate_with=rule)
    [product_side] = model.encode([text], Side.DOCUMENT, annotate_with=rule)
    score = float(query_side.embedding @ product_side.embedding)
    return Explanation(query_side.annotations, product_side.annotations, score)


def vocabulary_listing(model_dir: str, aspect: str, verify: bool = True) -> list[tuple[str, int]]:
    """The values of `aspect` the model predicts, as the catalog spells them, with the records counted."""
    verify_model(model_dir, verify)
    vocabulary = AspectVocabulary.load(model_dir) if (Path(model_dir) / VOCABULARY_FILE).is_file() else None
    if vocabulary is None or aspect not in vocabulary.aspects:
        known = list(vocabulary.aspects) if vocabulary else []
        raise ValueError(
            f"no {aspect!r} vocabulary in {model_dir}; it has {known or 'none (no aspect heads)'}"
        )
    values = vocabulary.values(aspect)
    return [(values.spelling(i), values.counts[i]) for i in range(len(values))]


@torch.inference_mode()
def neighbours(
    model_dir: str, aspect: str, value: str, top: int = 5, verify: bool = True
) -> list[tuple[str, float]]:
    """The `top` values nearest to `value` in U_a (itself first, at 1.0)."""
    verify_model(model_dir, verify)
    encoder, _ = load_encoder(model_dir)
    heads = getattr(encoder, "aspect_prediction", None)
    vocabulary = getattr(encoder, "vocabulary", None)
    if heads is None or vocabulary is None:
        raise ValueError(
            f"variant {encoder.config.variant!r} has no aspect value tables (train madral or mtbert)"
        )
    if aspect not in heads.tables:
        raise ValueError(f"no value table for aspect {aspect!r}; the model has {list(heads.tables)}")
    values = vocabulary.values(aspect)
    wanted = normalise_value(value)
    if wanted not in values.values:
        close = difflib.get_close_matches(wanted, values.values, n=5, cutoff=0.6)
        hint = (
            f"; nearest names: {', '.join(values.spelling(values.id_of(c)) for c in close)}" if close else ""
        )
        raise ValueError(
            f"{value!r} is not in the {aspect} vocabulary ({len(values)} values){hint}. "
            f"`madr neighbours --model {model_dir} --aspect {aspect} --list` lists them"
        )
    nearest = heads.nearest_values(aspect, values.id_of(wanted), top)
    return [(values.values[i], cosine) for i, cosine in nearest]


@dataclass(frozen=True)
class ExplainConfig:
    model: str = setting("", "Trained model directory", required=True)
    query: str = setting("", "Query text, e.g. 'breville juicer'", required=True)
    product: str | None = setting(None, "Product title, or a product record as JSON in madr's field names")
    product_id: str | None = setting(None, "A product of the catalog --products, by its id")
    products: str | None = setting(None, "Catalog Parquet file, folder or glob that holds --product_id")
    verify: bool = input_checks()

    def __post_init__(self) -> None:
        if (self.product is None) == (self.product_id is None):
            raise ValueError("give one of --product and --product_id")


@dataclass(frozen=True)
class NeighboursConfig:
    model: str = setting("", "Trained model directory of a variant with aspect heads", required=True)
    aspect: str = setting("", "Aspect name, e.g. category", required=True)
    value: str | None = setting(None, "Aspect value, e.g. Bedding")
    list: bool = setting(False, "List the aspect's values, most frequent first, with counts")
    top: int = setting(5, "How many neighbours to list (5)")
    verify: bool = input_checks()

    def __post_init__(self) -> None:
        if (self.value is None) == (not self.list):
            raise ValueError("give one of --value and --list")
