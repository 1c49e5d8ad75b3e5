"""The settings of the Beam stages, one frozen dataclass per concern, shared by the stages that read it.

A stage's config holds these as `nested` fields (`pipelines.settings.stage_config`): each field is a flag of
every command whose config holds it, declared once, here, with its default and help, and the command's parser
is generated from the config. None of them is a Beam `PipelineOptions`: Beam receives only the flags
left over (its own, --runner and the like). Drivers build the dataclasses instead of flags.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields
from typing import Any

from evaluation import DEFAULT_METRICS
from index_builder.config import DEFAULT_TARGET_RECALL, ReorderPrecision, ScannIndexConfig, Scoring
from index_builder.schedule import DEFAULT_SERVING_DEPTHS, parse_depths
from model.abstention import STATED_ASPECTS, AbstentionRule
from model.precisions import PRECISIONS, RUNTIMES
from pipelines.settings.dead_letter_limit import check_dead_letter_limit, dead_letter_limit
from pipelines.settings.depth import check_depth, retrieval_depth
from pipelines.settings.stage_config import setting, switch
from schemas import ECOMMERCE_ASPECTS

DEFAULT_METRICS_FLAG = ",".join(DEFAULT_METRICS)
SEARCHERS = ("ann", "exact", "auto")
# The torch devices madr runs on (torch itself accepts more, and names none of them in its error).
DEVICE_PATTERN = re.compile(r"cpu|cuda(:\d+)?|mps")


@dataclass(frozen=True)
class ModelSettings:
    """Which trained model encodes, where, in what batches and at what precision."""

    model: str = setting("", "Trained model directory, from `madr train`", required=True)
    device: str | None = setting(
        None, "Torch device: cpu, cuda, cuda:N, mps, or auto (the default: the GPU when present, else CPU)"
    )
    batch_size: int = setting(256, "Records per inference batch")
    chunk_size: int = setting(32, "Length-sorted sub-batch inside an inference batch")
    precision: str = setting(
        "auto",
        "Numeric precision of inference. auto (default): bf16 on a GPU or CPU with bf16 units, else fp32 "
        "(int8 lost 2.5 points of NDCG@10 on a store export even with VNNI); the log and the manifest say "
        "which and why (model/hardware.py). fp32. int8: ONNX Runtime's dynamic quantisation "
        "(CPU). bf16: torch autocast (GPU, or CPU). fp16: torch autocast, GPU only. Each one's speed and "
        "quality against fp32: docs/PERFORMANCE.md",
        choices=PRECISIONS,
    )
    runtime: str = setting(
        "auto",
        "What runs the model. auto (default): ONNX Runtime on a CPU (faster than torch there), torch on a "
        "GPU. The ONNX graph is exported on first use and cached by the weights' sha256 in $MADR_CACHE "
        "(default ~/.cache/madr)",
        choices=RUNTIMES,
    )

    def __post_init__(self) -> None:
        if self.batch_size < 1 or self.chunk_size < 1:
            raise ValueError(
                f"batch_size and chunk_size must be >= 1, got {self.batch_size}, {self.chunk_size}"
            )
        if self.precision not in PRECISIONS or self.runtime not in RUNTIMES:
            raise ValueError(f"precision must be one of {PRECISIONS} and runtime one of {RUNTIMES}")
        if self.device == "auto":
            object.__setattr__(self, "device", None)  # torch has no "auto": None picks the GPU or the CPU
        elif self.device is not None and not DEVICE_PATTERN.fullmatch(self.device):
            raise ValueError(f"--device must be cpu, cuda, cuda:N, mps or auto, got {self.device!r}")


ENCODE_AHEAD = ("auto", "true", "false")


@dataclass(frozen=True)
class EmbedSettings:
    """What `madr embed` reads, how it writes, and how many bad records it tolerates."""

    products: str = setting("", "Product Parquet file, folder or glob, local or gs://", required=True)
    num_shards: int = setting(0, "Embedding Parquet shards to write (0: the runner decides)")
    row_group_mb: int = setting(
        8, "Parquet row-group buffer per shard writer, MB; the writer holds about twice this"
    )
    previous: str | None = setting(
        None,
        "Previous embed output (or run folder): unchanged products reuse its rows; only new or changed "
        "products, or all of them under a new model version, are embedded",
    )
    torch_threads: int = setting(
        0,
        "torch intra-op threads per worker process (0: torch's default, one per core); 1 is much faster "
        "for small models on shared or oversubscribed cores",
    )
    encode_ahead: str = setting(
        "auto",
        "Run the model in a thread of its own a batch ahead of reading, planning and writing, so the "
        "device is not idle while they run: true, false, or auto (true where the model runs on a GPU)",
    )
    max_dead_letter_fraction: float = dead_letter_limit()

    def __post_init__(self) -> None:
        check_dead_letter_limit(self.max_dead_letter_fraction)
        if self.num_shards < 0 or self.row_group_mb < 1 or self.torch_threads < 0:
            raise ValueError("--num_shards and --torch_threads must be >= 0, --row_group_mb >= 1")
        if self.encode_ahead not in ENCODE_AHEAD:
            raise ValueError(
                f"--encode_ahead must be one of {', '.join(ENCODE_AHEAD)}, got {self.encode_ahead!r}"
            )

    def encodes_ahead(self, device: str) -> bool:
        """Whether the model runs ahead in its own thread, on `device` (the resolved torch device type)."""
        return self.encode_ahead == "true" or (self.encode_ahead == "auto" and device == "cuda")


# The default of --min_confidence where a prediction is acted on (a restrict, a filled gap, the
# calibration line). Confidences are calibrated probabilities (`model.aspects.calibration`), so 0.5
# fills whatever is more likely right than not: on the demo's held-out products category precision
# 0.851 at coverage 1.0; at 0.7, 0.951 at 0.872 (the uncalibrated heads at 0.5: 0.973 at 0.787). On the
# adapted store export, 0.7 keeps brand and category at 20/20 and 21/21 (docs/RESULTS.md, issue 23).
DEFAULT_PREDICTION_THRESHOLD = 0.7
# An aspect's gaps are filled only when, on the products whose value the catalog gives, the predictions at
# the threshold agree with it this often. A model trained on another taxonomy predicts the store export's
# categories at P >= 0.7 with precision 0.70 (docs/RESULTS.md, issue 23): its category guesses for gaps
# would be as wrong (`pipelines.embed.agreement`).
DEFAULT_MIN_AGREEMENT = 0.8


@dataclass(frozen=True)
class ConfidenceThreshold:
    """The one --min_confidence of every command that writes or reads predicted aspect values; alone for
    those that only show and filter on them (`madr search`, `madr export-serving`). Its default is
    `DEFAULT_PREDICTION_THRESHOLD`; `madr embed` declares its own (`nested(..., min_confidence=0.0)`)."""

    min_confidence: float = setting(
        DEFAULT_PREDICTION_THRESHOLD,
        "Lowest confidence P(x) of a predicted aspect value. embed: write a value only at or above it, "
        "keeping its confidence (default 0: every prediction); evaluate: the calibration line's threshold; "
        "enrich: what fills a gap; export-vertex: a predicted restrict's threshold; search and "
        f"export-serving: the lowest shown or filtered on ({DEFAULT_PREDICTION_THRESHOLD} for all but embed)",
    )

    def __post_init__(self) -> None:
        if not 0 <= self.min_confidence <= 1:
            raise ValueError(f"--min_confidence must be in [0, 1], got {self.min_confidence}")


@dataclass(frozen=True)
class PredictionThreshold(ConfidenceThreshold):
    """--min_confidence and what else decides which predicted values a stage writes or fills with."""

    stated_aspects: tuple[str, ...] = setting(
        STATED_ASPECTS,
        "Aspects whose predicted value embed writes only when the product's text states it (whole words; "
        "case and accents aside): a brand or colour the text does not name is left unknown instead of put "
        "on the nearest one the model knows. Give an empty value to trust the confidence alone",
    )

    min_agreement: float = setting(
        DEFAULT_MIN_AGREEMENT,
        "enrich (and export-vertex --restricts both): fill an aspect's gaps only when its predictions at "
        "--min_confidence agree with the catalog's own values on at least this share of the products that "
        "have one (checked on 20 or more); a model trained on another taxonomy is not let guess this one's "
        "categories",
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if not 0 <= self.min_agreement <= 1:
            raise ValueError(f"--min_agreement must be in [0, 1], got {self.min_agreement}")
        object.__setattr__(self, "stated_aspects", tuple(self.stated_aspects))

    def abstention(self) -> AbstentionRule:
        """The rule that decides which predicted values are written (embed) or count as written (evaluate's
        annotation quality); stages that read values already written compare `min_confidence` alone."""
        return AbstentionRule(self.min_confidence, self.stated_aspects)


@dataclass(frozen=True)
class EvaluateSettings:
    """What `madr evaluate` retrieves for, with which searcher, to what depth, scored how."""

    queries: str = setting("", "Query Parquet file, local or gs://", required=True)
    judgments: str = setting("", "Judgment Parquet file, local or gs://", required=True)
    index: str | None = setting(
        None, "Index artifact directory (from `madr build-index`), for --searcher ann"
    )
    embeddings: str | None = setting(None, "Embedding folder (from `madr embed`), for --searcher exact")
    split: str = setting("test", "Query split to evaluate")
    depth: int = retrieval_depth()
    metrics: str = setting(DEFAULT_METRICS_FLAG, "Comma-separated metrics")
    searcher: str = setting(
        "ann",
        "ann: the ScaNN index; exact: brute force; auto (needs --index and --embeddings): whichever is "
        "faster on a sample of the queries at --depth, the index only if its recall there is within 1%% of "
        "exact; both are still reported unless --compare_exact false",
        choices=SEARCHERS,
    )
    compare_exact: str | None = switch(
        "Also search exactly over --embeddings in the same pipeline and report, per recall@k, the recall the "
        "index loses (exact − ann); default: true when --searcher ann has --embeddings too",
    )
    zero_shot: str | None = switch(
        "Also evaluate the bundled backbone used zero-shot (mean pooling, untrained: what "
        "sentence-transformers gives) on the same queries over --products, and report each metric's "
        "difference from it with a paired t-test; default: true when --products is given",
    )
    zero_shot_previous: str | None = setting(
        None,
        "An earlier evaluation's zero-shot embeddings (its zero_shot/embeddings folder): the zero-shot row "
        "reuses the rows of unchanged products and embeds only new or changed ones, as `madr embed "
        "--previous` does; the nightly passes last night's",
    )
    lexical: str | None = switch(
        "BM25 (Lucene scoring, k1 1.2, b 0.75, each product's locale's Snowball analyzer) over the text the "
        "model reads, and BM25 fused with the zero-shot run by reciprocal rank (k 60), each compared with "
        "the model (paired t-test); with an --index that carries BM25 its own BM25 is used and the ranking "
        "reported is the served one, the dense ranking fused with it; false: neither (nor BM25 in the "
        "nightly's index); default: true when the zero-shot row is evaluated or the index carries BM25",
    )
    allow_model_mismatch: str | None = switch(
        "Evaluate even when --index or --embeddings record another model than --model (their manifests' "
        "model_fingerprint); refused by default, and recorded in the evaluation's manifest when allowed",
    )
    positive_min_grade: int | None = setting(
        None,
        "Lowest relevant grade; default: the positive_min_grade of the dataset's manifest.json next to "
        "--judgments (3 for ESCI, 2 for WANDS), else 2",
    )
    max_dead_letter_fraction: float = dead_letter_limit()

    def __post_init__(self) -> None:
        check_dead_letter_limit(self.max_dead_letter_fraction)
        if self.searcher not in SEARCHERS:
            raise ValueError(f"--searcher must be one of {SEARCHERS}, got {self.searcher!r}")
        for name in ("compare_exact", "zero_shot", "lexical", "allow_model_mismatch"):
            if getattr(self, name) not in (None, "true", "false"):
                raise ValueError(f"--{name} must be true or false, got {getattr(self, name)!r}")
        check_depth(self.depth)


@dataclass(frozen=True)
class IndexSettings:
    """How an index is built: `madr build-index` and the nightly job's index stage, both
    `pipelines.index.partitioned.build_partitioned` (one shard by default, or hash partitions).

    The ScaNN fields are `index_builder.config.ScannIndexConfig`'s; each left unset keeps the value
    `ScannIndexBuilder.for_corpus` derives from the corpus size (`index_builder.builder.config_for_corpus`).
    """

    num_index_shards: int = setting(
        1,
        "1: one ScaNN index; more: a Beam job builds that many hash partitions in parallel, one ScaNN index "
        "each (for catalogs beyond one worker's memory; accepts Beam flags such as --runner)",
    )
    depth: int = retrieval_depth()
    target_recall: float = setting(
        DEFAULT_TARGET_RECALL,
        "Recall@depth (against exact search, on 1,000 held-out corpus vectors) the index, or each shard on "
        "its own vectors, must reach: leaves-to-search and re-ranking depth are widened until it does, or "
        "the build fails naming the best recall reached; 0 measures and records recall without tuning (and "
        "keeps the ScaNN settings below as given). A partitioned index also records the recall of its "
        "shards searched as one",
    )
    serving_depths: str = setting(
        ",".join(str(depth) for depth in DEFAULT_SERVING_DEPTHS),
        "Depths a search server asks for, tuned each on its own besides --depth: for each, the cheapest "
        "leaves-to-search and re-ranking depth reaching --target_recall, served by the tree or by exact "
        "scoring, whichever answered faster there (the manifest's recall.schedule). ScaNN's own defaults in "
        "the artifact are the shallowest depth's",
    )
    scoring: str | None = setting(
        None,
        "ScaNN: asymmetric_hashing (quantised, re-ranked) or brute_force (exact); default: brute force "
        "below 5,000 vectors or when --depth is a twentieth of the corpus or more",
        choices=tuple(s.value for s in Scoring),
    )
    num_leaves: int | None = setting(
        None, "ScaNN: k-means leaves of the tree (0: no tree); default ~2 sqrt(n)"
    )
    num_leaves_to_search: int | None = setting(
        None, "ScaNN: leaves a k = 10 search opens (deeper searches open more); default ~10%% of the leaves"
    )
    training_sample_size: int | None = setting(
        None, "ScaNN: vectors the tree and codebooks train on; default min(n, max(250000, 100 per leaf))"
    )
    dimensions_per_block: int | None = setting(None, "ScaNN: asymmetric hashing block width (default 2)")
    anisotropic_quantization_threshold: float | None = setting(
        None, "ScaNN: anisotropic quantisation threshold in [0, 1) (default 0.2, for unit vectors)"
    )
    reorder_candidates: int | None = setting(
        None, "ScaNN: candidates re-ranked exactly for a k = 10 search (default min(n, 1000))"
    )
    soar_lambda: float | None = setting(
        None, "ScaNN: SOAR spilling into a second leaf, lambda in (0, 10], e.g. 1.5 (default: none)"
    )
    reorder_precision: str | None = setting(
        None,
        "ScaNN: the vectors re-ranking reads, float32 (exact scores, default) or int8",
        choices=tuple(p.value for p in ReorderPrecision),
    )

    def __post_init__(self) -> None:
        check_depth(self.depth)
        if self.num_index_shards < 1:
            raise ValueError(f"--num_index_shards must be >= 1, got {self.num_index_shards}")
        parse_depths(self.serving_depths)

    @property
    def depths(self) -> tuple[int, ...]:
        """`serving_depths` as ints (`depth` is added by the build)."""
        return parse_depths(self.serving_depths)

    def scann_settings(self) -> dict[str, Any]:
        """The ScaNN fields given, for `config_for_corpus`."""
        return {name: getattr(self, name) for name in SCANN_FIELDS if getattr(self, name) is not None}


# The IndexSettings fields that are ScannIndexConfig's: the one list of ScaNN settings is that config's.
SCANN_FIELDS = tuple(
    f.name for f in fields(IndexSettings) if f.name in {c.name for c in fields(ScannIndexConfig)}
)


# Vertex AI Vector Search reads at most this many files from one folder.
MAX_VERTEX_FILES = 5_000


@dataclass(frozen=True)
class ExportSettings:
    """What `madr export-vertex` writes for Vertex AI Vector Search besides the vectors."""

    vertex_aspects: tuple[str, ...] = setting(
        ECOMMERCE_ASPECTS, "Comma-separated product aspects exported as Vertex restricts"
    )
    restricts: str = setting(
        "catalog",
        "Where restrict values come from: the catalog's aspects, the model's predictions written by "
        "`madr embed` (at or above --min_confidence), or both (predictions fill the catalog's gaps)",
        choices=("catalog", "predicted", "both"),
    )
    vertex_num_files: int = setting(0, "JSON files to write, at most 5000 (0: the runner decides)")

    def __post_init__(self) -> None:
        object.__setattr__(self, "vertex_aspects", tuple(self.vertex_aspects))
        files = self.vertex_num_files
        if isinstance(files, bool) or not isinstance(files, int) or not 0 <= files <= MAX_VERTEX_FILES:
            raise ValueError(
                f"--vertex_num_files must be in [0, {MAX_VERTEX_FILES}] (Vertex's limit), got {files!r}"
            )
