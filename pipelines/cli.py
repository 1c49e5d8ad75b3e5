"""The `madr` command: one entry point, a subcommand per stage.

    madr generate     write the embedded synthetic benchmark (catalog, queries, judgments)
    madr ingest       ESCI, WANDS or your own JSONL/CSV/Parquet files -> a dataset folder
    madr pretrain     pre-train an encoder variant (MLM + aspect losses) on a dataset folder
    madr train        fine-tune an encoder variant on a dataset folder
    madr embed        Beam: embed a catalog into Parquet shards
    madr build-index  train and save a ScaNN index artifact over the shards
    madr build-sparse-index  inverted index over a UHD model's binarized (or --weighted) sparse vectors
    madr evaluate     Beam: embed queries, search, join judgments, report metrics
    madr enrich       Beam: the catalog with each aspect's gaps filled by sure predictions, with provenance
    madr export-vertex  Beam: embeddings + aspects as Vertex AI Vector Search input files
    madr experiment   train and evaluate several variants under one budget, compare them
    madr explain      per-aspect predictions, presence and fusion weights of a query and a product
    madr neighbours   nearest values in a learned aspect value table
    madr nightly      embed (reusing unchanged rows), index, evaluate into OUT/<run id>/, move LATEST
    madr compare      two evaluations query by query: means, deltas, paired t-test p-values
    madr demo         all of the above, end to end, on the embedded default data

`embed`, `evaluate`, `enrich`, `export-vertex` and a partitioned `build-index` accept every Beam
pipeline option as well (--runner, --project, --region, --temp_location, --setup_file,
--direct_running_mode, ...).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence

from apache_beam.options.pipeline_options import PipelineOptions

from pipelines.build_index import add_build_index_arguments, build_index
from pipelines.cli_errors import report_error
from pipelines.compare import compare_runs
from pipelines.demo import add_demo_arguments, run_demo
from pipelines.embed import run_embed
from pipelines.enrich import DEFAULT_FILL_CONFIDENCE, enrich_catalog, format_counts
from pipelines.evaluate import run_evaluate
from pipelines.experiment import add_experiment_arguments, config_from_args, run_experiment
from pipelines.explain import add_explain_arguments, add_neighbours_arguments, explain, neighbours
from pipelines.export import run_export_vertex
from pipelines.index import run_build_index
from pipelines.ingest_cli import add_ingest_arguments, run_ingest
from pipelines.nightly import add_nightly_arguments, job_from_args, run_nightly
from pipelines.options import (
    EmbedOptions,
    EvaluateOptions,
    ExportOptions,
    ModelOptions,
    OutputOptions,
    OverwriteOptions,
    VerifyOptions,
    add_stage_arguments,
)
from pipelines.presets import apply_preset, explicit_flags
from pipelines.pretrain import add_pretrain_arguments, pretrain_from_args
from pipelines.sparse_index import build_inverted_index
from pipelines.synthetic import SyntheticConfig, generate_benchmark
from pipelines.train import add_train_arguments, train_from_args
from schemas import AspectSchema

BEAM_COMMANDS = ("embed", "evaluate", "enrich", "export-vertex", "build-index", "nightly")
BEAM_NOTE = "Any other flag is passed to Beam as a pipeline option (e.g. --runner DataflowRunner)."


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="madr",
        description="Multi-aspect dense retrieval over product catalogs, as Apache Beam batch jobs.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split("\n\n")[1],
    )
    parser.add_argument(
        "--log_level",
        default="INFO",
        type=str.upper,
        choices=("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"),
        help="Python logging level (default: %(default)s)",
    )
    parser.add_argument(
        "--debug",
        action="store_true",
        help="On an error, show the Python traceback instead of the one-line message (give it before "
        "the command: madr --debug embed ...)",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    defaults = argparse.ArgumentDefaultsHelpFormatter

    generate = commands.add_parser(
        "generate",
        help="write the synthetic benchmark",
        formatter_class=defaults,
        description="Write a seeded synthetic e-commerce retrieval benchmark as Parquet.",
    )
    generate.add_argument("--out", required=True, help="Dataset folder to write")
    generate.add_argument(
        "--num_products", type=int, default=SyntheticConfig.num_products, help="Catalog size"
    )
    generate.add_argument(
        "--num_queries", type=int, default=SyntheticConfig.num_queries, help="Queries, all splits"
    )
    generate.add_argument("--seed", type=int, default=SyntheticConfig.seed, help="Random seed")

    ingest = commands.add_parser(
        "ingest",
        help="ESCI, WANDS or your own files -> a dataset folder",
        description="Map a source's files onto madr's schemas; bad rows go to dead_letters.jsonl.",
    )
    add_ingest_arguments(ingest)

    pretrain = commands.add_parser(
        "pretrain",
        help="pre-train an encoder on a catalog and its queries",
        formatter_class=defaults,
        description="Domain pre-training (madral-kdd22 Eq. 7): MLM plus the aspect losses of variants that "
        "learn aspects, on products (document side) and queries; `madr train --init_from` fine-tunes it.",
    )
    add_pretrain_arguments(pretrain)

    train = commands.add_parser(
        "train",
        help="fine-tune an encoder",
        formatter_class=defaults,
        description="Fine-tune an encoder variant with in-batch softmax plus a hard negative per query.",
    )
    add_train_arguments(train)

    embed = commands.add_parser(
        "embed",
        help="Beam: embed a catalog into Parquet shards",
        epilog=BEAM_NOTE,
        description="Read products, validate them, embed them with a trained model, write Parquet shards.",
    )
    add_stage_arguments(embed, ModelOptions, OutputOptions, EmbedOptions, VerifyOptions, OverwriteOptions)

    index = commands.add_parser(
        "build-index",
        help="build a ScaNN index artifact",
        formatter_class=defaults,
        description="Train a ScaNN tree + asymmetric hashing + reorder index and save it as an artifact.",
    )
    add_build_index_arguments(index)

    sparse = commands.add_parser(
        "build-sparse-index",
        help="inverted index over a UHD model's binarized (or weighted) sparse vectors",
        formatter_class=defaults,
        description="Encode the catalog with a UHD-BERT model and index its buckets, binarized (§3.7) "
        "unless --weighted; search scores Eq. 7.",
    )
    sparse.add_argument("--model", required=True, help="Trained UHD model directory")
    sparse.add_argument("--products", required=True, help="Product Parquet file or glob")
    sparse.add_argument("--out", required=True, help="Inverted index artifact directory")
    sparse.add_argument("--batch_size", type=int, default=64, help="Products per encoding batch")
    sparse.add_argument(
        "--weighted",
        action="store_true",
        help="Keep each posting's bucket value (Eq. 7 on the real values) instead of binarizing (§3.7)",
    )
    add_stage_arguments(sparse, VerifyOptions)

    evaluate = commands.add_parser(
        "evaluate",
        help="Beam: retrieve for the test queries and report metrics",
        epilog=BEAM_NOTE,
        description="Embed queries, search the index, join judgments, write metrics.json and the run file.",
    )
    add_stage_arguments(
        evaluate, ModelOptions, OutputOptions, EvaluateOptions, VerifyOptions, OverwriteOptions
    )
    evaluate.add_argument(
        "--products",
        help="Catalog Parquet file or glob: also report the model's aspect Accuracy@1/@3 on held-out "
        "products, query Accuracy@1, and the coverage and accuracy of predictions at --min_confidence",
    )
    evaluate.add_argument(
        "--min_confidence",
        type=float,
        default=None,
        help="Threshold of the calibration line: share and Accuracy@1 of predictions this sure (0.5)",
    )

    enrich = commands.add_parser(
        "enrich",
        help="Beam: fill the catalog's aspect gaps with predictions",
        epilog=BEAM_NOTE,
        formatter_class=defaults,
        description="Join the catalog with the aspect predictions `madr embed` wrote; write each product's "
        "aspects with their provenance (catalog, or predicted with its confidence). Catalog values are "
        "never overwritten; a prediction fills a gap only at or above --min_confidence.",
    )
    enrich.add_argument("--products", required=True, help="Catalog Parquet file or glob")
    enrich.add_argument("--embeddings", required=True, help="Embedding folder written by `madr embed`")
    enrich.add_argument("--output", required=True, help="Folder for enriched-*.parquet and its manifest")
    enrich.add_argument(
        "--min_confidence",
        type=float,
        default=DEFAULT_FILL_CONFIDENCE,
        help="Lowest confidence P(x) of a prediction that fills a gap (docs/RESULTS.md measures the "
        "precision at each level)",
    )
    enrich.add_argument("--aspects", default="category,brand,color", help="Aspects to fill")
    add_stage_arguments(enrich, VerifyOptions, OverwriteOptions)

    export = commands.add_parser(
        "export-vertex",
        help="Beam: export for Vertex AI Vector Search",
        epilog=BEAM_NOTE,
        description="Join embeddings with product aspects; write Vertex AI Vector Search JSON input files.",
    )
    export.add_argument(
        "--products", help="(required) Product Parquet file or glob, for the aspect restricts"
    )
    export.add_argument("--embeddings", help="(required) Embedding folder written by `madr embed`")
    export.add_argument(
        "--min_confidence",
        type=float,
        default=None,
        help="With --restricts predicted or both: lowest confidence of a predicted restrict (0.5)",
    )
    export.add_argument("--output", help="(required) Folder for the export files (nothing else is put there)")
    add_stage_arguments(export, ExportOptions, VerifyOptions, OverwriteOptions)

    experiment = commands.add_parser(
        "experiment",
        help="compare variants under one budget",
        formatter_class=defaults,
        description="Train, embed, index, evaluate each variant on the synthetic benchmark; write a table.",
    )
    add_experiment_arguments(experiment)

    explain_parser = commands.add_parser(
        "explain",
        help="Table 8: per-aspect predictions, presence and weights for a query and a product",
        description="Per aspect: predicted value, confidence, presence and fusion weight; then the score.",
    )
    add_explain_arguments(explain_parser)
    neighbours_parser = commands.add_parser(
        "neighbours",
        help="Table 9: nearest values in a learned aspect value table",
        description="Print the aspect values nearest to one value in the model's learned value table U_a.",
    )
    add_neighbours_arguments(neighbours_parser)

    nightly = commands.add_parser(
        "nightly",
        help="the nightly job: embed, index, evaluate, publish",
        epilog=BEAM_NOTE,
        description="Embed tonight's catalog (reusing unchanged products of the LATEST run), build the "
        "index, evaluate it, and move OUT/LATEST only when every stage has succeeded.",
    )
    add_nightly_arguments(nightly)
    add_stage_arguments(nightly, VerifyOptions)

    compare = commands.add_parser(
        "compare",
        help="compare two evaluations query by query",
        description="Align two evaluation outputs (or run folders with eval/ inside) by query id; print per "
        "metric mean A, mean B, delta (B − A), the paired t-test p-value and the queries compared.",
    )
    compare.add_argument("run_a", metavar="RUN_A", help="Evaluation output or run folder (the baseline)")
    compare.add_argument("run_b", metavar="RUN_B", help="Evaluation output or run folder (the candidate)")

    demo = commands.add_parser(
        "demo",
        help="the whole job end to end on the embedded default data",
        formatter_class=defaults,
        description="generate -> train BiBERT -> embed -> build-index -> evaluate, into one run folder.",
    )
    add_demo_arguments(demo)
    return parser


def _quiet_libraries() -> None:
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    for noisy in ("apache_beam", "absl"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args, beam_args = _parser().parse_known_args(argv)
    logging.basicConfig(level=args.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    _quiet_libraries()
    if beam_args and args.command not in BEAM_COMMANDS:
        _parser().error(f"unrecognised arguments for {args.command}: {' '.join(beam_args)}")
    try:
        return _run_command(args, beam_args, argv[argv.index(args.command) + 1 :])
    except Exception as error:
        if args.debug:
            raise
        # A user's error (a bad value, a missing or damaged file) as one line, exit code 2; a bug's
        # traceback and how to report it, exit code 1 (pipelines/cli_errors.py).
        return report_error(args.command, error)


def _run_command(args: argparse.Namespace, beam_args: list[str], stage_argv: list[str]) -> int:
    """The command's work; whatever it raises, main() reports."""
    if args.command == "generate":
        config = SyntheticConfig(num_products=args.num_products, num_queries=args.num_queries, seed=args.seed)
        print(generate_benchmark(config, args.out, progress=print).format())
    elif args.command == "ingest":
        result, manifest = run_ingest(args)
        counts = {stream: counts.to_json() for stream, counts in result.counts.items()}
        print(json.dumps(counts, indent=2))
        print(f"dataset written; manifest {manifest}")
    elif args.command == "pretrain":
        apply_preset(args, "pretrain", explicit_flags(add_pretrain_arguments, stage_argv))
        pretrained = pretrain_from_args(args)
        print(
            f"pre-trained {pretrained.steps} steps; MLM loss {pretrained.initial.mlm:.4f} -> "
            f"{pretrained.final.mlm:.4f}, aspect loss {pretrained.initial.aspect:.4f} -> "
            f"{pretrained.final.aspect:.4f}; model in {pretrained.model_dir}"
        )
    elif args.command == "train":
        apply_preset(args, "train", explicit_flags(add_train_arguments, stage_argv))
        report = train_from_args(args)
        print(
            f"trained {report.steps} steps; best validation MRR@10 {report.best_valid_metric}; "
            f"model in {report.model_dir}"
        )
    elif args.command == "embed":
        counts = run_embed(PipelineOptions(stage_argv))
        print("  ".join(f"{name}={value}" for name, value in counts.items()))
    elif args.command == "build-index" and args.num_index_shards > 1:
        flags = [
            "--embeddings",
            args.embeddings,
            "--output",
            args.out,
            "--max_k",
            str(args.max_k),
            "--num_index_shards",
            str(args.num_index_shards),
            *(["--no_verify"] if args.no_verify else []),
            *(["--overwrite"] if args.overwrite else []),
            *beam_args,
        ]
        print(run_build_index(PipelineOptions(flags)))
    elif args.command == "build-index":
        report = build_index(
            args.embeddings,
            args.out,
            args.max_k,
            verify=not args.no_verify,
            overwrite=args.overwrite,
            target_recall=args.target_recall,
        )
        print(f"indexed {report.count} x {report.dimension} in {report.seconds:.1f}s -> {report.directory}")
    elif args.command == "enrich":
        names = AspectSchema.parse(args.aspects).names
        beam_options = PipelineOptions(beam_args, no_verify=args.no_verify, overwrite=args.overwrite)
        counts = enrich_catalog(
            args.products, args.embeddings, args.output, args.min_confidence, names, beam_options
        )
        print(format_counts(counts, names))
    elif args.command == "export-vertex":
        print(run_export_vertex(PipelineOptions(stage_argv)))
    elif args.command == "experiment":
        run_experiment(config_from_args(args), args.out)
    elif args.command == "build-sparse-index":
        index = build_inverted_index(
            args.model,
            args.products,
            args.out,
            args.batch_size,
            binary=not args.weighted,
            verify=not args.no_verify,
        )
        print(f"inverted index over {index.size} products, {index.nnz} postings -> {args.out}")
    elif args.command == "evaluate":
        print(run_evaluate(PipelineOptions(stage_argv))["table"])
    elif args.command == "explain":
        print(explain(args.model, args.query, args.product, verify=not args.no_verify).format())
    elif args.command == "neighbours":
        for value, similarity in neighbours(
            args.model, args.aspect, args.value, args.top, verify=not args.no_verify
        ):
            print(f"({similarity:.3f}) {value}")
    elif args.command == "nightly":
        # --no_verify reaches each stage the way the Beam flags do.
        report = run_nightly(job_from_args(args, [*beam_args, *(["--no_verify"] if args.no_verify else [])]))
        print(f"run {report.run_id} published (previous {report.previous_run_id}); stages {report.stages}")
    elif args.command == "compare":
        print(compare_runs(args.run_a, args.run_b).format())
    elif args.command == "demo":
        run_demo(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
