"""`madr generate` and `madr ingest`: a dataset folder, from the generator or from a source's files."""

from __future__ import annotations

import json
from dataclasses import dataclass

from apache_beam.options.pipeline_options import PipelineOptions

from jobs.command_table import command
from jobs.ingest_cli import IngestConfig, run_ingest
from pipelines.settings.stage_config import setting
from product_data.synthetic import SyntheticConfig, generate_benchmark


@dataclass(frozen=True)
class GenerateConfig:
    output: str = setting("", "Dataset folder to write", required=True, aliases=("--out",))
    num_products: int = setting(SyntheticConfig.num_products, "Catalog size")
    num_queries: int = setting(SyntheticConfig.num_queries, "Queries, all splits")
    seed: int = setting(SyntheticConfig.seed, "Random seed")

    def synthetic(self) -> SyntheticConfig:
        return SyntheticConfig(num_products=self.num_products, num_queries=self.num_queries, seed=self.seed)


@command("generate", GenerateConfig, show_defaults=True)
def _generate(config: GenerateConfig, beam_options: PipelineOptions) -> None:
    """Write a seeded synthetic e-commerce retrieval benchmark as Parquet."""
    print(generate_benchmark(config.synthetic(), config.output, progress=print).format())


@command("ingest", IngestConfig)
def _ingest(config: IngestConfig, beam_options: PipelineOptions) -> None:
    """Map a source's files onto madr's schemas; bad rows go to dead_letters.jsonl."""
    result, manifest = run_ingest(config)
    counts = {stream: counts.to_json() for stream, counts in result.counts.items()}
    print(json.dumps(counts, indent=2))
    print(f"dataset written; manifest {manifest}")
