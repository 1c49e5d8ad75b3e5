"""Pipeline options of every Beam stage, one class per concern.

Beam parses every `PipelineOptions` subclass into one parser, so a flag is
declared exactly once (here) and no flag is `required=True`: each stage checks
the flags it needs with `require_options` when it runs.
"""

from __future__ import annotations

import argparse

from apache_beam.options.pipeline_options import PipelineOptions

from index_builder.recall import DEFAULT_TARGET_RECALL
from pipelines.evaluation import DEFAULT_METRICS

DEFAULT_METRICS_FLAG = ",".join(DEFAULT_METRICS)
# How the encoder runs (pipelines.inference): fp32 anywhere; int8 on ONNX Runtime (CPU); bf16 and
# fp16 with torch autocast on a GPU. The runtime: auto is ONNX Runtime on a CPU, torch on a GPU.
PRECISIONS = ("fp32", "int8", "bf16", "fp16")
RUNTIMES = ("auto", "torch", "onnxruntime")


class ModelOptions(PipelineOptions):
    """Which trained model encodes, where, and in what batches."""

    @classmethod
    def _add_argparse_args(cls, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--model", help="(required) Trained model directory, from `madr train`")
        parser.add_argument(
            "--device", default=None, help="Torch device; default: the GPU when present, else CPU"
        )
        parser.add_argument("--batch_size", type=int, default=256, help="Records per inference batch (256)")
        parser.add_argument(
            "--chunk_size",
            type=int,
            default=32,
            help="Length-sorted sub-batch inside an inference batch (32)",
        )
        parser.add_argument(
            "--precision",
            choices=PRECISIONS,
            default="fp32",
            help="Numeric precision of inference. fp32 (default). int8: ONNX Runtime's dynamic "
            "quantisation, about 1.5x the fp32 speed on a CPU (docs/PERFORMANCE.md). bf16, fp16: torch "
            "autocast, GPU only",
        )
        parser.add_argument(
            "--runtime",
            choices=RUNTIMES,
            default="auto",
            help="What runs the model. auto (default): ONNX Runtime on a CPU (faster than torch there), "
            "torch on a GPU. The ONNX graph is exported on first use and cached by the weights' sha256 "
            "in $MADR_CACHE (default ~/.cache/madr)",
        )


class VerifyOptions(PipelineOptions):
    """Whether a stage checks its input artifacts against their manifests (`pipelines.verify`)."""

    @classmethod
    def _add_argparse_args(cls, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--no_verify",
            action="store_true",
            help="For experts: do not check the sha256 of the input artifacts (model, tokenizer, "
            "vocabularies, embeddings) against their manifests; a warning names what was not checked. "
            "Index artifacts are always checked when they are opened",
        )


class OutputOptions(PipelineOptions):
    @classmethod
    def _add_argparse_args(cls, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--output", help="(required) Output folder, local or gs://")


class OverwriteOptions(PipelineOptions):
    """Whether a stage may replace an output folder that already holds files (`artifacts.fresh_output`).

    One flag for every stage, Beam or not: the non-Beam commands add it with `add_stage_arguments`.
    """

    @classmethod
    def _add_argparse_args(cls, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--overwrite",
            action="store_true",
            help="Replace the output folder if it already holds files (without it, such a folder is "
            "refused, so no stale file can mix with the new ones). Either way the new output is written "
            "beside it and moved into place only when the run succeeds",
        )


class EmbedOptions(PipelineOptions):
    """Flags of `madr embed`."""

    @classmethod
    def _add_argparse_args(cls, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--products", help="(required) Product Parquet file or glob, local or gs://")
        parser.add_argument(
            "--num_shards",
            type=int,
            default=0,
            help="Embedding Parquet shards to write (0: the runner decides)",
        )
        parser.add_argument(
            "--row_group_mb",
            type=int,
            default=8,
            help="Parquet row-group buffer per shard writer, MB (8); the writer holds about twice this",
        )
        parser.add_argument(
            "--previous",
            default=None,
            help="Previous embed output (or run folder): unchanged products reuse its rows; only new or "
            "changed products, or all of them under a new model version, are embedded",
        )
        parser.add_argument(
            "--torch_threads",
            type=int,
            default=0,
            help="torch intra-op threads per worker process (0: torch's default, one per core); 1 is much "
            "faster for small models on shared or oversubscribed cores",
        )
        parser.add_argument(
            "--min_confidence",
            type=float,
            default=None,
            help="Lowest confidence P(x) of a predicted aspect value. embed: write a value only at or above "
            "it, keeping its confidence (default 0: every prediction); evaluate: the calibration line's "
            "threshold (default 0.5); export-vertex: a predicted restrict's threshold (default 0.5)",
        )
        parser.add_argument(
            "--max_dead_letter_fraction",
            type=float,
            default=0.01,
            help="Fail the job when more than this fraction of records are dead letters (0.01). They are "
            "still written first, so the failure can be inspected",
        )


class EvaluateOptions(PipelineOptions):
    """Flags of `madr evaluate`."""

    @classmethod
    def _add_argparse_args(cls, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--queries", help="(required) Query Parquet file, local or gs://")
        parser.add_argument("--judgments", help="(required) Judgment Parquet file, local or gs://")
        parser.add_argument(
            "--index", help="Index artifact directory (from `madr build-index`), for --searcher ann"
        )
        parser.add_argument("--embeddings", help="Embedding folder (from `madr embed`), for --searcher exact")
        parser.add_argument("--split", default="test", help="Query split to evaluate (test)")
        parser.add_argument(
            "--depth",
            type=int,
            default=10_000,
            help="Products retrieved per query, capped at the corpus (10000)",
        )
        parser.add_argument(
            "--metrics",
            default=DEFAULT_METRICS_FLAG,
            help=f"Comma-separated metrics ({DEFAULT_METRICS_FLAG})",
        )
        parser.add_argument(
            "--searcher",
            choices=("ann", "exact", "auto"),
            default="ann",
            help="ann: the ScaNN index; exact: brute force; auto (needs --index and --embeddings): whichever "
            "is faster on a sample of the queries at --depth, the index only if its recall there is within "
            "1%% of exact; both are still reported unless --compare_exact false",
        )
        parser.add_argument(
            "--compare_exact",
            nargs="?",
            const="true",
            default=None,
            choices=("true", "false"),
            help="Also search exactly over --embeddings in the same pipeline and report, per recall@k, the "
            "recall the index loses (exact − ann); default: true when --searcher ann has --embeddings too",
        )
        parser.add_argument(
            "--positive_min_grade",
            type=int,
            default=None,
            help="Lowest relevant grade; default: the positive_min_grade of the dataset's manifest.json "
            "next to --judgments (3 for ESCI, 2 for WANDS), else 2",
        )


def add_stage_arguments(parser: argparse.ArgumentParser, *option_classes: type[PipelineOptions]) -> None:
    """Show a stage's own flags in its `--help` (Beam's flags are accepted too)."""
    for option_class in option_classes:
        option_class._add_argparse_args(parser)


class IndexOptions(PipelineOptions):
    """Flags of the index build: `madr build-index` (one index, or hash partitions with Beam:
    `pipelines.index.run_build_index`) and the nightly job's index stage.

    The partitioned build's input and output reuse --embeddings (EvaluateOptions) and --output
    (OutputOptions).
    """

    @classmethod
    def _add_argparse_args(cls, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--num_index_shards",
            type=int,
            default=1,
            help="1: one ScaNN index; more: a Beam job builds that many hash partitions in parallel, one "
            "ScaNN index each (for catalogs beyond one worker's memory; accepts Beam flags such as --runner)",
        )
        parser.add_argument(
            "--max_k",
            type=int,
            default=10_000,
            help="Deepest k the index must serve well (Recall@10k by default); sizes leaves and re-ranking. "
            "The nightly job also evaluates to this depth: metrics at a deeper cut-off are not reported",
        )
        parser.add_argument(
            "--target_recall",
            type=float,
            default=DEFAULT_TARGET_RECALL,
            help="Recall@max_k (against exact search, on 1,000 held-out corpus vectors) the index, or each "
            "shard on its own vectors, must reach: leaves-to-search and re-ranking depth are widened until "
            "it does, or the build fails naming the best recall reached; 0 measures and records recall "
            "without tuning. A partitioned index also records the recall of its shards searched as one",
        )


class ExportOptions(PipelineOptions):
    """Flags of the Vertex AI Vector Search export (`pipelines.export.run_export_vertex`).

    Its inputs and output reuse --products (EmbedOptions), --embeddings (EvaluateOptions)
    and --output (OutputOptions).
    """

    @classmethod
    def _add_argparse_args(cls, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--vertex_aspects",
            default="category,brand,color",
            help="Comma-separated product aspects exported as Vertex restricts (category,brand,color)",
        )
        parser.add_argument(
            "--restricts",
            choices=("catalog", "predicted", "both"),
            default="catalog",
            help="Where restrict values come from: the catalog's aspects, the model's predictions written "
            "by `madr embed` (at or above --min_confidence), or both (predictions fill the catalog's gaps)",
        )
        parser.add_argument(
            "--vertex_num_files",
            type=int,
            default=0,
            help="JSON files to write, at most 5000 (0: the runner decides)",
        )
