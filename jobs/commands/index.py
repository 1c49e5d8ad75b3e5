"""`madr build-index` and `build-sparse-index`: the serving index artifacts."""

from __future__ import annotations

from dataclasses import dataclass

from apache_beam.options.pipeline_options import PipelineOptions

from jobs.command_table import command
from pipelines.index.config import IndexBuildConfig
from pipelines.index.partitioned import build_partitioned
from pipelines.index.sparse import build_inverted_index, default_checkpoints
from pipelines.settings.stage_config import input_checks, setting


@command(
    "build-index",
    IndexBuildConfig,
    show_defaults=True,
)
def _build_index(config: IndexBuildConfig, beam_options: PipelineOptions) -> None:
    """Train a ScaNN tree + asymmetric hashing + reorder index and save it as an artifact.

    Each ScaNN setting left unset is derived from the corpus size and --depth; the artifact's
    manifest records the settings used and the recall@depth measured against exact search."""
    print(build_partitioned(config, beam_options).summary())


@dataclass(frozen=True)
class SparseIndexConfig:
    """`madr build-sparse-index`: a UHD model, the catalog it encodes, and the inverted index written."""

    model: str = setting("", "Trained UHD model directory", required=True)
    products: str = setting("", "Product Parquet file or glob", required=True)
    output: str = setting("", "Inverted index artifact directory", required=True, aliases=("--out",))
    batch_size: int = setting(64, "Products per encoding batch")
    weighted: bool = setting(
        False, "Keep each posting's bucket value (Eq. 7 on the real values) instead of binarizing (§3.7)"
    )
    checkpoints: str | None = setting(
        None,
        "Folder keeping each finished chunk of the encoding, so the command run again encodes only "
        "what is left; removed when the index is written (default: OUTPUT.checkpoints, or for a gs:// "
        "OUTPUT a local folder named after it)",
    )
    verify: bool = input_checks()


@command(
    "build-sparse-index",
    SparseIndexConfig,
    show_defaults=True,
)
def _build_sparse_index(config: SparseIndexConfig, beam_options: PipelineOptions) -> None:
    """Encode the catalog with a UHD-BERT model and index its buckets, binarized (§3.7) unless
    --weighted; search scores Eq. 7."""
    index = build_inverted_index(
        config.model,
        config.products,
        config.output,
        config.batch_size,
        binary=not config.weighted,
        verify=config.verify,
        checkpoints=config.checkpoints or default_checkpoints(config.output),
    )
    print(f"inverted index over {index.size} products, {index.nnz} postings -> {config.output}")
