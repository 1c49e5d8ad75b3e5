"""`madr demo`: the whole job, end to end, on the embedded default data.

generate -> pre-train MtBERT on the catalog (aspect prediction without MLM, a held-out share never
read) -> fine-tune it, average it half way back to the backbone and refit its aspect heads
(pipelines/train/shipped_recipe.py) -> embed and annotate (Beam) -> fill the catalog's aspect gaps (Beam) ->
build the ScaNN index -> evaluate (Beam) retrieval beside the backbone used zero-shot, and the
annotations on the held-out products -> a hand-written store export the model never saw: evaluate
it there, `madr adapt` it without judgments, evaluate again.

The variant is MtBERT because it is the aspect-aware variant with the best Recall@100 of the
experiment in docs/RESULTS.md (0.861 against BiBERT's 0.811, the best of all variants): the one
model both retrieves and annotates, so no second model pass is needed.
"""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from jobs.adapt import evaluate_model
from pipelines.embed.enrich import PREDICTION_COLUMNS, EnrichConfig, enrich_catalog, format_counts
from pipelines.embed.stage import EmbedConfig, embed_catalog
from pipelines.evaluate.config import EvaluateConfig
from pipelines.evaluate.stage import evaluate_retrieval
from pipelines.index.config import IndexBuildConfig
from pipelines.index.partitioned import build_partitioned
from pipelines.io.parquet_reading import read_parquet_table
from pipelines.layout import DatasetLayout, RunLayout
from pipelines.report.page import write_report
from pipelines.settings.depth import check_depth, retrieval_depth
from pipelines.settings.options import EmbedSettings, EvaluateSettings, IndexSettings, ModelSettings
from pipelines.settings.stage_config import nested, setting
from pipelines.stage_runs import StageRunner
from pipelines.train.adapt import AdaptJob, run_adapt
from pipelines.train.shipped_recipe import ShippedRecipe, adapt_loop, train_shipped_model
from product_data.ingest.export_folder import ingest_export_folder
from product_data.synthetic import SyntheticConfig, generate_benchmark
from schemas import ECOMMERCE_ASPECTS
from schemas.splits import HeldOutProducts

ANNOTATED_EXAMPLES = 3
ADAPT_DEMO_STEPS = 20


# What the README quotes of the demo's output (`write_excerpt`), in runs/demo/excerpts/.
EXCERPTS_FOLDER = "excerpts"
# The sections of the evaluation's tables the README's results excerpt quotes.
QUOTED_SECTIONS = (
    "metric ",
    "Recall lost to the index",
    "Against the backbone used zero-shot",
    "Against bm25+zero-shot",
    "Aspect annotations",
)


def _searcher_name(result: dict[str, Any]) -> str:
    """Which searcher produced the printed metrics: `--searcher auto` records its choice."""
    choice = (result.get("searcher_choice") or {}).get("choice")
    names = {"ann": "ScaNN index, chosen by measurement", "exact": "exact search, chosen by measurement"}
    return names.get(choice, "ScaNN index")


@dataclass(frozen=True)
class DemoConfig:
    """`madr demo`: the run folder, the synthetic benchmark's size, the shipped recipe, the retrieval
    depth, and the store export it adapts to."""

    output: str = setting(
        "runs/demo", "Run folder (data/, model/, embeddings/, index/, eval/)", aliases=("--out",)
    )
    num_products: int = setting(
        3_000,
        "Synthetic catalog size: 3,000 keeps a first `make demo` (install included) under 10 minutes "
        "on 2 cores without bfloat16; the benchmark (bench/zero_shot_bench.py) runs 10,000",
    )
    num_queries: int = setting(300, "Synthetic queries over all splits (at most one per 10 products)")
    test_fraction: float = setting(
        0.6,
        "Share of the queries in the test split (180 of 300 by default; the benchmark's 600 of 1,000 "
        "make a 2-point Recall@100 difference significant at p < 0.01, per-query differences having an SD "
        "of about 0.18)",
    )
    store_export: str = setting(
        "examples/store_export",
        "A store export folder (products, queries, judgments, mappings) the model never saw: the demo "
        "evaluates the model there and adapts it with `madr adapt`; empty skips it",
    )
    recipe: ShippedRecipe = nested(ShippedRecipe)
    depth: int = retrieval_depth()

    def __post_init__(self) -> None:
        check_depth(self.depth)


