"""`madr build-index` as one config: which embed output, the index settings, where the artifact goes.

Every build is `pipelines.index.partitioned`'s, for any shard count (`IndexSettings.num_index_shards`, 1 by
default), in `madr build-index` and in the nightly alike: one artifact kind, "madr-partitioned-index".
The command, the drivers and the tests build one config.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field

from apache_beam.options.pipeline_options import PipelineOptions

from index_builder.analyzer import AUTO, languages
from index_builder.bm25 import Bm25Settings
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
    add_config_arguments,
    add_output_argument,
    config_from_values,
    options_class,
    parsed_flags,
    require_flags,
    setting,
    switch,
)


@dataclass(frozen=True)
class LexicalSettings:
    """BM25 in the index artifact: over the catalog's text (--products), in every shard, each scored with
    the whole catalog's statistics (`index_builder.bm25`), fused with the dense ranking by `madr search`."""

    lexical: str | None = switch(
        "BM25 in the artifact: true needs --products; false builds none (the nightly builds it from "
        "tonight's catalog unless false); default: when --products is given"
    )
    lexical_language: str = setting(
        AUTO,
        "The language BM25 analyzes text in (Snowball stemmer and stop words): auto takes each product's "
        "from its locale (nl_nl: dutch; none or unknown: english) and the queries' from the catalog's main "
        "language; a language name analyzes every product and query in it; none: words as written",
        choices=languages(),
    )

    def __post_init__(self) -> None:
        if self.lexical not in (None, "true", "false"):
            raise ValueError(f"--lexical must be true or false, got {self.lexical!r}")

    def bm25(self) -> Bm25Settings:
        return Bm25Settings(language=self.lexical_language)


# --lexical is declared for Beam by EvaluateOptions (the evaluation's BM25 rows): one flag, both stages.
LexicalOptions = options_class(LexicalSettings, "LexicalOptions", shared=("lexical",))


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
    lexical: LexicalSettings = field(default_factory=LexicalSettings)
    # Queries the schedule is tuned on besides held-out corpus vectors, encoded by `model`.
    tuning_queries: str | None = None
    model: str | None = None

    def __post_init__(self) -> None:
        if self.tuning_queries and self.index.num_index_shards > 1:
            raise ValueError("--tuning_queries is for one index only; drop it or use --num_index_shards 1")
        if self.lexical.lexical == "true" and not self.products:
            raise ValueError("--lexical true needs --products: BM25 indexes the catalog's text")
        if bool(self.tuning_queries) != bool(self.model):
            raise ValueError("--tuning_queries and --model go together: the model encodes the queries")

    @classmethod
    def from_options(cls, options: ParsedFlags) -> IndexBuildConfig:
        """The config the flags of `madr build-index` describe; names the required flags that are missing."""
        values = parsed_flags(options)
        require_flags(values, "embeddings", "output")
        index = config_from_values(IndexSettings, values)
        lexical = config_from_values(LexicalSettings, values)
        return cls(
            embeddings=values["embeddings"],
            index=index,
            previous_index=values.get("previous_index"),
            # --lexical false: no BM25, though the catalog is known (the nightly always gives it).
            products=values.get("products") if lexical.lexical != "false" else None,
            lexical=lexical,
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
            "also carries BM25 over its products' title, bullet points and description in every shard, "
            "which `madr search` fuses with the dense ranking by reciprocal rank",
        )
        add_config_arguments(parser, LexicalSettings)
        parser.add_argument(
            "--model", default=None, help="The model that made the embeddings: it encodes --tuning_queries"
        )
