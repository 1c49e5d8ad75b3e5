"""How good the annotations are: aspect Accuracy@1/@3 on held-out products, on queries, and calibrated.

`madr evaluate --products` runs this on the driver next to the retrieval metrics. The products are the
ones the model never learned the aspects of: every annotated product of a catalog none of whose products
is in the datasets the model was trained on (compared by product id, `trained_products`), else those the
model's manifest records as held out by pre-training (`schemas.splits`), minus those judged for the train
and valid queries (fine-tuning reads those). A model whose manifest records no held-out rule is measured
on every product not judged for training, and the report says that pre-training may have seen them.
Accuracy counts against the catalog's `aspects` annotations, the labels training targets
(shared/notes/aspect-learning-probe.md).
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from apache_beam.io.filesystems import FileSystems

from model import Side, load_vocabulary, text_for_model
from model.abstention import AbstentionRule
from model.aspects.vocabulary import UNSEEN
from model.backbone import load_tokenizer
from model.text_encoder import TextEncoder
from pipelines.evaluate.config import EvaluateConfig
from pipelines.evaluate.judged_ranking import AspectAccuracy, aspect_accuracy
from pipelines.evaluate.trained_products import never_trained_on
from pipelines.inference import load_text_encoder
from pipelines.io.parquet_reading import parquet_rows, read_parquet_table
from pipelines.io.product_reader import valid_products
from pipelines.settings.options import ModelSettings, PredictionThreshold
from schemas.manifest import MANIFEST_FILE
from schemas.splits import HeldOutProducts, title_key

LOGGER = logging.getLogger(__name__)

# Without --min_confidence, the precision line reads at the threshold enrich and export-vertex act on.
DEFAULT_SAMPLE = 2_000  # Accuracy@1 within about ±0.015 (95 %) at 0.9, in seconds on a CPU


@dataclass(frozen=True)
class AnnotationQuality:
    """Aspect accuracy of one model on held-out products and on one query split."""

    products: AspectAccuracy
    queries: AspectAccuracy | None
    held_out: str  # which products were measured, in words
    products_measured: int
    # Acc@1 of the values the embed run wrote (its precision and runtime), when evaluate has --embeddings.
    written: dict[str, float] | None = None
    # Whether the model provably never trained on the products measured (its held-out slice, or a catalog
    # none of whose products it read): only such figures are comparable night to night.
    unseen: bool = True

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def table(self) -> str:
        """One line per aspect: products scored, the share whose value is outside the vocabulary (counted
        as misses), product Acc@1/@3, query Acc@1, the coverage and precision of the values written at
        min_confidence (stated aspects: named by the text), and the Acc@1 of the values the embed run
        wrote, when measured."""
        sure = f"P>={self.products.min_confidence:.2f}"
        lines = [
            f"Aspect annotations on {self.held_out}; a value outside the vocabulary counts as a miss",
            f"{'aspect':<10} {'products':>8} {'OOV':>6} {'Acc@1':>6} {'Acc@3':>6} {'queries':>7} "
            f"{'Acc@1':>6} {'written ' + sure:>15} {'precision':>9}"
            + (f" {'embed run Acc@1':>15}" if self.written else ""),
        ]
        products = self.products
        for aspect, accuracy in products.accuracy.items():
            queries = self.queries.counts.get(aspect, 0) if self.queries else 0
            query_accuracy = self.queries.accuracy.get(aspect) if self.queries else None
            lines.append(
                f"{aspect:<10} {products.counts[aspect]:>8} {products.out_of_vocabulary_share(aspect):>6.3f} "
                f"{accuracy:>6.3f} {products.accuracy_at_3[aspect]:>6.3f} {queries:>7} "
                f"{_maybe(query_accuracy):>6} {products.confident_coverage[aspect]:>15.3f} "
                f"{_maybe(products.confident_accuracy.get(aspect)):>9}"
                + (f" {_maybe(self.written.get(aspect)):>15}" if self.written else "")
            )
        return "\n".join(lines)


def _maybe(value: float | None) -> str:
    return "–" if value is None else f"{value:.3f}"


def tuned_products(queries: str, judgments: str, evaluated_split: str) -> set[str]:
    """Products judged for the queries of every other split: fine-tuning may have read their aspects."""
    other = {
        row["query_id"]
        for row in parquet_rows(queries, ["query_id", "split"])
        if row["split"] != evaluated_split
    }
    return {
        row["product_id"]
        for row in parquet_rows(judgments, ["query_id", "product_id"])
        if row["query_id"] in other
    }


def held_out_products(
    products: str, rule: HeldOutProducts | None, excluded: set[str], sample: int | None = None
) -> list[dict[str, Any]]:
    """The annotated, valid products in catalog order that `rule` holds out (the first `sample` of them
    when given), less those in `excluded` (judged for training queries) and their near-duplicates.

    A near-duplicate is a product whose title words (`schemas.splits.title_key`) are those of an excluded
    one: the same item under another id, which training read. The experiment and the evaluation both
    score this set, so they score the same products. Reads the catalog as a stream (titles first, then
    products until `sample`), so the driver never holds the catalog.
    """
    excluded_titles = (
        {
            title_key(row["title"] or "")
            for row in parquet_rows(products, ["product_id", "title"])
            if row["product_id"] in excluded
        }
        if excluded
        else set()
    )
    excluded_titles.discard("")  # a title of digits alone names no item
    chosen: list[dict[str, Any]] = []
    # An invalid product is passed over: the embed stage dead-letters it; it has no annotation to score.
    for product in valid_products(products):
        if sample is not None and len(chosen) >= sample:
            break
        if not product["aspects"] or product["product_id"] in excluded:
            continue
        if title_key(product["title"]) in excluded_titles:
            continue
        if rule is None or rule.holds(product):
            chosen.append(product)
    return chosen


def _describe(rule: HeldOutProducts | None, count: int) -> str:
    if rule is None:
        return (
            f"{count} products not judged for training (the model records no held-out products: "
            "pre-training may have read them)"
        )
    return (
        f"{count} held-out products ({rule.fraction:.0%} of the catalog by product-id hash, never trained on)"
    )


def _held_out_of_model(
    model_dir: str, products: str, queries: str, judgments: str, split: str, sample: int
) -> tuple[str, bool, list[dict[str, Any]]]:
    """Which products are scored, in words, whether the model provably never trained on them, and those
    products: every annotated product of a catalog none of whose products the model trained on
    (`never_trained_on`, by product id), else the model's held-out slice (`held_out_products`)."""
    path = Path(model_dir) / MANIFEST_FILE
    manifest = json.loads(path.read_text()) if path.is_file() else {}
    whole = held_out_products(products, None, set(), sample)
    if never_trained_on(model_dir, manifest, [product["product_id"] for product in whole]):
        described = (
            f"{len(whole)} products of a catalog the model never trained on (none of them is in the "
            "datasets it was trained on, compared by product id)"
        )
        return described, True, whole
    rule = HeldOutProducts.from_manifest(manifest)
    excluded = tuned_products(queries, judgments, split)
    chosen = held_out_products(products, rule, excluded, sample)
    # `madr adapt` fitted its confidence temperatures on a share of the held-out products: not scored.
    calibrated = HeldOutProducts.from_manifest({"held_out_products": manifest.get("calibrated_on_products")})
    if calibrated is not None:
        chosen = [product for product in chosen if not calibrated.holds(product)]
        less = f"less the {calibrated.fraction:.1%} that calibrated the confidences"
        return f"{_describe(rule, len(chosen))}, {less}", True, chosen
    return _describe(rule, len(chosen)), rule is not None, chosen


