"""`madr build-index` as one config: which embed output, the index settings, where the artifact goes.

Every build is `pipelines.index.partitioned`'s, for any shard count (`IndexSettings.num_index_shards`, 1 by
default), in `madr build-index` and in the nightly alike: one artifact kind, "madr-partitioned-index".
The command, the drivers and the tests build one config.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field

from apache_beam.options.pipeline_options import PipelineOptions

from pipelines.depth import DepthOptions
from pipelines.options import (
    IndexOptions,
    IndexSettings,
    OverwriteOptions,
    VerifyOptions,
    add_stage_arguments,
)
from pipelines.stage_config import (
    ParsedFlags,
    StageOutput,
    add_output_argument,
    config_from_values,
    parsed_flags,
    require_flags,
)


class PreviousIndexOptions(PipelineOptions):
    """`--previous_index`, the last build of this index, whose timings a build may reuse; and
    `--tuning_queries`, queries the build tunes its schedule on."""

    @classmethod
    def _add_argparse_args(cls, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--previous_index",
            default=None,
            help="The last build of this index (`madr nightly` passes last night's): where it timed exact "
            "scoring faster at this k for a corpus within 25%% of this size, exact scoring ships again "
            "without a tree trained and timed (default: none, every build times both)",
        )
        parser.add_argument(
            "--tuning_queries",
            default=None,
            help="Queries like the ones the index will serve (a queries Parquet, its test split left out, "
            "or a text file of one query a line), encoded by --model: each serving depth must reach "
            "--target_recall on up to 1,000 of them as well as on held-out corpus vectors (one index only)",
        )


@dataclass(frozen=True, kw_only=True)
class IndexBuildConfig(StageOutput):
    """One index build: the embed stage's folder, the index settings, where it writes."""

    embeddings: str
    index: IndexSettings = field(default_factory=IndexSettings)
    # The previous build of this index (last night's): where it timed exact scoring faster, at about
    # this size, exact ships again without a tree trained and timed (`index_builder.tuned`).
    previous_index: str | None = None
    # The catalog whose text the artifact's BM25 index is built over (None: no BM25 in the artifact).
    products: str | None = None
    # Queries the schedule is tuned on besides held-out corpus vectors, encoded by `model`.
    tuning_queries: str | None = None
    model: str | None = None

    def __post_init__(self) -> None:
        for flag, value in (
            ("--products (BM25 in the artifact)", self.products),
            ("--tuning_queries", self.tuning_queries),
        ):
            if value and self.index.num_index_shards > 1:
                raise ValueError(f"{flag} is built for one index only; drop it or use --num_index_shards 1")
        if bool(self.tuning_queries) != bool(self.model):
            raise ValueError("--tuning_queries and --model go together: the model encodes the queries")

    @classmethod
    def from_options(cls, options: ParsedFlags) -> IndexBuildConfig:
        """The config the flags of `madr build-index` describe; names the required flags that are missing."""
        values = parsed_flags(options)
        require_flags(values, "embeddings", "output")
        index = config_from_values(IndexSettings, values)
        return cls(
            embeddings=values["embeddings"],
            index=index,
            previous_index=values.get("previous_index"),
            products=values.get("products"),
            tuning_queries=values.get("tuning_queries"),
            # Beam's options always have --model (the embed stage's): from them it counts only beside
            # --tuning_queries; from build-index's own parser a --model alone is refused (__post_init__).
            model=values.get("model")
            if values.get("tuning_queries") or not isinstance(options, PipelineOptions)
            else None,
            **StageOutput.values_from(values),
        )

    @staticmethod
    def add_arguments(parser: argparse.ArgumentParser) -> None:
        """The flags of `madr build-index` (and of the nightly's index stage)."""
        parser.add_argument(
            "--embeddings", required=True, help="Embedding shards folder written by `madr embed`"
        )
        # --out is the name of earlier releases; --output is every stage's.
        add_output_argument(parser, required=True, help="Index artifact directory to write")
        add_stage_arguments(
            parser, IndexOptions, DepthOptions, PreviousIndexOptions, VerifyOptions, OverwriteOptions
        )
        # Not a PipelineOptions field of its own: Beam's options already have --products (the embed stage's).
        parser.add_argument(
            "--products",
            default=None,
            help="The catalog the embeddings came from (Parquet file, folder or glob): the artifact then "
            "also carries BM25 over its products' title, bullet points and description, which `madr search` "
            "fuses with the dense ranking by reciprocal rank (one index only, not --num_index_shards > 1)",
        )
        parser.add_argument(
            "--model", default=None, help="The model that made the embeddings: it encodes --tuning_queries"
        )
