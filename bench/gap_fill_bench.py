"""Gap filling, honestly: hide known aspect values, let the shipped model fill them, count what is right.

On a fresh synthetic catalog (a seed and a size the model never saw), a seeded 30 % of the products'
known brand and color values (and category, which nearly every product has) is removed from the
catalog's `aspects`. The production path then runs: `madr embed` (Beam) annotates every product, and
`madr enrich` (Beam) fills each gap with the model's prediction at several min_confidence levels.
For each level and aspect: coverage (the share of hidden values that got a prediction) and precision
(the share of those predictions that equal a hidden value). The same shards also give the annotation
coverage of the catalog (rows with every aspect predicted) and Accuracy@1 against the annotations of
every product, the figure of the aspect targets.

    python -m bench.gap_fill_bench --model runs/demo/model
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from bench.common import report
from bench.support import command_line
from jobs.cli import parse_command
from model.aspects.vocabulary import UNSEEN, AspectVocabulary, normalise_value
from pipelines.embed.enrich import PREDICTION_COLUMNS, EnrichConfig, enrich_catalog
from pipelines.embed.stage import embed_catalog
from pipelines.io.parquet_reading import read_parquet_table
from pipelines.settings.options import PredictionThreshold
from product_data.synthetic import SyntheticConfig, generate_benchmark
from schemas import ECOMMERCE_ASPECTS

LEVELS = (0.0, 0.3, 0.5, 0.7, 0.9)


def hide_values(table: pa.Table, share: float, seed: int) -> tuple[pa.Table, dict[tuple[str, str], set[str]]]:
    """The catalog with `share` of each product's known aspects removed, and what was removed."""
    rng = np.random.default_rng(seed)
    rows, hidden = table.to_pylist(), {}
    for row in rows:
        aspects = dict(row["aspects"] or [])
        for aspect in ECOMMERCE_ASPECTS:
            if aspects.get(aspect) and rng.random() < share:
                hidden[(row["product_id"], aspect)] = {v.casefold() for v in aspects.pop(aspect)}
        row["aspects"] = aspects or None
    return pa.Table.from_pylist(rows, schema=table.schema), hidden


def annotation_figures(
    predictions: list[dict[str, Any]], truth: dict[str, dict[str, set[str]]], vocabulary: AspectVocabulary
) -> dict[str, Any]:
    """Rows annotated, and Accuracy@1 of the top value against every product's annotations.

    As in `pipelines.evaluate.judged_ranking.aspect_accuracy`, a product whose values are all outside
    the model's vocabulary (below its min count in the training catalog) is left out and counted: no
    class matches it.
    """
    annotated = sum(
        bool(row["aspect_values"]) and len(row["aspect_values"]) == len(ECOMMERCE_ASPECTS)
        for row in predictions
    )
    hits: dict[str, int] = defaultdict(int)
    counts: dict[str, int] = defaultdict(int)
    unknown: dict[str, int] = defaultdict(int)
    for row in predictions:
        values = dict(row["aspect_values"] or [])
        for aspect, wanted in truth.get(row["product_id"], {}).items():
            if aspect not in vocabulary.aspects:
                continue
            if all(vocabulary.values(aspect).id_of(normalise_value(v)) == UNSEEN for v in wanted):
                unknown[aspect] += 1
                continue
            counts[aspect] += 1
            hits[aspect] += values.get(aspect, "").casefold() in wanted
    return {
        "rows": len(predictions),
        "rows_annotated": annotated,
        "share_annotated": round(annotated / max(1, len(predictions)), 4),
        "accuracy_at_1": {a: round(hits[a] / counts[a], 4) for a in ECOMMERCE_ASPECTS if counts[a]},
        "annotated_products": dict(counts),
        "out_of_vocabulary": dict(unknown),
    }


def fill_figures(enriched: pa.Table, hidden: dict[tuple[str, str], set[str]]) -> dict[str, dict[str, Any]]:
    filled: dict[tuple[str, str], str] = {}
    for row in enriched.to_pylist():
        for aspect in row["aspects"]:
            if aspect["provenance"] == "predicted":
                filled[(row["product_id"], aspect["aspect"])] = aspect["values"][0].casefold()
    figures = {}
    for name in ECOMMERCE_ASPECTS:
        gaps = [key for key in hidden if key[1] == name]
        answered = [key for key in gaps if key in filled]
        right = sum(filled[key] in hidden[key] for key in answered)
        figures[name] = {
            "hidden": len(gaps),
            "filled": len(answered),
            "coverage": round(len(answered) / len(gaps), 4) if gaps else None,
            "precision": round(right / len(answered), 4) if answered else None,
        }
    return figures


