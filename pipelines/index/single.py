"""`madr build-index`: train a ScaNN index on an embed stage's shards and save the artifact."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from index_builder.builder import config_for_corpus
from index_builder.recall import check_target, recall_summary
from index_builder.tuned import sizing_depth
from index_builder.update import update_or_train
from pipelines.artifacts import fresh_output, read_embeddings
from pipelines.index.build_inputs import catalog_lexical_index, tuning_query_vectors
from pipelines.index.config import IndexBuildConfig
from pipelines.index.manifest import previous_shard, shard_recall
from pipelines.local_copies import local_output
from pipelines.verify import embeddings_digest, verified_stage_manifest

LOGGER = logging.getLogger(__name__)
# A tree + AH build of 1M x 128 took 38.9 s on the 2-core machine (bench/scaling_bench.py).
TRAIN_SECONDS_PER_MILLION_128D = 40.0


@dataclass(frozen=True)
class IndexBuildReport:
    count: int
    dimension: int
    seconds: float
    config: str
    directory: str
    # What the build measured: `index_builder.recall.RecallReport.to_dict()`, also in the manifest.
    recall: dict | None = None


def build_index(config: IndexBuildConfig) -> IndexBuildReport:
    """Index the shards of the config's embeddings into its output, after checking them against their
    manifest (`verify` False: --no_verify, with a warning). A non-empty output is refused unless
    `overwrite`; the index appears there only once it is saved whole (`artifacts.fresh_output`).

    Recall@min(max_k, n - 1) against exact search is measured on held-out corpus vectors and written
    into the manifest; with `target_recall` (0 or None: measure only) the search settings are widened
    until it is met, else `index_builder.recall.RecallTargetError` (a ValueError) names the best
    recall reached and nothing is written (`index_builder.recall`). The ScaNN settings given replace
    those the corpus size would give (`ScannIndexConfig` fields, `index_builder.builder.config_for_corpus`).
    One shard only: `build_index_artifact` sends more to the partitioned build."""
    build, (embeddings, out, settings) = config, (config.embeddings, config.output, config.index)
    max_k, target_recall, scann = settings.depth, settings.target_recall, settings.scann_settings()
    check_target(target_recall)
    with fresh_output(out, config.overwrite) as staging:
        verified_stage_manifest(embeddings, "madr-embeddings", config.verify)
        started = time.perf_counter()
        ids, matrix, manifest = read_embeddings(embeddings)
        rate = len(ids) / max(time.perf_counter() - started, 1e-9)
        LOGGER.info("read %d embeddings of %d dimensions (%.0f/s)", len(ids), matrix.shape[1], rate)
        sizing = sizing_depth(max_k, settings.depths, target_recall)
        config = config_for_corpus(len(ids), matrix.shape[1], sizing, scann)
        # One ScaNN call, so no running count: its expected time instead (docs/PERFORMANCE.md's 1M build).
        expected = TRAIN_SECONDS_PER_MILLION_128D * len(ids) / 1e6 * matrix.shape[1] / 128
        LOGGER.info("building a ScaNN index (about %.0f s expected): %s", expected, config)
        started = time.perf_counter()
        # Trained, tuned to the target, and replaced by exact scoring where that is faster.
        earlier = shard_recall(build.previous_index, 0, 1)
        queries = tuning_query_vectors(build, embeddings)
        # Last night's tree updated where it may be (`index_builder.update`), else a new one trained.
        index, recall, matrix = update_or_train(
            previous_shard(build.previous_index, 0, 1),
            config,
            matrix,
            ids,
            max_k,
            target_recall,
            serving_depths=settings.depths,
            earlier=earlier,
            explicit=scann,
            evaluation_queries=queries,
        )
        ids = list(index.ids)
        if build.products:
            index = index.with_lexical(catalog_lexical_index(build.products, ids))
        seconds = time.perf_counter() - started
        built_rate = len(ids) / max(seconds, 1e-9)
        LOGGER.info("built and tuned in %.1f s (%.0f vectors/s)", seconds, built_rate)
        LOGGER.info("%s; search settings: %s", recall_summary(recall), index.config)
        # ScaNN saves local files only: a gs:// output is saved locally, then copied into its staging.
        with local_output(staging) as folder:
            index.save(
                folder,
                model_id=manifest["model_id"],
                model_version=manifest["model_version"],
                # The model the embeddings record: evaluate refuses this index with another model.
                extra={
                    "model_fingerprint": manifest.get("model_fingerprint"),
                    "embeddings": embeddings,
                    # Which embed output it indexes: evaluate refuses it beside other --embeddings.
                    "embeddings_digest": embeddings_digest(manifest),
                },
                recall=recall.to_dict(),
            )
    return IndexBuildReport(len(ids), int(matrix.shape[1]), seconds, str(index.config), out, recall.to_dict())