def measure_annotation_quality(
    model_dir: str,
    products: str,
    queries: str,
    judgments: str,
    split: str = "test",
    rule: AbstentionRule | None = None,
    sample: int = DEFAULT_SAMPLE,
    settings: ModelSettings | None = None,
) -> AnnotationQuality | None:
    """Accuracy of the model's aspect predictions, and coverage and precision of the values `rule` (default:
    `PredictionThreshold`'s, the values enrich and export-vertex act on) writes; None when the model
    predicts no aspects.

    With `settings` (an embed run's model flags: precision, runtime, device) the texts are encoded as
    that run encodes them, e.g. by its ONNX Runtime graph in int8, so the report describes the values the
    run writes, at that runtime's speed; without, by the torch model in fp32.
    """
    rule = rule or PredictionThreshold().abstention()
    # One load for both sides: the torch model, or the run's (its ONNX graphs made per side on first use).
    model = TextEncoder.load(model_dir) if settings is None else load_text_encoder(settings)
    encoder = model.encoder
    if getattr(encoder, "vocabulary", None) is None:
        return None

    described, unseen, chosen = _held_out_of_model(model_dir, products, queries, judgments, split, sample)
    annotated = aspect_accuracy(
        model,
        [text_for_model(p, encoder.config) for p in chosen],
        [_as_dict(p["aspects"]) for p in chosen],
        Side.DOCUMENT,
        rule,
    )
    if annotated is None:
        return None
    split_queries = [row for row in parquet_rows(queries) if row["split"] == split and row.get("aspects")]
    query_accuracy = aspect_accuracy(
        model,
        [q["text"] for q in split_queries],
        [_as_dict(q["aspects"]) for q in split_queries],
        Side.QUERY,
        rule,
    )
    return AnnotationQuality(annotated, query_accuracy, described, len(chosen), unseen=unseen)