def plot(levels: dict[str, dict[str, dict[str, Any]]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(5.5, 4))
    for name in ECOMMERCE_ASPECTS:
        points = [
            (v[name]["coverage"], v[name]["precision"], k) for k, v in levels.items() if v[name]["precision"]
        ]
        axis.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=name)
        for coverage, precision, level in points:
            axis.annotate(
                level, (coverage, precision), fontsize=7, xytext=(3, -9), textcoords="offset points"
            )
    axis.set_xlabel("coverage of the hidden values")
    axis.set_ylabel("precision of the filled values")
    axis.set_title("Gap filling at min_confidence levels")
    axis.grid(alpha=0.3)
    axis.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=120)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default="runs/demo/model", help="Trained model directory (make demo's)")
    parser.add_argument("--seed", type=int, default=2027, help="Seed of the fresh catalog and of the hiding")
    parser.add_argument("--num_products", type=int, default=0, help="Catalog size (0: drawn from the seed)")
    parser.add_argument("--hide", type=float, default=0.3, help="Share of known values hidden")
    parser.add_argument("--plot", default="docs/gap_fill.png", help="Where the precision/coverage plot goes")
    parser.add_argument("--quick", action="store_true", help="A 600-product catalog")
    args = parser.parse_args(argv)
    size = args.num_products or (
        600 if args.quick else int(np.random.default_rng(args.seed).integers(2000, 5000))
    )
    work = Path(tempfile.mkdtemp(prefix="gap-fill-"))
    try:
        generate_benchmark(
            SyntheticConfig(num_products=size, num_queries=30, seed=args.seed), str(work / "data")
        )
        full = pq.read_table(work / "data" / "products")
        truth = {
            row["product_id"]: {a: {v.casefold() for v in values} for a, values in (row["aspects"] or [])}
            for row in full.select(["product_id", "aspects"]).to_pylist()
        }
        hidden_table, hidden = hide_values(full, args.hide, args.seed)
        (work / "catalog").mkdir()
        pq.write_table(hidden_table, work / "catalog" / "products.parquet")
        catalog = str(work / "catalog" / "products.parquet")
        embed = ["--products", catalog, "--model", args.model, "--output", str(work / "embeddings")]
        counts = embed_catalog(*parse_command("embed", embed))
        predictions = read_parquet_table(
            str(work / "embeddings"), "embeddings", PREDICTION_COLUMNS
        ).to_pylist()
        vocabulary = AspectVocabulary.load(Path(args.model) / "aspect_vocabulary.json")
        annotations = annotation_figures(predictions, truth, vocabulary)
        levels = {}
        for level in LEVELS:
            output = work / f"enriched-{level}"
            config = EnrichConfig(
                products=catalog,
                embeddings=str(work / "embeddings"),
                output=str(output),
                threshold=PredictionThreshold(min_confidence=level),
            )
            enrich_catalog(config)
            enriched = pa.concat_tables(pq.read_table(f) for f in sorted(output.glob("enriched-*.parquet")))
            levels[f"{level:.1f}"] = fill_figures(enriched, hidden)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(
        f"\n{'min_confidence':<15}"
        + "".join(f"{a + ' coverage':>18}{a + ' precision':>19}" for a in ECOMMERCE_ASPECTS)
    )
    for level, figures in levels.items():
        cells = "".join(
            f"{_cell(figures[a]['coverage']):>18}{_cell(figures[a]['precision']):>19}"
            for a in ECOMMERCE_ASPECTS
        )
        print(f"{level:<15}{cells}")
    if args.plot and not args.quick:
        plot(levels, Path(args.plot))
    config = {
        "model": args.model,
        "seed": args.seed,
        "products": size,
        "hidden_share": args.hide,
        "command": command_line("bench.gap_fill_bench", argv),
    }
    figures = {"embed_counts": counts, "annotations": annotations, "fill": levels}
    report("gap_fill_quick" if args.quick else "gap_fill", config, figures)
    return figures


def _cell(value: float | None) -> str:
    return "–" if value is None else f"{value:.3f}"


if __name__ == "__main__":
    main()
