"""`madr build-index` as one config: which embed output, the index settings, where the artifact goes.

One shard (`IndexSettings.num_index_shards`, 1 by default) is a single ScaNN artifact built on the driver
(`pipelines.index.single`); more is the partitioned build in Beam (`pipelines.index.partitioned`).
`build_index_artifact` picks between them, so the command, the drivers and the tests build one config.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field

from apache_beam.options.pipeline_options import PipelineOptions

from pipelines.options import IndexSettings
from pipelines.stage_config import ParsedFlags, StageOutput, config_from_values, parsed_flags, require_flags


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
            model=values.get("model") if values.get("tuning_queries") else None,
            **StageOutput.values_from(values),
        )
