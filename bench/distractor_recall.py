"""Recall@1k / @10k where they discriminate: the experiment's judged queries over its catalog and distractors.

At 20,000 products every variant reaches Recall@10k >= 0.99 (10,000 is half the catalog); madral-kdd22
reports it over a production catalog, where 10,000 is a small share. This adds `--distractors` products
to the experiment's catalog and retrieves its test queries over both:

    python -m bench.distractor_recall --experiment runs/experiment --variants zero-shot,bibert,mtbert
    python -m bench.distractor_recall --experiment runs/experiment --variants zero-shot,bibert --shipped
    python -m bench.distractor_recall --quick           # 1,500 + 3,000 products, a tiny random model

The distractors come from the same generator with another seed (`--distractor_seed`): realistic products
of the same taxonomy and brands, with their own popularity, and **unjudged**: a distractor that would in
truth satisfy a query counts as a miss, as an unjudged product does in any offline evaluation. Their ids
are prefixed so that none collides with a judged product's.

Per variant, through the production path (`embed_catalog`, `evaluate_retrieval`, exact search): the
union catalog is embedded once (int8 by default: products and queries encoded alike), the experiment's
catalog alone is then embedded reusing those rows by content hash (`--previous`: nothing encoded twice),
and the test queries are evaluated over each. `--shipped` adds the model `madr demo` ships, trained by
its recipe (`pipelines.train.shipped_recipe`) on the experiment's dataset into EXPERIMENT/shipped. Prints
R@100 / R@1k /
R@10k with and without the distractors; saves bench/results/distractor_recall[_quick].json. Embeddings
stay in `--work` between runs, one folder per variant and model digest. `--add` adds a run's variants to
the saved file instead of replacing it (zero-shot in both runs, retrieving alike; Holm over all of them):

    python -m bench.distractor_recall --experiment runs/experiment --variants zero-shot,uhd --add

A sparse model (UHD-BERT) is retrieved as `madr experiment` retrieves it, through its binarized inverted
index (`pipelines.evaluate.sparse`; fp32 torch encoding, `--precision` does not apply), over the same
union and catalog; its indexes stay in its `--work` folder in the same way.
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from bench.common import RESULTS, report, table
from bench.support import command_line, shared_machine_note, tiny_model

METRICS = ("recall@100", "recall@1000", "recall@10000")
PREFIX = "distractor-"
UNION = "union-embeddings"
BASELINE = "zero-shot"  # each variant's differences with distractors are tested against it


def distractor_catalog(folder: Path, products: int, seed: int) -> Path:
    """`products` generator products with seed `seed`, ids prefixed with `PREFIX`, as Parquet in `folder`."""
    from product_data.synthetic import SyntheticConfig, generate_benchmark

    target = folder / "products"
    if (folder / "done").is_file():
        return target
    generated = folder / "generated"
    # The generator plans queries too; a few suffice, they are not used.
    queries = max(1, min(100, products // 30))
    generate_benchmark(SyntheticConfig(num_products=products, num_queries=queries, seed=seed), str(generated))
    target.mkdir(parents=True, exist_ok=True)
    for shard in sorted((generated / "products").glob("*.parquet")):
        rows = pq.read_table(shard)
        ids = pc.binary_join_element_wise(pa.scalar(PREFIX), rows.column("product_id"), "")
        rows = rows.set_column(rows.schema.get_field_index("product_id"), "product_id", ids)
        pq.write_table(rows, target / f"distractors-{shard.name}", row_group_size=8_192)
    (folder / "done").write_text(json.dumps({"products": products, "seed": seed}) + "\n")
    return target


def union_catalog(folder: Path, catalog: Path, distractors: Path) -> Path:
    """A folder of links to the catalog's and the distractors' Parquet files: one glob for the embed stage."""
    union = folder / "union"
    union.mkdir(parents=True, exist_ok=True)
    for source, tag in ((catalog, "catalog"), (distractors, "distractors")):
        for shard in sorted(source.glob("*.parquet")):
            link = union / f"{tag}-{shard.name}"
            if not link.exists():
                link.symlink_to(shard.resolve())
    overlap = set(_ids(catalog)) & set(_ids(distractors))
    if overlap:
        raise ValueError(f"{len(overlap)} distractor ids are catalog ids, e.g. {sorted(overlap)[:3]}")
    return union


def intent_matches(queries: Path, products: Path) -> list[int]:
    """Per test query that names aspects, how many of `products` carry each aspect it names with one of its
    values: products as relevant to it as a judged one, by the generator's own relevance (a distractor
    among them is relevant and unjudged)."""
    index: dict[tuple[str, str], set[int]] = {}
    for row, aspects in enumerate(pq.read_table(products, columns=["aspects"]).column(0).to_pylist()):
        for name, values in aspects or []:
            for value in values:
                index.setdefault((name, value), set()).add(row)
    counts = []
    for query in pq.read_table(queries).to_pylist():
        if query["split"] != "test" or not query["aspects"]:
            continue
        rows = [
            set().union(*(index.get((name, value), set()) for value in values))
            for name, values in query["aspects"]
        ]
        counts.append(len(set.intersection(*rows)))
    return counts


def _model_digest(model: Path) -> str:
    from schemas.manifest import FILES_DIGEST, read_manifest

    return read_manifest(model, "madr-model", fix="train it with `madr experiment`")[FILES_DIGEST]


def _ids(folder: Path) -> list[str]:
    return pq.read_table(folder, columns=["product_id"]).column(0).to_pylist()


def shipped_model(data: Path, folder: Path, quick: bool) -> Path:
    """The shipped recipe's model trained on `data` into `folder` (once: a finished one is reused)."""
    from pipelines.train.shipped_recipe import ShippedRecipe, train_shipped_model

    model = folder / "model"
    if not (model / "manifest.json").is_file():
        train_shipped_model(str(data), folder, ShippedRecipe(**({"pretrain_steps": 20} if quick else {})))
    return model


