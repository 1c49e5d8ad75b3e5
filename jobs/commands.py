"""The command table of `madr`: each command registered once, with its purpose, its flags and its run.

A `Command` is a name, the one line `madr --help` shows, the description of `madr NAME --help`, a
function that adds its flags to a parser and a function that runs it. Each command's run registers
it with the `@command(...)` above it (its docstring is the description); `COMMANDS` keeps them in
the order of `madr --help`. `jobs.cli` builds the parser from `COMMANDS` (each subparser
carries its run as `set_defaults(run=...)`) and reports what a run raises. Adding a command means
adding one decorated function here.

A run is called as ``run(args, beam_args, stage_argv)`` (`jobs.command_table`, which holds the
`Command` type, the `COMMANDS` registry and the decorator).
"""

from __future__ import annotations

import argparse
import json

from apache_beam.options.pipeline_options import PipelineOptions

from jobs import explain as explain_cli
from jobs.adapt import add_adapt_arguments, run_adapt_job
from jobs.command_table import BEAM_NOTE, COMMANDS, Command, command
from jobs.compare import compare_runs
from jobs.demo import add_demo_arguments, run_demo
from jobs.experiment import add_experiment_arguments, config_from_args, run_experiment
from jobs.ingest_cli import add_ingest_arguments, run_ingest
from jobs.nightly import run_nightly
from jobs.nightly_args import add_nightly_arguments, job_from_args
from jobs.search import add_search_arguments, run_search_command
from pipelines import explain as views
from pipelines.depth import DepthOptions
from pipelines.embed.enrich import EnrichConfig, enrich_catalog, format_counts
from pipelines.embed.export import run_export_vertex
from pipelines.embed.stage import run_embed
from pipelines.evaluate.stage import run_evaluate
from pipelines.index.config import IndexBuildConfig
from pipelines.index.partitioned import build_partitioned
from pipelines.index.single import add_build_index_arguments, build_index
from pipelines.index.sparse import build_inverted_index
from pipelines.options import (
    EmbedOptions,
    EvaluateOptions,
    ExportOptions,
    IndexSettings,
    ModelOptions,
    OutputOptions,
    OverwriteOptions,
    PredictionThreshold,
    ThresholdOptions,
    VerifyOptions,
    add_stage_arguments,
)
from pipelines.report.page import DEFAULT_NIGHTS, write_report
from pipelines.stage_config import (
    StageOutput,
    add_config_arguments,
    add_output_argument,
    config_from_values,
    config_values,
)
from pipelines.train.finetune import add_train_arguments, train_from_args
from pipelines.train.presets import apply_preset, explicit_flags
from pipelines.train.pretrain import add_pretrain_arguments, pretrain_from_args
from product_data.synthetic import SyntheticConfig, generate_benchmark


def _generate_arguments(parser: argparse.ArgumentParser) -> None:
    add_output_argument(parser, required=True, help="Dataset folder to write")
    parser.add_argument("--num_products", type=int, default=SyntheticConfig.num_products, help="Catalog size")
    parser.add_argument(
        "--num_queries", type=int, default=SyntheticConfig.num_queries, help="Queries, all splits"
    )
    parser.add_argument("--seed", type=int, default=SyntheticConfig.seed, help="Random seed")


@command(
    "generate", "write the seeded synthetic benchmark as Parquet", _generate_arguments, show_defaults=True
)
def _generate(args: argparse.Namespace, beam_args: list[str], stage_argv: list[str]) -> None:
    """Write a seeded synthetic e-commerce retrieval benchmark as Parquet."""
    config = SyntheticConfig(num_products=args.num_products, num_queries=args.num_queries, seed=args.seed)
    print(generate_benchmark(config, args.out, progress=print).format())


@command("ingest", "ESCI, WANDS or your own files -> a dataset folder", add_ingest_arguments)
def _ingest(args: argparse.Namespace, beam_args: list[str], stage_argv: list[str]) -> None:
    """Map a source's files onto madr's schemas; bad rows go to dead_letters.jsonl."""
    result, manifest = run_ingest(args)
    counts = {stream: counts.to_json() for stream, counts in result.counts.items()}
    print(json.dumps(counts, indent=2))
    print(f"dataset written; manifest {manifest}")


