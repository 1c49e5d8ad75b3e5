"""`madr embed`, `enrich` and `export-vertex`: the catalog embedded and annotated, and what is made of it."""

from __future__ import annotations

from apache_beam.options.pipeline_options import PipelineOptions

from jobs.command_table import command
from pipelines.embed.enrich import EnrichConfig, enrich_catalog, format_counts
from pipelines.embed.export import ExportVertexConfig, export_vertex
from pipelines.embed.stage import EmbedConfig, embed_catalog


@command("embed", EmbedConfig)
def _embed(config: EmbedConfig, beam_options: PipelineOptions) -> None:
    """Read products, validate them, embed them with a trained model, write Parquet shards."""
    counts = embed_catalog(config, beam_options)
    print("  ".join(f"{name}={value}" for name, value in counts.items()))


@command("enrich", EnrichConfig, show_defaults=True)
def _enrich(config: EnrichConfig, beam_options: PipelineOptions) -> None:
    """Join the catalog with the aspect predictions `madr embed` wrote; write each product's aspects
    with their provenance (catalog, or predicted with its confidence). Catalog values are never
    overwritten; a prediction fills a gap only at or above --min_confidence."""
    print(format_counts(enrich_catalog(config, beam_options), config.aspects))


@command("export-vertex", ExportVertexConfig)
def _export_vertex(config: ExportVertexConfig, beam_options: PipelineOptions) -> None:
    """Join embeddings with product aspects; write Vertex AI Vector Search JSON input files."""
    print(export_vertex(config, beam_options))