def evaluate_variant(
    model: Path, data: Path, union: Path, work: Path, precision: str
) -> dict[str, dict[str, float]]:
    """R@k of the test queries over the union and over the catalog alone, for one model."""
    from pipelines.embed.stage import EmbedConfig, embed_catalog
    from pipelines.evaluate.config import EvaluateConfig
    from pipelines.evaluate.searchers import SearcherSpec
    from pipelines.evaluate.stage import evaluate_retrieval
    from pipelines.settings.options import EmbedSettings, EvaluateSettings, ModelSettings

    settings = ModelSettings(str(model), precision=precision)
    figures: dict[str, dict[str, float]] = {}
    plans = (
        ("with distractors", union, None, work / UNION),
        ("catalog alone", data / "products", work / UNION, work / "catalog-embeddings"),
    )
    for name, products, previous, embeddings in plans:
        built = None
        if not (embeddings / "manifest.json").is_file():
            started = time.perf_counter()
            embed = EmbedSettings(str(products), previous=str(previous) if previous else None)
            embed_catalog(EmbedConfig(model=settings, embed=embed, output=str(embeddings)))
            built = time.perf_counter() - started
        output = embeddings.parent / f"eval-{embeddings.name}"
        evaluate = EvaluateSettings(
            queries=str(data / "queries.parquet"),
            judgments=str(data / "judgments.parquet"),
            embeddings=str(embeddings),
            searcher="exact",
            metrics=",".join(METRICS),
            zero_shot="false",
        )
        evaluate_retrieval(
            EvaluateConfig(model=settings, evaluate=evaluate, output=str(output), overwrite=True)
        )
        metrics = json.loads((output / "metrics.json").read_text())["metrics"]
        figures[name] = {
            **{metric: metrics[metric]["mean"] for metric in METRICS if metric in metrics},
            "products": SearcherSpec("exact", str(embeddings)).corpus_size(),
            "embed_s": _kept_cost(embeddings.parent / f"{embeddings.name}.seconds", built),
        }
    return figures


def _kept_cost(file: Path, built_s: float | None) -> float | None:
    """What building a reused artifact (embeddings, indexes) cost: `built_s` when this run built it,
    kept in `file` beside it, so that a later run reusing it reports that cost, not 0 s."""
    if built_s:
        file.write_text(f"{built_s:.1f}\n")
    return float(file.read_text()) if file.is_file() else None


def dataset_view(root: Path, products: Path, data: Path) -> Path:
    """A dataset folder at `root` (`DatasetLayout`'s names) of links: `products`' Parquet files with the
    experiment's queries and judgments. The sparse path reads products the way `madr experiment` does."""
    (root / "products").mkdir(parents=True, exist_ok=True)
    links = [
        (root / "products" / f"products-{shard.name}", shard) for shard in sorted(products.glob("*.parquet"))
    ]
    links += [(root / name, data / name) for name in ("queries.parquet", "judgments.parquet")]
    for link, target in links:
        if not link.exists():
            link.symlink_to(target.resolve())
    return root