def annotated_examples(catalog: str, embeddings: str, count: int, held_out: HeldOutProducts) -> list[str]:
    """The first `count` held-out products: title, what `madr embed` predicted, and the catalog's aspects."""
    predictions = read_parquet_table(embeddings, "embeddings", PREDICTION_COLUMNS).to_pylist()
    chosen = [row for row in predictions if held_out.contains(row["product_id"])][:count]
    wanted = {row["product_id"] for row in chosen}
    products = {
        row["product_id"]: row
        for row in pq.read_table(catalog, columns=["product_id", "title", "aspects"]).to_pylist()
        if row["product_id"] in wanted
    }
    lines = []
    for row in chosen:
        product = products.get(row["product_id"], {})
        confidences = dict(row["aspect_confidences"] or [])
        predicted = ", ".join(f"{a}={v} ({confidences[a]:.2f})" for a, v in row["aspect_values"] or [])
        known = ", ".join(f"{a}={'/'.join(v)}" for a, v in product.get("aspects") or [])
        lines.append(f"   - {product.get('title', row['product_id'])}")
        lines.append(f"       predicted: {predicted or '(none)'}")
        lines.append(f"       catalog:   {known or '(none)'}")
    return lines


def write_excerpt(run_root: str, name: str, text: str) -> None:
    """What the README quotes of the demo's output, as the demo printed it: `bench.readme_excerpts`
    puts it into the README (and checks the README against a fresh run)."""
    folder = Path(run_root) / EXCERPTS_FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.txt").write_text(text.rstrip("\n") + "\n")


def results_excerpt(table: str) -> str:
    """The sections of the evaluation's printed tables that the README quotes, in their order: a section is
    a paragraph, and a comparison's heading keeps the table paragraph under it."""
    sections: list[list[str]] = []
    for paragraph in table.split("\n\n"):
        last = sections[-1] if sections else []
        # A comparison's heading (it defines "delta = B − A") and its table are two paragraphs: one section.
        if len(last) == 1 and "delta = B − A" in last[0] and paragraph.startswith("metric "):
            last.append(paragraph)
        else:
            sections.append([paragraph])
    quoted = [section for section in sections if section[0].startswith(QUOTED_SECTIONS)]
    return "\n\n".join("\n\n".join(section) for section in quoted)


def run_demo(config: DemoConfig) -> dict[str, Any]:
    run = RunLayout(config.output)
    data = DatasetLayout(str(Path(config.output) / "data"))
    for stale in ("data", "pretrained", "model", "embeddings", "enriched", "index", "eval", EXCERPTS_FOLDER):
        shutil.rmtree(Path(config.output) / stale, ignore_errors=True)
    timings: dict[str, float] = {}
    stages = StageRunner(timings, announce="\n== {name}", report="   {name}: {seconds:.1f}s")
    started = time.perf_counter()

    synthetic = SyntheticConfig(
        num_products=config.num_products,
        num_queries=config.num_queries,
        seed=config.recipe.seed,
        valid_fraction=0.1,
        test_fraction=config.test_fraction,
    )
    summary = stages.run("generate", lambda: generate_benchmark(synthetic, data.root))
    print(summary.format())

    trained = train_shipped_model(data.root, config.output, config.recipe, stages.run)
    if trained.pretraining is not None:
        done = trained.pretraining
        print(f"   {done.steps} steps; aspect loss {done.initial.aspect:.3f} -> {done.final.aspect:.3f}")
    report = trained.training
    print(
        f"   {report.steps} steps, final train loss {report.final_train_loss:.4f}, "
        f"best validation MRR@10 {report.best_valid_metric}"
    )

    embed = EmbedConfig(
        model=ModelSettings(run.model), embed=EmbedSettings(data.products), output=run.embeddings
    )
    counts = stages.run("embed", lambda: embed_catalog(embed))
    print("   " + "  ".join(f"{name}={value}" for name, value in counts.items()))

    enriched = str(Path(config.output) / "enriched")
    filled = stages.run(
        "enrich",
        lambda: enrich_catalog(
            EnrichConfig(products=data.products, embeddings=run.embeddings, output=enriched)
        ),
    )
    print("   " + format_counts(filled, ECOMMERCE_ASPECTS).replace("\n", "\n   "))
    catalog = str(Path(data.root) / "products")
    examples = annotated_examples(
        catalog, run.embeddings, ANNOTATED_EXAMPLES, HeldOutProducts(config.recipe.held_out_fraction)
    )
    print(f"\n   {len(examples) // 3} products pre-training never read, as `madr embed` annotated them:")
    print("\n".join(examples))
    write_excerpt(config.output, "annotated", "\n".join(examples))

    # With the catalog, the artifact also carries BM25, which `madr search` fuses with the dense ranking.
    index = IndexBuildConfig(
        embeddings=run.embeddings, output=run.index, index=IndexSettings(depth=config.depth), products=catalog
    )
    built = stages.run("build-index", lambda: build_partitioned(index))
    print(f"   {built.count} x {built.dimension} vectors; {built.config}")

    evaluate = EvaluateConfig(
        model=ModelSettings(run.model),
        evaluate=EvaluateSettings(
            queries=data.queries,
            judgments=data.judgments,
            index=run.index,
            embeddings=run.embeddings,
            depth=config.depth,
            # auto: time the index and exact search on a sample at this depth and keep the faster one
            # whose recall is within 1 % of exact; both are still run and reported.
            searcher="auto",
        ),
        output=run.evaluation,
        # The catalog too: the annotations are scored on the products pre-training held out.
        products=data.products,
    )
    # With both the index and the embeddings, the stage also reports the recall the index loses, and
    # with the catalog the backbone used zero-shot is evaluated beside the model.
    result = stages.run("evaluate", lambda: evaluate_retrieval(evaluate))
    print(
        f"\n== Results on {result['counts']['queries_scored']} test queries "
        f"({_searcher_name(result)}, depth {config.depth} capped at {built.count} products)\n"
    )
    print(result["table"])
    store = adapt_to_store_export(config, stages) if config.store_export else None
    write_excerpt(
        config.output,
        "results",
        "\n\n".join([results_excerpt(result["table"]), *([store["text"]] if store else [])]),
    )
    total = time.perf_counter() - started
    print("\nTimings: " + ", ".join(f"{name} {seconds:.0f}s" for name, seconds in timings.items()))
    print(f"Total wall time: {total:.0f}s. Outputs in {run.root}/ (metrics: {run.evaluation}/metrics.json)")
    report = write_report(config.output)
    print(f"Report: {report} (one HTML page: open it in a browser; `madr report --root ROOT` for a nightly)")
    return {
        "evaluation": result,
        "store": store,
        "timings": timings,
        "total_seconds": total,
        "report": report,
    }