@command("pretrain", "pre-train an encoder (MLM + aspect losses)", add_pretrain_arguments, show_defaults=True)
def _pretrain(args: argparse.Namespace, beam_args: list[str], stage_argv: list[str]) -> None:
    """Domain pre-training (madral-kdd22 Eq. 7): MLM plus the aspect losses of variants that learn
    aspects, on products (document side) and queries; `madr train --init_from` fine-tunes it."""
    apply_preset(args, "pretrain", explicit_flags(add_pretrain_arguments, stage_argv))
    pretrained = pretrain_from_args(args)
    print(
        f"pre-trained {pretrained.steps} steps; MLM loss {pretrained.initial.mlm:.4f} -> "
        f"{pretrained.final.mlm:.4f}, aspect loss {pretrained.initial.aspect:.4f} -> "
        f"{pretrained.final.aspect:.4f}; model in {pretrained.model_dir}"
    )


@command("train", "fine-tune an encoder variant on a dataset folder", add_train_arguments, show_defaults=True)
def _train(args: argparse.Namespace, beam_args: list[str], stage_argv: list[str]) -> None:
    """Fine-tune an encoder variant with in-batch softmax plus a hard negative per query."""
    apply_preset(args, "train", explicit_flags(add_train_arguments, stage_argv))
    report = train_from_args(args)
    print(
        f"trained {report.steps} steps; best validation MRR@10 {report.best_valid_metric}; "
        f"model in {report.model_dir}"
    )


@command(
    "adapt",
    "adapt the shipped model to your catalog (no judgments)",
    add_adapt_arguments,
    show_defaults=True,
)
def _adapt(args: argparse.Namespace, beam_args: list[str], stage_argv: list[str]) -> None:
    """Adapt the shipped model (or --from MODEL) to a dataset folder's catalog: aspect vocabularies from
    its own fields, aspect losses, and a contrastive loss on pseudo-queries made from those fields
    (brand + category, colour + category, category, title fragments), starting where the backbone used
    zero-shot is. A share of products is held out by a hash of the id; the command prints their aspect
    accuracy and, when the folder has judged test queries, retrieval against the backbone used zero-shot."""
    run_adapt_job(args)


def _embed_arguments(parser: argparse.ArgumentParser) -> None:
    add_stage_arguments(
        parser, ModelOptions, OutputOptions, EmbedOptions, ThresholdOptions, VerifyOptions, OverwriteOptions
    )


@command("embed", "Beam: embed a catalog into Parquet shards", _embed_arguments, beam=True)
def _embed(args: argparse.Namespace, beam_args: list[str], stage_argv: list[str]) -> None:
    """Read products, validate them, embed them with a trained model, write Parquet shards."""
    counts = run_embed(PipelineOptions(stage_argv))
    print("  ".join(f"{name}={value}" for name, value in counts.items()))


@command(
    "build-index",
    "build a ScaNN index artifact over the shards",
    add_build_index_arguments,
    beam=True,  # with --num_index_shards > 1, as its help says
    beam_note=False,
    show_defaults=True,
)
def _build_index(args: argparse.Namespace, beam_args: list[str], stage_argv: list[str]) -> None:
    """Train a ScaNN tree + asymmetric hashing + reorder index and save it as an artifact.

    Each ScaNN setting left unset is derived from the corpus size and --depth; the artifact's
    manifest records the settings used and the recall@depth measured against exact search."""
    config = IndexBuildConfig(
        embeddings=args.embeddings,
        index=config_from_values(IndexSettings, args),
        previous_index=args.previous_index,
        products=args.products,
        tuning_queries=args.tuning_queries,
        model=args.model,
        **StageOutput.values_from({**vars(args), "output": args.out}),
    )
    if config.index.num_index_shards > 1:
        print(build_partitioned(config, PipelineOptions(beam_args)))
        return
    report = build_index(config)
    print(f"indexed {report.count} x {report.dimension} in {report.seconds:.1f}s -> {report.directory}")


def _sparse_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", required=True, help="Trained UHD model directory")
    parser.add_argument("--products", required=True, help="Product Parquet file or glob")
    add_output_argument(parser, required=True, help="Inverted index artifact directory")
    parser.add_argument("--batch_size", type=int, default=64, help="Products per encoding batch")
    parser.add_argument(
        "--weighted",
        action="store_true",
        help="Keep each posting's bucket value (Eq. 7 on the real values) instead of binarizing (§3.7)",
    )
    parser.add_argument(
        "--checkpoints",
        help="Folder keeping each finished chunk of the encoding, so the command run again encodes only "
        "what is left; removed when the index is written (default: OUTPUT.checkpoints)",
    )
    add_stage_arguments(parser, VerifyOptions)