def evaluate_sparse_variant(model: Path, data: Path, union: Path, work: Path) -> dict[str, dict[str, float]]:
    """`evaluate_variant` for UHD-BERT: R@k through its binarized inverted index, the index its paper
    deploys (uhd-bert §4.3) and `madr experiment` reports, over the union and over the catalog alone.
    The weighted index is built beside it (`run_sparse_evaluation` builds both from one encoding)."""
    from pipelines.evaluate.sparse import PRIMARY, run_sparse_evaluation
    from pipelines.layout import DatasetLayout

    figures: dict[str, dict[str, float]] = {}
    for name, products, slug in (
        ("with distractors", union, UNION),
        ("catalog alone", data / "products", "catalog-embeddings"),
    ):
        view = DatasetLayout(str(dataset_view(work / f"data-{slug}", products, data)))
        # Indexes already built (their manifests) are kept: only the test queries are searched again.
        report = run_sparse_evaluation(view, model, work / f"eval-{slug}", METRICS)
        index = report["indexes"][PRIMARY]
        figures[name] = {
            **{metric: index["means"][metric] for metric in METRICS if metric in index["means"]},
            "products": index["products"],
            "embed_s": _kept_cost(work / f"{slug}.seconds", report["build_seconds"]),  # 0.0: reused
        }
    return figures


def against_baseline(evaluations: dict[str, Path], baseline: str) -> dict[str, dict[str, dict[str, float]]]:
    """Per variant and metric: the mean per-query difference from `baseline` and its paired t-test's p
    (`madr compare`'s comparison), raw and Holm-adjusted over every (variant, metric) compared.
    `evaluations`: each variant's evaluate output folder, over the same test queries."""
    from evaluation import holm_adjusted
    from jobs.compare import compare_runs

    compared: dict[tuple[str, str], tuple[float, float]] = {}
    for variant, folder in evaluations.items():
        if variant == baseline:
            continue
        report = compare_runs(str(evaluations[baseline]), str(folder))
        if not report.queries_a == report.queries_b == report.common_queries:
            raise ValueError(f"{variant} and {baseline} were evaluated over different queries")
        for comparison in report.metrics:
            if comparison.metric in METRICS:
                compared[variant, comparison.metric] = (comparison.delta, comparison.pvalue)
    holm = holm_adjusted({key: p for key, (_, p) in compared.items()})
    out: dict[str, dict[str, dict[str, float]]] = {}
    for (variant, metric), (delta, p) in compared.items():
        out.setdefault(variant, {})[metric] = {"delta": delta, "p": p, "p_holm": holm[variant, metric]}
    return out


COMPARED = f"vs {BASELINE}, with distractors"


def merged_figures(saved: dict[str, Any], added: dict[str, Any]) -> dict[str, Any]:
    """`added` (a run's figures) joined to `saved` (an earlier run's): a variant in both takes the added
    figures, and every comparison with the baseline is Holm-adjusted again over all of them, as if made in
    one run. Both runs must have compared against the same baseline retrieval (equal R@k with and without
    the distractors): otherwise the differences would be against two baselines, and it is refused."""
    from evaluation import holm_adjusted

    def retrieval(figures: dict[str, Any]) -> dict[str, Any]:
        return {name: {m: f.get(m) for m in (*METRICS, "products")} for name, f in figures[BASELINE].items()}

    if BASELINE not in saved or BASELINE not in added or retrieval(saved) != retrieval(added):
        raise ValueError(
            f"{BASELINE} retrieves differently in the saved run and this one (or is missing from one): "
            f"their differences cannot share one Holm family; run every variant again in one run instead"
        )
    compared = {**saved.get(COMPARED, {}), **added.get(COMPARED, {})}
    holm = holm_adjusted({(v, m): c["p"] for v, by_metric in compared.items() for m, c in by_metric.items()})
    variants = {k: v for k, v in {**saved, **added}.items() if k != COMPARED}
    return {
        **variants,
        COMPARED: {
            v: {m: {**c, "p_holm": holm[v, m]} for m, c in by_metric.items()}
            for v, by_metric in compared.items()
        },
    }


def recall_table(figures: dict[str, Any]) -> str:
    """R@k per model, with the distractors and over the catalog alone (docs/RESULTS.md copies it)."""
    rows = [
        [variant, name, f"{f['products']:,}", *(f"{f[m]:.4f}" if m in f else "–" for m in METRICS)]
        for variant, by_setting in figures.items()
        if variant != COMPARED
        for name, f in by_setting.items()
    ]
    return table(["variant", "catalog", "products", "R@100", "R@1k", "R@10k"], rows)


