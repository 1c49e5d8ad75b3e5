"""`madr embed`, `enrich` and `export-vertex`: the catalog embedded and annotated, and what is made of it."""

from __future__ import annotations

import argparse

from apache_beam.options.pipeline_options import PipelineOptions

from jobs.command_table import CommandLine, Flags, command
from pipelines.embed.enrich import EnrichConfig, enrich_catalog, format_counts
from pipelines.embed.export import ExportVertexConfig, export_vertex
from pipelines.embed.stage import EmbedConfig, embed_catalog
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


@command("embed", Flags(_embed_arguments, lambda line: EmbedConfig.from_options(line.args)))
def _embed(config: EmbedConfig, beam_options: PipelineOptions) -> None:
    """Read products, validate them, embed them with a trained model, write Parquet shards."""
    counts = embed_catalog(config, beam_options)
    print("  ".join(f"{name}={value}" for name, value in counts.items()))


def _enrich_arguments(parser: argparse.ArgumentParser) -> None:
    add_config_arguments(parser, EnrichConfig)
    parser.add_argument("--output", required=True, help="Folder for enriched-*.parquet and its manifest")
    # docs/RESULTS.md measures the precision of the fills at each threshold.
    add_stage_arguments(parser, ThresholdOptions, VerifyOptions, OverwriteOptions)


def _enrich_config(line: CommandLine) -> EnrichConfig:
    return EnrichConfig(
        **config_values(EnrichConfig, line.args),
        threshold=config_from_values(PredictionThreshold, line.args),
        **StageOutput.values_from(vars(line.args)),
    )


@command("enrich", Flags(_enrich_arguments, _enrich_config), show_defaults=True)
def _enrich(config: EnrichConfig, beam_options: PipelineOptions) -> None:
    """Join the catalog with the aspect predictions `madr embed` wrote; write each product's aspects
    with their provenance (catalog, or predicted with its confidence). Catalog values are never
    overwritten; a prediction fills a gap only at or above --min_confidence."""
    print(format_counts(enrich_catalog(config, beam_options), config.aspects))


def _export_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--products", help="(required) Product Parquet file or glob, for the aspect restricts"
    )
    parser.add_argument("--embeddings", help="(required) Embedding folder written by `madr embed`")
    parser.add_argument("--output", help="(required) Folder for the export files (nothing else is put there)")
    add_stage_arguments(parser, ExportOptions, ThresholdOptions, VerifyOptions, OverwriteOptions)


@command("export-vertex", Flags(_export_arguments, lambda line: ExportVertexConfig.from_options(line.args)))
def _export_vertex(config: ExportVertexConfig, beam_options: PipelineOptions) -> None:
    """Join embeddings with product aspects; write Vertex AI Vector Search JSON input files."""
    print(export_vertex(config, beam_options))