@command(
    "build-sparse-index",
    "inverted index over a UHD model's sparse vectors",
    _sparse_arguments,
    show_defaults=True,
)
def _build_sparse_index(args: argparse.Namespace, beam_args: list[str], stage_argv: list[str]) -> None:
    """Encode the catalog with a UHD-BERT model and index its buckets, binarized (§3.7) unless
    --weighted; search scores Eq. 7."""
    index = build_inverted_index(
        args.model,
        args.products,
        args.out,
        args.batch_size,
        binary=not args.weighted,
        verify=not args.no_verify,
        checkpoints=args.checkpoints or f"{str(args.out).rstrip('/')}.checkpoints",
    )
    print(f"inverted index over {index.size} products, {index.nnz} postings -> {args.out}")


def _evaluate_arguments(parser: argparse.ArgumentParser) -> None:
    add_stage_arguments(
        parser,
        ModelOptions,
        OutputOptions,
        EvaluateOptions,
        DepthOptions,
        ThresholdOptions,
        VerifyOptions,
        OverwriteOptions,
    )
    parser.add_argument(
        "--products",
        help="Catalog Parquet file or glob: also report the model's aspect Accuracy@1/@3 on held-out "
        "products, query Accuracy@1, and the coverage and accuracy of predictions at --min_confidence",
    )


@command("evaluate", "Beam: retrieve for the test queries, report metrics", _evaluate_arguments, beam=True)
def _evaluate(args: argparse.Namespace, beam_args: list[str], stage_argv: list[str]) -> None:
    """Embed queries, search the index, join judgments, write metrics.json and the run file."""
    print(run_evaluate(PipelineOptions(stage_argv))["table"])


def _enrich_arguments(parser: argparse.ArgumentParser) -> None:
    add_config_arguments(parser, EnrichConfig)
    parser.add_argument("--output", required=True, help="Folder for enriched-*.parquet and its manifest")
    # docs/RESULTS.md measures the precision of the fills at each threshold.
    add_stage_arguments(parser, ThresholdOptions, VerifyOptions, OverwriteOptions)


@command(
    "enrich",
    "Beam: fill the catalog's aspect gaps with predictions",
    _enrich_arguments,
    beam=True,
    show_defaults=True,
)
def _enrich(args: argparse.Namespace, beam_args: list[str], stage_argv: list[str]) -> None:
    """Join the catalog with the aspect predictions `madr embed` wrote; write each product's aspects
    with their provenance (catalog, or predicted with its confidence). Catalog values are never
    overwritten; a prediction fills a gap only at or above --min_confidence."""
    config = EnrichConfig(
        **config_values(EnrichConfig, args),
        threshold=config_from_values(PredictionThreshold, args),
        **StageOutput.values_from(vars(args)),
    )
    print(format_counts(enrich_catalog(config, PipelineOptions(beam_args)), config.aspects))


def _export_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--products", help="(required) Product Parquet file or glob, for the aspect restricts"
    )
    parser.add_argument("--embeddings", help="(required) Embedding folder written by `madr embed`")
    parser.add_argument("--output", help="(required) Folder for the export files (nothing else is put there)")
    add_stage_arguments(parser, ExportOptions, ThresholdOptions, VerifyOptions, OverwriteOptions)


@command("export-vertex", "Beam: export for Vertex AI Vector Search", _export_arguments, beam=True)
def _export_vertex(args: argparse.Namespace, beam_args: list[str], stage_argv: list[str]) -> None:
    """Join embeddings with product aspects; write Vertex AI Vector Search JSON input files."""
    print(run_export_vertex(PipelineOptions(stage_argv)))


@command(
    "experiment",
    "train and evaluate variants under one budget",
    add_experiment_arguments,
    show_defaults=True,
)
def _experiment(args: argparse.Namespace, beam_args: list[str], stage_argv: list[str]) -> None:
    """Train, embed, index, evaluate each variant on the synthetic benchmark; write a table."""
    run_experiment(config_from_args(args, explicit_flags(add_experiment_arguments, stage_argv)), args.out)


@command(
    "explain", "Table 8: per-aspect predictions of a query and product", explain_cli.add_explain_arguments
)
def _explain(args: argparse.Namespace, beam_args: list[str], stage_argv: list[str]) -> None:
    """Per aspect: predicted value, confidence, presence and fusion weight; then the score."""
    product = args.product or views.catalog_product(args.products, args.product_id)
    print(views.explain(args.model, args.query, product, verify=not args.no_verify).format())


