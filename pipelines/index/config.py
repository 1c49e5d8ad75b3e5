"""`madr build-index` as one config: which embed output, the index settings, where the artifact goes.

Every build is `pipelines.index.partitioned`'s, for any shard count (`IndexSettings.num_index_shards`, 1 by
default), in `madr build-index` and in the nightly alike: one artifact kind, "madr-partitioned-index".
The command, the drivers and the tests build one config.
"""

from __future__ import annotations

from dataclasses import dataclass

from index_builder.analyzer import AUTO, languages
from index_builder.bm25 import Bm25Settings
from pipelines.settings.options import IndexSettings
from pipelines.settings.stage_config import StageOutput, nested, output_setting, setting, switch


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


@dataclass(frozen=True, kw_only=True)
class IndexBuildConfig(StageOutput):
    """One index build: the embed stage's folder, the index settings, where it writes."""

    output: str = output_setting("Index artifact directory to write")
    embeddings: str = setting("", "Embedding shards folder written by `madr embed`", required=True)
    index: IndexSettings = nested(IndexSettings)
    previous_index: str | None = setting(
        None,
        "The last build of this index (`madr nightly` passes last night's): where it timed exact scoring "
        "faster at this k for a corpus within 25%% of this size, exact scoring ships again without a tree "
        "trained and timed (default: none, every build times both)",
    )
    products: str | None = setting(
        None,
        "The catalog the embeddings came from (Parquet file, folder or glob): the artifact then also "
        "carries BM25 over its products' title, bullet points and description in every shard, which "
        "`madr search` fuses with the dense ranking by reciprocal rank (--lexical false: none)",
    )
    lexical: LexicalSettings = nested(LexicalSettings)
    tuning_queries: str | None = setting(
        None,
        "Queries like the ones the index will serve (a queries Parquet, its test split left out, or a text "
        "file of one query a line), encoded by --model: each serving depth must reach --target_recall on up "
        "to 1,000 of them as well as on held-out corpus vectors (one index only)",
    )
    model: str | None = setting(None, "The model that made the embeddings: it encodes --tuning_queries")

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.lexical.lexical == "false":  # no BM25, though the catalog is known (the nightly gives it)
            object.__setattr__(self, "products", None)
        if self.tuning_queries and self.index.num_index_shards > 1:
            raise ValueError("--tuning_queries is for one index only; drop it or use --num_index_shards 1")
        if self.lexical.lexical == "true" and not self.products:
            raise ValueError("--lexical true needs --products: BM25 indexes the catalog's text")
        if bool(self.tuning_queries) != bool(self.model):
            raise ValueError("--tuning_queries and --model go together: the model encodes the queries")


__all__ = ["IndexBuildConfig", "LexicalSettings"]
