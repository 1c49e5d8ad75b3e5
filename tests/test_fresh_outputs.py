"""Fresh outputs only (issue 13, item 3): a stage refuses a non-empty output folder unless given
--overwrite, writes into a staging folder that is moved into place when the run succeeds, and its
manifest lists exactly the files that run wrote.

`pipelines.storage.staged_output.fresh_output` is tested alone (locally and on a GCS emulator), then through
every stage that writes a folder: embed, build-index (single and partitioned), evaluate, enrich,
export-vertex, train, and the nightly job, whose rerun of an unfinished night must still work.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

import model.training.loop as loop_module
from jobs.cli import main, parse_command
from model.training import TrainingConfig
from pipelines.embed.counts import DeadLetterThresholdExceeded
from pipelines.embed.export import ExportVertexConfig, export_vertex
from pipelines.embed.stage import embed_catalog
from pipelines.evaluate.stage import evaluate_retrieval
from pipelines.index.partitioned import build_partitioned
from pipelines.io.parquet_reading import read_embeddings
from pipelines.nightly.run import NightlyJob, run_nightly
from pipelines.settings.options import IndexSettings
from pipelines.storage.stage_manifests import read_stage_manifest, verify_stage_folder
from pipelines.storage.staged_output import OutputNotEmpty, fresh_output, staging_folder
from pipelines.train.finetune import TrainJob, run_training
from product_data.synthetic import SyntheticConfig, generate_benchmark
from schemas.manifest import MANIFEST_FILE, ArtifactError
from tests.test_embed_pipeline import catalog, write_catalog, write_test_queries
from tests.test_gcs import BUCKET, gcs, gcs_emulator  # noqa: F401 - the emulator fixtures

STALE = "embeddings-00002-of-00003.parquet"


def _files(folder: Path) -> set[str]:
    return {path.relative_to(folder).as_posix() for path in folder.rglob("*") if path.is_file()}


def _refusal(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    """The one line `madr` prints for a refused output folder (exit code 2, no traceback)."""
    assert main(argv) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


def _exactly_listed(folder: Path) -> dict:
    """The manifest of a stage folder, after checking that it lists every other file and nothing else."""
    manifest = json.loads((folder / MANIFEST_FILE).read_text())
    assert set(manifest["files"]) == _files(folder) - {MANIFEST_FILE}
    return manifest


# The helper


@pytest.mark.parametrize("content", ["old.parquet", ".hidden", "empty-subfolder/"])
def test_a_non_empty_folder_is_refused_in_one_line_naming_it_and_the_flag(tmp_path, content) -> None:
    target = tmp_path / "out"
    (target / content).parent.mkdir(parents=True, exist_ok=True)
    if content.endswith("/"):
        (target / content).mkdir()
    else:
        (target / content).write_text("old")
    with pytest.raises(OutputNotEmpty) as refused, fresh_output(str(target)):
        pytest.fail("the block must not run")
    assert (
        str(refused.value)
        == f"{target} is not empty; write to a new folder, or pass --overwrite to replace it"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # nothing staged


def test_the_output_appears_only_when_the_run_succeeds(tmp_path) -> None:
    target = tmp_path / "out"
    target.mkdir()  # an empty folder is fine
    with fresh_output(str(target)) as staging:
        assert staging == staging_folder(str(target)) and Path(staging).parent == tmp_path
        Path(staging, "a.txt").write_text("first")
        assert _files(target) == set()  # nothing visible while the run is going
    assert _files(target) == {"a.txt"} and not Path(staging).exists()

    # --overwrite replaces the folder as a whole: the old file does not survive.
    with fresh_output(str(target), overwrite=True) as staging:
        Path(staging, "b.txt").write_text("second")
    assert _files(target) == {"b.txt"}

    # A failed run leaves the target as it was and its own files in the staging folder ...
    with pytest.raises(RuntimeError, match="the writer failed"), fresh_output(str(target), True) as staging:
        Path(staging, "half.txt").write_text("{")
        raise RuntimeError("the writer failed")
    assert _files(target) == {"b.txt"} and _files(Path(staging)) == {"half.txt"}
    # ... which the next run clears before it writes.
    with fresh_output(str(target), overwrite=True) as again:
        assert again == staging and _files(Path(again)) == set()
        Path(again, "c.txt").write_text("third")
    assert _files(target) == {"c.txt"} and sorted(p.name for p in tmp_path.iterdir()) == ["out"]

    # A run that fails before writing anything leaves nothing behind.
    with pytest.raises(RuntimeError), fresh_output(str(tmp_path / "new")):
        raise RuntimeError("bad flag")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_a_staging_folder_is_kept_only_when_it_can_be_resumed(tmp_path) -> None:
    target = tmp_path / "model"
    staging = Path(staging_folder(str(target)))
    (staging / "checkpoints" / "last").mkdir(parents=True)
    (staging / "weights.bin").write_text("from the interrupted run")

    def resumable(folder: str) -> bool:
        return (Path(folder) / "checkpoints" / "last").is_dir()

    with fresh_output(str(target), resumable=resumable) as folder:
        assert _files(Path(folder)) == {"weights.bin"}  # kept for the rerun
    (staging / "stale.bin").parent.mkdir(parents=True)
    (staging / "stale.bin").write_text("nothing to resume")
    with fresh_output(str(tmp_path / "model"), overwrite=True, resumable=resumable) as folder:
        assert _files(Path(folder)) == set()  # no checkpoint: cleared


def test_a_file_or_a_root_is_no_output_folder(tmp_path) -> None:
    (tmp_path / "file").write_text("x")
    with (
        pytest.raises(OutputNotEmpty, match="is a file, not a folder"),
        fresh_output(str(tmp_path / "file"), True),
    ):
        pass
    with pytest.raises(ValueError, match="below a bucket"):
        staging_folder("gs://bucket/")


def test_fresh_output_on_gcs_replaces_every_object_and_leaves_no_staging(gcs) -> None:  # noqa: F811
    bucket = gcs.client().bucket(BUCKET)
    bucket.blob("fresh/out/old-00000.parquet").upload_from_string(b"old")
    target = f"gs://{BUCKET}/fresh/out"

    def under(prefix: str) -> set[str]:
        return {blob.name[len(prefix) :] for blob in gcs.client().list_blobs(BUCKET, prefix=prefix)}

    with pytest.raises(OutputNotEmpty, match="--overwrite"), fresh_output(target):
        pass
    with fresh_output(target, overwrite=True) as staging:
        assert staging == f"gs://{BUCKET}/fresh/.out.staging"
        for name in ("a.parquet", "shard-0/manifest.json", "shard-0/data.npy", MANIFEST_FILE):
            bucket.blob(f"fresh/.out.staging/{name}").upload_from_string(name.encode())
        assert under("fresh/out/") == {"old-00000.parquet"}  # untouched until the run succeeds
    assert under("fresh/out/") == {"a.parquet", "shard-0/manifest.json", "shard-0/data.npy", MANIFEST_FILE}
    assert under("fresh/.out.staging") == set()
    assert bucket.blob(f"fresh/out/{MANIFEST_FILE}").download_as_bytes() == MANIFEST_FILE.encode()


# The stages


def _embed_flags(products: str, model: Path, output: Path, *extra: str) -> list[str]:
    return ["--products", products, "--model", str(model), "--output", str(output), *extra]


@pytest.fixture(scope="module")
def embedded(tmp_path_factory: pytest.TempPathFactory, tiny_model_dir: Path) -> dict[str, str]:
    """A catalog of 40 products, its embed output, and queries and judgments over it."""
    root = tmp_path_factory.mktemp("inputs")
    products = write_catalog(root / "products.parquet", catalog(40))
    embed_catalog(*parse_command("embed", _embed_flags(products, tiny_model_dir, root / "embeddings")))
    queries, judgments = write_test_queries(root)
    return {
        "products": products,
        "embeddings": str(root / "embeddings"),
        "queries": queries,
        "judgments": judgments,
    }


def _stale_folder(folder: Path, name: str = STALE) -> Path:
    (folder / name).parent.mkdir(parents=True)
    (folder / name).write_bytes(b"a shard of an earlier run")
    return folder


def test_embed_refuses_a_folder_holding_old_shards_and_overwrite_replaces_them(
    embedded, tiny_model_dir, tmp_path, capsys
) -> None:
    # The reported failure: old shards in the output folder were read back and hashed into the manifest.
    out = _stale_folder(tmp_path / "embeddings")
    flags = _embed_flags(embedded["products"], tiny_model_dir, out, "--num_shards", "2")
    line = _refusal(capsys, ["embed", *flags])
    assert (
        line
        == f"madr embed: error: {out} is not empty; write to a new folder, or pass --overwrite to replace it"
    )
    assert _files(out) == {STALE}

    assert main(["embed", *flags, "--overwrite"]) == 0
    manifest = _exactly_listed(out)
    assert STALE not in manifest["files"]
    assert {name for name in manifest["files"] if name.startswith("embeddings")} == {
        "embeddings-00000-of-00002.parquet",
        "embeddings-00001-of-00002.parquet",
    }
    verify_stage_folder(str(out), "madr-embeddings", "rerun the embed stage")
    ids, _, _ = read_embeddings(str(out))
    assert sorted(ids) == sorted(f"p{i}" for i in range(40))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["embeddings"]  # no staging folder left


def test_a_failed_embed_leaves_the_published_output_as_it_was(embedded, tiny_model_dir, tmp_path) -> None:
    out = tmp_path / "embeddings"
    embed_catalog(*parse_command("embed", _embed_flags(embedded["products"], tiny_model_dir, out)))
    before = {name: (out / name).read_bytes() for name in _files(out)}
    bad = write_catalog(tmp_path / "bad.parquet", [{**row, "title": ""} for row in catalog(5)])
    with pytest.raises(DeadLetterThresholdExceeded):
        embed_catalog(*parse_command("embed", _embed_flags(bad, tiny_model_dir, out, "--overwrite")))
    assert {name: (out / name).read_bytes() for name in _files(out)} == before
    verify_stage_folder(str(out), "madr-embeddings", "rerun the embed stage")


def test_build_index_single_and_partitioned_refuse_and_overwrite(embedded, tmp_path, capsys) -> None:
    single = _stale_folder(tmp_path / "index", "ids.parquet")
    argv = ["build-index", "--embeddings", embedded["embeddings"], "--out", str(single), "--depth", "20"]
    assert "pass --overwrite" in _refusal(capsys, argv)
    assert main([*argv, "--overwrite"]) == 0
    # The stale top-level ids.parquet is gone: one shard folder and the manifest, the shard's files its own.
    assert {name.split("/")[0] for name in _files(single)} == {MANIFEST_FILE, "shard-00000-of-00001"}
    shard = single / "shard-00000-of-00001"
    assert _files(shard) == set(json.loads((shard / MANIFEST_FILE).read_text())["files"]) | {MANIFEST_FILE}

    partitioned = _stale_folder(tmp_path / "partitioned", "shard-00009-of-00010/stale.npy")
    flags = ["--embeddings", embedded["embeddings"], "--output", str(partitioned), "--num_index_shards", "2"]
    with pytest.raises(OutputNotEmpty):
        build_partitioned(*parse_command("build-index", [*flags, "--depth", "20"]))
    report = build_partitioned(*parse_command("build-index", [*flags, "--depth", "20", "--overwrite"]))
    assert report.directory == str(partitioned) and report.count == 40
    assert {name.split("/")[0] for name in _files(partitioned)} == {
        MANIFEST_FILE,
        "shard-00000-of-00002",
        "shard-00001-of-00002",
    }


def test_evaluate_refuses_and_overwrite_lists_only_its_own_files(embedded, tiny_model_dir, tmp_path) -> None:
    out = _stale_folder(tmp_path / "eval", "per_query.parquet")
    (out / "run-00000-of-00009.parquet").write_bytes(b"a run file of an earlier evaluation")
    flags = [
        "--queries",
        embedded["queries"],
        "--judgments",
        embedded["judgments"],
        "--model",
        str(tiny_model_dir),
        "--embeddings",
        embedded["embeddings"],
        "--searcher",
        "exact",
        "--metrics",
        "recall@10,ndcg@5",
        "--output",
        str(out),
    ]
    with pytest.raises(OutputNotEmpty):
        evaluate_retrieval(*parse_command("evaluate", flags))
    result = evaluate_retrieval(*parse_command("evaluate", [*flags, "--overwrite"]))
    assert result["counts"]["queries_scored"] == 4
    manifest = _exactly_listed(out)
    assert "run-00000-of-00009.parquet" not in manifest["files"]
    assert read_stage_manifest(str(out), "madr-evaluation")["counts"] == result["counts"]


def test_enrich_and_export_refuse_and_overwrite(embedded, tmp_path, capsys) -> None:
    enriched = _stale_folder(tmp_path / "enriched", "enriched-00000-of-00009.parquet")
    argv = ["enrich", "--products", embedded["products"], "--embeddings", embedded["embeddings"]]
    argv += ["--output", str(enriched)]
    assert "pass --overwrite" in _refusal(capsys, argv)
    assert main([*argv, "--overwrite"]) == 0
    assert "enriched-00000-of-00009.parquet" not in _exactly_listed(enriched)["files"]

    vertex = _stale_folder(tmp_path / "vertex", "old.json")
    inputs = {"products": embedded["products"], "embeddings": embedded["embeddings"], "output": str(vertex)}
    with pytest.raises(OutputNotEmpty, match="pass --overwrite"):
        export_vertex(ExportVertexConfig(**inputs))
    counts = export_vertex(ExportVertexConfig(**inputs, overwrite=True))
    # Vertex imports every file of the folder: only this export's files may be there, and no folder.
    assert counts["vertex_records_written"] == 40
    assert {p.name for p in vertex.iterdir()} == {
        f"vectors-{n:05d}-of-{counts['vertex_files']:05d}.json" for n in range(counts["vertex_files"])
    }
    assert sorted(p.name for p in tmp_path.iterdir()) == ["enriched", "vertex"]


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> str:
    root = tmp_path_factory.mktemp("data")
    generate_benchmark(SyntheticConfig(num_products=300, num_queries=30, seed=5), str(root))
    return str(root)


def _train_job(dataset: str, backbone: Path, out: Path, overwrite: bool = False) -> TrainJob:
    return TrainJob(
        dataset=dataset,
        output=str(out),
        backbone=str(backbone),
        projection_dim=8,
        max_document_length=24,
        overwrite=overwrite,
    )


def test_train_refuses_a_model_directory_and_resumes_an_interrupted_run(
    dataset, tiny_backbone_dir, tmp_path, monkeypatch, caplog
) -> None:
    out = _stale_folder(tmp_path / "model", "old-weights.safetensors")
    loop = TrainingConfig(max_steps=2, batch_size=4, checkpoint_every=1, show_progress=False)
    with pytest.raises(OutputNotEmpty, match="pass --overwrite"):
        run_training(_train_job(dataset, tiny_backbone_dir, out), loop)

    # Killed right after its first checkpoint: the old model stays, the checkpoint waits in the staging.
    save = loop_module.save_checkpoint

    def save_then_die(*args, **kwargs) -> None:
        save(*args, **kwargs)
        raise KeyboardInterrupt("killed after step 1")

    monkeypatch.setattr(loop_module, "save_checkpoint", save_then_die)
    with pytest.raises(KeyboardInterrupt):
        run_training(_train_job(dataset, tiny_backbone_dir, out, overwrite=True), loop)
    assert _files(out) == {"old-weights.safetensors"}
    staging = Path(staging_folder(str(out)))
    assert (staging / "checkpoints" / "last").is_dir()

    monkeypatch.setattr(loop_module, "save_checkpoint", save)
    with caplog.at_level(logging.INFO, logger="model.training.checkpoints"):
        report = run_training(_train_job(dataset, tiny_backbone_dir, out, overwrite=True), loop)
    assert any("at step 1" in record.getMessage() for record in caplog.records), "did not resume"
    assert report.steps == 2 and report.model_dir == out
    manifest = json.loads((out / MANIFEST_FILE).read_text())
    assert set(manifest["files"]) == _files(out) - {MANIFEST_FILE}
    assert "old-weights.safetensors" not in manifest["files"] and not (out / "checkpoints").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]


def test_a_rerun_of_an_unfinished_night_replaces_its_unfinished_stage_folder(
    tmp_path, tiny_model_dir
) -> None:
    products = write_catalog(tmp_path / "mon.parquet", catalog(30))
    job = NightlyJob(
        catalog=products,
        model=str(tiny_model_dir),
        out=str(tmp_path / "nightly"),
        run_id="mon",
        index=IndexSettings(depth=20),
    )
    # What an interrupted attempt of an older madr left: a stage folder with a shard and no manifest.
    _stale_folder(tmp_path / "nightly" / "mon" / "embeddings")
    report = run_nightly(job)
    assert report.stages["embed"]["products_embedded"] == 30 and report.skipped == []
    embeddings = tmp_path / "nightly" / "mon" / "embeddings"
    assert STALE not in _exactly_listed(embeddings)["files"]
    assert sorted(p.name for p in (tmp_path / "nightly" / "mon").iterdir()) == [
        "catalog.json",  # which catalog the run folder is for (pipelines/nightly/inputs.py)
        "embeddings",
        "index",
        MANIFEST_FILE,
        "report.html",  # the morning report (pipelines/report), written after the run's manifest
    ]


def test_previous_may_name_a_run_folder_that_has_its_own_manifest(tmp_path: Path) -> None:
    """A nightly run folder holds its run manifest and embeddings/: --previous RUN finds the latter."""
    from pipelines.io.parquet_reading import previous_embeddings_folder
    from pipelines.storage.stage_manifests import write_stage_manifest

    run = tmp_path / "2026-11-24"
    (run / "embeddings").mkdir(parents=True)
    (run / "embeddings" / "embeddings-00000-of-00001.parquet").write_bytes(b"rows")
    write_stage_manifest(str(run / "embeddings"), kind="madr-embeddings", info={})
    (run / "manifest.json").write_text('{"kind": "madr-nightly-run"}')
    assert previous_embeddings_folder(str(run)) == str(run / "embeddings")
    assert previous_embeddings_folder(str(run / "embeddings")) == str(run / "embeddings")
    (run / "embeddings" / "embeddings-00000-of-00001.parquet").unlink()
    with pytest.raises(ArtifactError, match="is incomplete"):
        previous_embeddings_folder(str(run))
    with pytest.raises(ArtifactError, match="neither it nor"):
        previous_embeddings_folder(str(tmp_path))


def test_build_index_takes_every_scann_setting_from_its_flags(embedded, tmp_path) -> None:
    out = tmp_path / "tuned"
    settings = {
        "scoring": "asymmetric_hashing",
        "num_leaves": 4,
        "num_leaves_to_search": 2,
        "training_sample_size": 30,
        "dimensions_per_block": 4,
        "anisotropic_quantization_threshold": 0.3,
        "reorder_candidates": 20,
        "soar_lambda": 1.5,
        "reorder_precision": "int8",
    }
    flags = [part for name, value in settings.items() for part in (f"--{name}", str(value))]
    argv = ["build-index", "--embeddings", embedded["embeddings"], "--output", str(out), "--depth", "5"]
    # --target_recall 0: measured, not tuned, so the search settings stay as given.
    assert main([*argv, *flags, "--target_recall", "0"]) == 0
    config = json.loads((out / "shard-00000-of-00001" / MANIFEST_FILE).read_text())["config"]
    assert {name: config[name] for name in settings} == settings
