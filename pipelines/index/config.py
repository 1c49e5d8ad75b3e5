"""`madr build-index` as one config: which embed output, the index settings, where the artifact goes.

One shard (`IndexSettings.num_index_shards`, 1 by default) is a single ScaNN artifact built on the driver
(`pipelines.index.single`); more is the partitioned build in Beam (`pipelines.index.partitioned`).
`build_index_artifact` picks between them, so the command, the drivers and the tests build one config.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from apache_beam.options.pipeline_options import PipelineOptions

from pipelines.options import IndexSettings
from pipelines.stage_config import StageOutput, config_from_values, require_flags


@dataclass(frozen=True, kw_only=True)
class IndexBuildConfig(StageOutput):
    """One index build: the embed stage's folder, the index settings, where it writes."""

    embeddings: str
    index: IndexSettings = field(default_factory=IndexSettings)

    @classmethod
    def from_options(cls, options: PipelineOptions) -> IndexBuildConfig:
        """The config the flags of `madr build-index` describe; names the required flags that are missing."""
        values = options.get_all_options(drop_default=False)
        require_flags(values, "embeddings", "output")
        index = config_from_values(IndexSettings, values)
        return cls(embeddings=values["embeddings"], index=index, **StageOutput.values_from(values))