@command(
    "neighbours", "Table 9: nearest values in an aspect value table", explain_cli.add_neighbours_arguments
)
def _neighbours(args: argparse.Namespace, beam_args: list[str], stage_argv: list[str]) -> None:
    """Print the aspect values nearest to one value in the model's learned value table U_a (or, with
    --list, every value the model predicts for the aspect)."""
    if args.list:
        for value, count in views.vocabulary_listing(args.model, args.aspect, verify=not args.no_verify):
            print(f"{count:>8}  {value}")
        return
    nearest = views.neighbours(args.model, args.aspect, args.value, args.top, verify=not args.no_verify)
    for value, similarity in nearest:
        print(f"({similarity:.3f}) {value}")


@command("search", "search an index with a query in words (filters)", add_search_arguments)
def _search(args: argparse.Namespace, beam_args: list[str], stage_argv: list[str]) -> None:
    """Encode a query as the pipeline does, search the index artifact at the settings its schedule tuned for
    --k, and print rank, score, product id, title and each aspect's catalog value or prediction (with its
    confidence), optionally keeping only products with given aspect values."""
    run_search_command(args)


def _nightly_arguments(parser: argparse.ArgumentParser) -> None:
    add_nightly_arguments(parser)
    add_stage_arguments(parser, VerifyOptions)


@command("nightly", "the nightly job: embed, index, evaluate, publish", _nightly_arguments, beam=True)
def _nightly(args: argparse.Namespace, beam_args: list[str], stage_argv: list[str]) -> None:
    """Embed tonight's catalog (reusing unchanged products of the LATEST run), build the index,
    evaluate it, and move OUT/LATEST only when every stage has succeeded."""
    # --no_verify reaches each stage the way the Beam flags do.
    report = run_nightly(job_from_args(args, [*beam_args, *(["--no_verify"] if args.no_verify else [])]))
    print(f"run {report.run_id} published (previous {report.previous_run_id}); stages {report.stages}")
    if report.quality:
        print(report.quality)
    print("\n".join(report.cost_lines()))


def _compare_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_a", metavar="RUN_A", help="Evaluation output or run folder (the baseline)")
    parser.add_argument("run_b", metavar="RUN_B", help="Evaluation output or run folder (the candidate)")


@command("compare", "compare two evaluations query by query (paired t-test)", _compare_arguments)
def _compare(args: argparse.Namespace, beam_args: list[str], stage_argv: list[str]) -> None:
    """Align two evaluation outputs (or run folders with eval/ inside) by query id; print per metric
    mean A, mean B, delta (B − A), the paired t-test p-value and the queries compared."""
    print(compare_runs(args.run_a, args.run_b).format())


def _report_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--root", required=True, help="A nightly root: the --output of `madr nightly`")
    parser.add_argument("--run", dest="run_id", metavar="RUN_ID", help="The run reported on (the last run)")
    parser.add_argument("--output", default=None, help="HTML file to write (ROOT/RUN_ID/report.html)")
    parser.add_argument("--nights", type=int, default=DEFAULT_NIGHTS, help="Runs the trends show")


@command("report", "a nightly run's morning report, as one HTML page", _report_arguments, show_defaults=True)
def _report(args: argparse.Namespace, beam_args: list[str], stage_argv: list[str]) -> None:
    """One self-contained HTML page (inline CSS, embedded plots, no network) for a run of a nightly root:
    the verdict (published, or why not), the catalog and its dead letters, retrieval beside last night
    and the backbone used zero-shot with paired p-values, trends over the last nights, annotations,
    the index's schedule, the cost per stage and the queries that fell most."""
    print(write_report(args.root, args.run_id, args.output, args.nights))


@command(
    "demo",
    "the whole job end to end on the embedded default data",
    add_demo_arguments,
    show_defaults=True,
)
def _demo(args: argparse.Namespace, beam_args: list[str], stage_argv: list[str]) -> None:
    """generate -> pre-train and fine-tune MtBERT -> embed and annotate -> enrich -> build-index ->
    evaluate (retrieval and annotations), into one run folder."""
    run_demo(args)


BEAM_COMMANDS = tuple(name for name, entry in COMMANDS.items() if entry.beam)


__all__ = ["BEAM_COMMANDS", "BEAM_NOTE", "COMMANDS", "Command", "command"]