def delta_table(figures: dict[str, Any]) -> str:
    """Each model's difference from zero-shot with the distractors, with its Holm-adjusted p."""
    rows = [
        [variant, *(f"{c[m]['delta']:+.4f} (p {c[m]['p_holm']:.2g})" for m in METRICS)]
        for variant, c in figures.get(COMPARED, {}).items()
    ]
    return table([f"variant − {BASELINE}, with distractors", "R@100", "R@1k", "R@10k"], rows)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--experiment", default="runs/experiment", help="A `madr experiment` output folder")
    parser.add_argument(
        "--variants", default="zero-shot,bibert,mtbert", help="Comma-separated variants of that experiment"
    )
    parser.add_argument("--distractors", type=int, default=500_000, help="Distractor products added")
    parser.add_argument("--distractor_seed", type=int, default=1013, help="The generator's seed for them")
    parser.add_argument("--precision", default="int8", help="Inference precision of products and queries")
    parser.add_argument("--work", default="runs/distractors", help="Distractor catalog and embeddings")
    parser.add_argument(
        "--shipped",
        action="store_true",
        help="Also the shipped model, trained by its recipe on the experiment's dataset (EXPERIMENT/shipped)",
    )
    parser.add_argument("--quick", action="store_true", help="1,500 + 3,000 products, a tiny random model")
    parser.add_argument(
        "--add",
        action="store_true",
        help="Add this run's variants to the saved results file (it must include zero-shot, retrieving as "
        "it did there): comparisons Holm-adjusted again over all variants, its earlier commands kept",
    )
    args = parser.parse_args(argv)
    from pipelines.evaluate.sparse import is_sparse_model

    # Embedding 520,000 products takes most of an hour a model here: the stages' progress lines show it.
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    work = Path(args.work) / ("quick" if args.quick else "")
    work.mkdir(parents=True, exist_ok=True)
    if args.quick:
        from product_data.synthetic import SyntheticConfig, generate_benchmark

        args.distractors, data = 3_000, work / "data"
        if not (data / "manifest.json").is_file():
            generate_benchmark(SyntheticConfig(num_products=1_500, num_queries=120, seed=13), str(data))
        # Made once: the work folder's embeddings are this model's.
        tiny = work / "tiny-model"
        models = {"tiny": tiny if (tiny / "manifest.json").is_file() else tiny_model(tiny, 32, "1")}
    else:
        data = Path(args.experiment) / "data"
        models = {variant: Path(args.experiment) / variant / "model" for variant in args.variants.split(",")}
    missing = [str(path) for path in models.values() if not (path / "manifest.json").is_file()]
    if missing or not (data / "manifest.json").is_file():
        raise SystemExit(
            f"not found: {', '.join(missing) or data}: run `madr experiment` first, or give --experiment"
        )
    if args.shipped:
        models["shipped"] = shipped_model(data, data.parent / "shipped", quick=args.quick)
    distractors = distractor_catalog(
        work / f"distractors-{args.distractors}-{args.distractor_seed}",
        args.distractors,
        args.distractor_seed,
    )
    union = union_catalog(distractors.parent, data / "products", distractors)
    # Named by the model's digest too: a model trained again under the same name is embedded again.
    folders = {
        variant: work / f"{variant}-{args.distractors}-{_model_digest(model)[:12]}"
        for variant, model in models.items()
    }
    figures: dict[str, Any] = {
        variant: (
            evaluate_sparse_variant(model, data, union, folders[variant])
            if is_sparse_model(model)
            else evaluate_variant(model, data, union, folders[variant], args.precision)
        )
        for variant, model in models.items()
    }
    if BASELINE in models and len(models) > 1:
        evaluations = {variant: folder / f"eval-{UNION}" for variant, folder in folders.items()}
        figures[COMPARED] = against_baseline(evaluations, BASELINE)
    matches = {
        name: intent_matches(data / "queries.parquet", products)
        for name, products in (("catalog", data / "products"), ("distractors", distractors))
    }
    config = {
        "command": command_line("bench.distractor_recall", argv),
        "experiment": str(data.parent),
        "distractors": args.distractors,
        "distractor_seed": args.distractor_seed,
        "precision": args.precision,
        "distractors_are": "generator products with another seed, unjudged (a relevant one counts as a miss)",
        "test_queries_naming_aspects": len(matches["catalog"]),
        "products_matching_a_query_intent_median": {k: float(np.median(v)) for k, v in matches.items()},
        "products_matching_a_query_intent_mean": {k: round(float(np.mean(v)), 1) for k, v in matches.items()},
        **shared_machine_note(),
    }
    name = "distractor_recall_quick" if args.quick else "distractor_recall"
    if args.add:
        saved = json.loads((RESULTS / f"{name}.json").read_text())
        figures = merged_figures(saved["figures"], figures)
        config = {**saved["config"], "added": [*saved["config"].get("added", []), config]}
    print(recall_table(figures))
    print(delta_table(figures))
    median = config["products_matching_a_query_intent_median"]
    print(
        f"A test query's aspects are matched by a median {median['catalog']:.0f} catalog products and "
        f"{median['distractors']:.0f} distractors (unjudged: each counts as a miss when retrieved)"
    )
    report(name, config, figures)
    return figures


if __name__ == "__main__":
    main()