def _as_dict(aspects: Any) -> Mapping[str, list[str]]:
    # Parquet gives a map as (key, values) pairs; validation gives a dict.
    return dict(aspects) if aspects else {}


def written_annotation_accuracy(
    model_dir: str,
    embeddings: str,
    products: str,
    queries: str,
    judgments: str,
    split: str = "test",
    sample: int = DEFAULT_SAMPLE,
) -> dict[str, tuple[float, int]]:
    """Accuracy@1 of the aspect values an embed run wrote, on the held-out products of
    `measure_annotation_quality`: {aspect: (accuracy, products scored)}.

    `measure_annotation_quality` scores the model itself (every logit, at the run's precision when given
    its settings); this scores the shards as written, so it also sees what the run left out. A value
    left out by the run (below its --min_confidence, or not stated) counts as a miss, and so does a
    product whose value is outside the vocabulary.
    """
    # The vocabulary and the tokenizer name the values; the weights are not needed (nor loaded).
    vocabulary = load_vocabulary(model_dir)
    if vocabulary is None:
        return {}
    tokenizer = load_tokenizer(model_dir)
    _, _, chosen = _held_out_of_model(model_dir, products, queries, judgments, split, sample)
    labels = {product["product_id"]: _as_dict(product["aspects"]) for product in chosen}
    hits: dict[str, int] = defaultdict(int)
    scored: dict[str, int] = defaultdict(int)
    table = read_parquet_table(embeddings, "embeddings", ["product_id", "aspect_values"])
    # Only the measured products' rows become Python objects: all 1M rows' maps took seconds.
    table = table.filter(pc.is_in(table["product_id"], value_set=pa.array(list(labels), pa.string())))
    for row in table.to_pylist():
        wanted = labels.get(row["product_id"])
        if wanted is None:
            continue
        written = dict(row["aspect_values"] or {})
        for aspect, values in wanted.items():
            classes = set(vocabulary.encode(aspect, list(values), tokenizer.tokenize)) - {UNSEEN}
            scored[aspect] += 1  # out of vocabulary too: no prediction can hit it (as in aspect_accuracy)
            if aspect in written:
                hits[aspect] += vocabulary.encode(aspect, [written[aspect]], tokenizer.tokenize)[0] in classes
    return {aspect: (hits[aspect] / scored[aspect], scored[aspect]) for aspect in scored}


def write_annotation_quality(config: EvaluateConfig, output: str) -> AnnotationQuality | None:
    """Aspect accuracy on unseen products, written to `output`/annotation_quality.json, when --products is
    given and the model predicts aspects (`madr evaluate`)."""
    opts, model_dir, products = config.evaluate, config.model.model, config.products
    if not products:
        return None
    quality = measure_annotation_quality(
        model_dir,
        products,
        opts.queries,
        opts.judgments,
        opts.split,
        config.threshold.abstention(),
        settings=config.model,  # at the run's precision and runtime: the values a night writes
    )
    if quality is None:
        LOGGER.info("%s predicts no aspects; no annotation quality to report", model_dir)
        return None
    if opts.embeddings:  # what the run wrote, at its precision: the model in torch is scored above
        written = written_annotation_accuracy(
            model_dir, opts.embeddings, products, opts.queries, opts.judgments, opts.split
        )
        quality = dataclasses.replace(quality, written={aspect: acc for aspect, (acc, _) in written.items()})
    with FileSystems.create(FileSystems.join(output, "annotation_quality.json")) as handle:
        handle.write(json.dumps(quality.to_dict(), indent=2).encode("utf-8"))
    return quality
