"""`madr build-index` and `build-sparse-index`: the serving index artifacts."""

from __future__ import annotations

import argparse

from apache_beam.options.pipeline_options import PipelineOptions

from jobs.command_table import command
from pipelines.index.config import IndexBuildConfig
from pipelines.index.partitioned import build_partitioned
from pipelines.index.single import add_build_index_arguments, build_index
from pipelines.index.sparse import build_inverted_index
from pipelines.options import (
    IndexSettings,
    VerifyOptions,
    add_stage_arguments,
)
from pipelines.stage_config import (
    StageOutput,
    add_output_argument,
    config_from_values,
)


@command("build-index", add_build_index_arguments, beam_note=False, show_defaults=True)
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


@command("build-sparse-index", _sparse_arguments, show_defaults=True)
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
