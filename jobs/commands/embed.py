"""`madr embed`, `enrich` and `export-vertex`: the catalog embedded and annotated, and what is made of it."""

from __future__ import annotations

import argparse

from apache_beam.options.pipeline_options import PipelineOptions

from jobs.command_table import command
from pipelines.embed.enrich import EnrichConfig, enrich_catalog, format_counts
from pipelines.embed.export import run_export_vertex
from pipelines.embed.stage import run_embed
from pipelines.options import (
    EmbedOptions,
    ExportOptions,
    ModelOptions,
    OutputOptions,
    OverwriteOptions,
    PredictionThreshold,
    ThresholdOptions,
    VerifyOptions,
    add_stage_arguments,
)
from pipelines.stage_config import (
    StageOutput,
    add_config_arguments,
    config_from_values,
    config_values,
)


def _embed_arguments(parser: argparse.ArgumentParser) -> None:
    add_stage_arguments(
        parser, ModelOptions, OutputOptions, EmbedOptions, ThresholdOptions, VerifyOptions, OverwriteOptions
    )


@command("embed", _embed_arguments)
def _embed(args: argparse.Namespace, beam_args: list[str], stage_argv: list[str]) -> None:
    """Read products, validate them, embed them with a trained model, write Parquet shards."""
    counts = run_embed(PipelineOptions(stage_argv))
    print("  ".join(f"{name}={value}" for name, value in counts.items()))


def _enrich_arguments(parser: argparse.ArgumentParser) -> None:
    add_config_arguments(parser, EnrichConfig)
    parser.add_argument("--output", required=True, help="Folder for enriched-*.parquet and its manifest")
    # docs/RESULTS.md measures the precision of the fills at each threshold.
    add_stage_arguments(parser, ThresholdOptions, VerifyOptions, OverwriteOptions)


@command("enrich", _enrich_arguments, show_defaults=True)
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


@command("export-vertex", _export_arguments)
def _export_vertex(args: argparse.Namespace, beam_args: list[str], stage_argv: list[str]) -> None:
    """Join embeddings with product aspects; write Vertex AI Vector Search JSON input files."""
    print(run_export_vertex(PipelineOptions(stage_argv)))