def store_lines(evaluated: dict[str, Any]) -> list[str]:
    """Per metric, the model's mean and each peer's (zero-shot, BM25, the fused rows) with the paired
    test's p-value ("n/a" where every query ties, as BM25 + the model and the model do at a full R@100)."""
    peers = {"zero-shot": evaluated["zero_shot"], **((evaluated["lexical"] or {}).get("systems") or {})}
    lines = []
    for metric in ("recall@100", "ndcg@10"):
        own = evaluated["zero_shot"]["metrics"][metric]["mean_b"]
        cells = []
        for peer, compared in peers.items():
            row = compared["metrics"][metric]
            pvalue = "n/a" if row["pvalue"] is None else f"{row['pvalue']:.2g}"
            cells.append(f"{peer} {row['mean_a']:.3f} (p {pvalue})")
        lines.append(f"{metric} {own:.3f}; {', '.join(cells)}")
    return lines


def adapt_to_store_export(config: DemoConfig, stages: StageRunner) -> dict[str, Any] | None:
    """A catalog the model never saw: the shipped model as it is, then `madr adapt` (no judgments used),
    each against the backbone used zero-shot on the store's own judged queries."""
    source = Path(config.store_export)
    if not source.is_dir():
        print(f"\n(no store export at {source}: the adapt step is skipped)")
        return None
    root = Path(config.output) / "store"
    store = DatasetLayout(str(root / "data"))
    stages.run("ingest store", lambda: ingest_export_folder(source, store.root, overwrite=True))
    shipped = stages.run(
        "evaluate on store",
        lambda: evaluate_model(str(Path(config.output) / "model"), store, root / "shipped", True),
    )
    job = AdaptJob(
        dataset=store.root,
        output=str(root / "adapted"),
        max_document_length=config.recipe.max_document_length,
        # The demo's budget: 20 steps (under a minute here) instead of the command's 100;
        # bench/zero_shot_bench.py measures the command's defaults.
        queries_per_product=1,
        min_steps=ADAPT_DEMO_STEPS,
        overwrite=True,
    )
    loop = adapt_loop(config.recipe.seed, config.recipe.pretrain_precision)
    report = stages.run("adapt", lambda: run_adapt(job, loop))
    adapted = stages.run(
        "evaluate adapted", lambda: evaluate_model(str(report.model_dir), store, root / "adapted-eval", True)
    )
    print(f"\n== A store export the model never saw ({source}): `madr adapt --data {store.root}`")
    print("   " + report.format().replace("\n", "\n   "))
    heading = f"== A store export the model never saw ({source}): `madr adapt --data {store.root}`"
    lines = [
        f"   {name}: {line}"
        for name, found in (("shipped model, not adapted", shipped), ("adapted", adapted))
        for line in store_lines(found)
    ]
    print("\n".join(lines))
    text = "\n".join([heading, *lines])
    return {"shipped": shipped, "adapted": adapted, "adapt": report, "text": text}
