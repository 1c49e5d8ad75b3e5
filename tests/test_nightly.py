"""The nightly job: incremental runs, idempotent reruns, LATEST moves only after success."""

from __future__ import annotations

import argparse
import dataclasses
import json

import pytest

from jobs.cli import main, parse_command
from jobs.command_table import load_command
from pipelines.evaluate.inputs import EvaluationInputRefused
from pipelines.nightly.inputs import CatalogChanged
from pipelines.nightly.latest import read_latest
from pipelines.nightly.run import NightlyJob, run_nightly
from pipelines.settings.options import IndexSettings
from tests.test_embed_pipeline import catalog, write_catalog, write_test_queries


@pytest.fixture
def evaluation_files(tmp_path) -> tuple[str, str]:
    return write_test_queries(tmp_path)


def _job(
    tmp_path, model, products: str, run_id: str, evaluation: tuple[str, str] | None = None
) -> NightlyJob:
    queries, judgments = evaluation or (None, None)
    return NightlyJob(
        catalog=products,
        model=str(model),
        out=str(tmp_path / "nightly"),
        run_id=run_id,
        queries=queries,
        judgments=judgments,
        index=IndexSettings(depth=50),
    )


def test_two_nights_reuse_rerun_and_crash(tmp_path, tiny_model_dir, evaluation_files, monkeypatch) -> None:
    from pipelines.index import partitioned

    earlier_builds_read, read = [], partitioned.shard_recall
    monkeypatch.setattr(
        partitioned, "shard_recall", lambda folder, *a: earlier_builds_read.append(folder) or read(folder, *a)
    )
    monday = catalog(40)
    first = run_nightly(
        _job(
            tmp_path, tiny_model_dir, write_catalog(tmp_path / "mon.parquet", monday), "mon", evaluation_files
        )
    )
    assert first.previous_run_id is None and first.stages["embed"]["products_embedded"] == 40
    assert read_latest(str(tmp_path / "nightly"))["run_id"] == "mon"
    assert "recall@10" in first.stages["evaluate"]

    tuesday = [dict(p) for p in monday]
    tuesday[0]["title"] = "changed tonight"
    tuesday[1]["title"] = "changed tonight too"  # 2 of 40 = 5% changed
    tuesday_path = write_catalog(tmp_path / "tue.parquet", tuesday)
    second = run_nightly(_job(tmp_path, tiny_model_dir, tuesday_path, "tue", evaluation_files))
    assert second.previous_run_id == "mon"
    assert (second.stages["embed"]["products_reused"], second.stages["embed"]["products_embedded"]) == (38, 2)
    # Tuesday's index build reads what Monday's measured (it may ship exact scoring again untimed).
    assert earlier_builds_read == [None, str(tmp_path / "nightly" / "mon" / "index")]
    # The backbone used zero-shot is evaluated every night, and costs the churn: Monday's zero-shot
    # vectors of the 38 unchanged products are reused.
    for night, counts in (("mon", (0, 40)), ("tue", (38, 2))):
        zero_shot = tmp_path / "nightly" / night / "eval" / "zero_shot"
        embedded = json.loads((zero_shot / "embeddings" / "manifest.json").read_text())["counts"]
        assert (embedded["products_reused"], embedded["products_embedded"]) == counts
        assert (zero_shot / "eval" / "per_query.parquet").is_file()
    latest = read_latest(str(tmp_path / "nightly"))
    assert latest["run_id"] == "tue" and latest["previous_run_id"] == "mon"

    again = run_nightly(_job(tmp_path, tiny_model_dir, tuesday_path, "tue", evaluation_files))
    assert again.skipped == ["all"] and read_latest(str(tmp_path / "nightly"))["run_id"] == "tue"

    # A missing queries file is found before anything is embedded: Thursday is refused, and says why.
    missing = ("/nonexistent/queries.parquet", "/nonexistent/judgments.parquet")
    with pytest.raises(EvaluationInputRefused, match=r"--queries /nonexistent/queries\.parquet matches no"):
        run_nightly(_job(tmp_path, tiny_model_dir, tuesday_path, "thu", missing))
    assert not (tmp_path / "nightly" / "thu" / "embeddings").exists()
    assert json.loads((tmp_path / "nightly" / "thu" / "status.json").read_text())["state"] == "refused"
    # Wednesday crashes in evaluation (its inputs are sound; the stage dies): LATEST stays on Tuesday.
    from pipelines.nightly import run as nightly_run

    def crash(*args: object, **kwargs: object) -> None:
        raise RuntimeError("the evaluation's worker died")

    with monkeypatch.context() as patched:
        patched.setattr(nightly_run, "evaluate_retrieval", crash)
        with pytest.raises(RuntimeError, match="worker died"):
            run_nightly(_job(tmp_path, tiny_model_dir, tuesday_path, "wed", evaluation_files))
    assert read_latest(str(tmp_path / "nightly"))["run_id"] == "tue"
    assert not (tmp_path / "nightly" / "wed" / "manifest.json").exists()
    # The rerun with the inputs fixed skips the finished stages and publishes.
    fixed = run_nightly(_job(tmp_path, tiny_model_dir, tuesday_path, "wed", evaluation_files))
    assert set(fixed.skipped) == {"embed", "index"} and "evaluate" in fixed.stages
    assert read_latest(str(tmp_path / "nightly"))["run_id"] == "wed"
    run_manifest = json.loads((tmp_path / "nightly" / "wed" / "manifest.json").read_text())
    assert run_manifest["kind"] == "madr-nightly-run" and run_manifest["previous_run_id"] == "tue"
    # --precision auto (the default), with no CPU features known to the tests (conftest): fp32, and why.
    assert run_manifest["precision"] == {"precision": "fp32", "reason": "the CPU's features are unknown"}


def test_a_second_run_of_the_day_on_a_changed_catalog_is_refused_not_published(
    tmp_path, tiny_model_dir
) -> None:
    """The run folder of today was made for this morning's catalog: a rerun after it changed would skip
    its finished stages and publish the old one as new. It is refused, naming the way out."""
    path = write_catalog(tmp_path / "catalog.parquet", catalog(20))
    first = run_nightly(_job(tmp_path, tiny_model_dir, path, "2026-11-26"))
    assert first.stages["embed"]["products_embedded"] == 20
    changed = catalog(20)
    changed[0]["title"] = "a new title this afternoon"
    write_catalog(tmp_path / "catalog.parquet", changed + catalog(25)[20:])
    with pytest.raises(CatalogChanged, match="pass another --run_id"):
        run_nightly(_job(tmp_path, tiny_model_dir, path, "2026-11-26"))
    assert read_latest(str(tmp_path / "nightly"))["run_id"] == "2026-11-26"
    second = run_nightly(_job(tmp_path, tiny_model_dir, path, "2026-11-26-2"))
    assert second.stages["embed"]["products_embedded"] + second.stages["embed"]["products_reused"] == 25
    assert read_latest(str(tmp_path / "nightly"))["run_id"] == "2026-11-26-2"
    recorded = json.loads((tmp_path / "nightly" / "2026-11-26-2" / "manifest.json").read_text())
    assert recorded["catalog_fingerprint"]["files"] == 1


def test_a_same_day_rerun_after_a_wrong_catalog_is_one_error_line_then_restart_run_goes_on(
    tmp_path, tiny_model_dir, capsys
) -> None:
    """As a new user met it: a nightly over an empty catalog (not published), then the same day with the
    right folder. The refusal is one `error:` line, exit 2, naming both ways on; --restart_run takes one."""

    for folder in ("empty", "right"):
        (tmp_path / folder).mkdir()
    empty = write_catalog(tmp_path / "empty" / "catalog.parquet", [])
    write_catalog(tmp_path / "right" / "catalog.parquet", catalog(12))
    root = tmp_path / "nightly"
    argv = ["nightly", "--model", str(tiny_model_dir), "--output", str(root), "--run_id", "2026-11-28"]
    assert main([*argv, "--products", str(tmp_path / "empty")]) == 2
    capsys.readouterr()
    assert main([*argv, "--products", str(tmp_path / "right")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("madr nightly: error: run folder ")
    assert "--run_id 2026-11-28-2" in err[0] and "--restart_run" in err[0]
    assert str(tmp_path / "right") in err[0]
    assert "--catalog" not in err[0]
    assert main([*argv, "--products", str(tmp_path / "right"), "--restart_run"]) == 0
    assert read_latest(str(root))["run_id"] == "2026-11-28"
    # A published run is never discarded.
    assert main([*argv, "--products", str(tmp_path / "right"), "--restart_run"]) == 2
    assert "was published (LATEST) and is never discarded" in capsys.readouterr().err
    assert str(empty).endswith("catalog.parquet")


def test_the_nightly_enriches_and_exports_from_the_same_embeddings(tmp_path, tiny_model_dir) -> None:
    path = write_catalog(tmp_path / "catalog.parquet", catalog(12))
    job = dataclasses.replace(
        _job(tmp_path, tiny_model_dir, path, "night"),
        enrich=True,
        export_vertex=True,
        beam_args=("--restricts", "both"),
    )
    report = run_nightly(job)
    assert report.stages["enrich"]["enriched_products_written"] == 12
    assert report.stages["export-vertex"]["vertex_files"] >= 1
    run = tmp_path / "nightly" / "night"
    assert list((run / "enriched").glob("enriched-*.parquet")) and list((run / "vertex").glob("vectors-*"))
    # A rerun of the finished night skips everything, the extra stages too.
    assert run_nightly(job).skipped == ["all"]


def test_the_nightly_writes_the_serving_bundle_of_its_index(tmp_path, tiny_model_dir, capsys) -> None:
    """Issue 66: `--export_serving` writes serving/, the bundle `madr serve` loads, from tonight's index."""
    from serving.bundle import open_bundle
    from serving.search import answer_queries

    path = write_catalog(tmp_path / "catalog.parquet", catalog(12))
    root = tmp_path / "nightly"
    argv = ["nightly", "--model", str(tiny_model_dir), "--products", str(path), "--output", str(root)]
    assert main([*argv, "--run_id", "night", "--export_serving"]) == 0
    bundle = open_bundle(root / "night" / "serving")
    assert len(bundle.catalog.ids) == 12 and bundle.lexical
    (answer,) = answer_queries(bundle, ["a product"], 3)
    assert len(answer.hits) == 3 and answer.how == "index + BM25, RRF"
    # The morning report says what servers load, from the bundle's manifest.
    page = (root / "night" / "report.html").read_text()
    assert "Serving bundle: 12 products with BM25, query encoder at fp32, least cosine to the model" in page
    assert f"madr serve --bundle {root / 'night' / 'serving'}" in page


def test_a_run_id_must_be_a_plain_name(tmp_path) -> None:
    for bad in ("", "a/b", "LATEST", "..", "a b"):
        with pytest.raises(ValueError, match="--run_id"):
            NightlyJob(catalog="c", model="m", out=str(tmp_path), run_id=bad)


def _nightly(argv: list[str]) -> NightlyJob:
    """The job `madr nightly ARGV` runs, its command line parsed as the CLI parses it."""
    return parse_command("nightly", argv)[0]


def test_the_index_flags_of_madr_nightly_reach_the_index_stage() -> None:
    """The nightly's parser consumes the index flags: they must arrive in the index config, not vanish."""
    job = _nightly(
        [
            "--products",
            "p",
            "--model",
            "m",
            "--output",
            "o",
            "--run_id",
            "r",
            "--num_leaves",
            "64",
            "--soar_lambda",
            "1.5",
            "--depth",
            "500",
            "--target_recall",
            "0",
            "--direct_num_workers",
            "2",
        ]
    )
    index = job.stages.index.index
    assert (index.num_leaves, index.soar_lambda, index.depth, index.target_recall) == (64, 1.5, 500, 0)
    assert job.beam_args == ("--direct_num_workers", "2")


def test_a_stages_own_flags_reach_that_stage_only_and_override_the_jobs() -> None:
    """--embed_flags: embed in int8 (and on other workers) while evaluate encodes its queries as given."""
    flags = ["--products", "p", "--model", "m", "--output", "o", "--run_id", "r", "--queries", "q"]
    job = _nightly(
        [*flags, "--judgments", "j", "--batch_size", "8", "--embed_flags", "--precision int8 --batch_size 64"]
    )
    embed, evaluate = job.stages.embed, job.stages.evaluate
    assert (embed.model.precision, embed.model.batch_size) == ("int8", 64)
    assert (evaluate.model.precision, evaluate.model.batch_size) == ("auto", 8)
    # A stage's Beam options hold no stage's flag: --batch_size is embed's and evaluate's, read there.
    assert job.stage_args("index") == [] and job.stage_args("embeddings") == []


def test_one_min_confidence_reaches_every_stage_of_the_nightly_and_every_command() -> None:
    """--min_confidence is declared once (`PredictionThreshold`): the nightly's embed and evaluate get it
    from the pass-through flags, and each command that takes it shows the same flag."""
    flags = ["--products", "p", "--model", "m", "--output", "o", "--run_id", "r", "--queries", "q"]
    job = _nightly([*flags, "--judgments", "j", "--min_confidence", "0.7"])
    assert job.stages.embed.threshold.min_confidence == 0.7
    assert job.stages.evaluate.threshold.min_confidence == 0.7
    helps, defaults = set(), {}
    for name in ("embed", "evaluate", "enrich", "export-vertex", "search", "export-serving"):
        command = argparse.ArgumentParser()
        load_command(name).add_arguments(command)
        (action,) = [a for a in command._actions if "--min_confidence" in a.option_strings]
        helps.add(action.help)
        defaults[name] = action.default
    assert len(helps) == 1  # one declaration
    # One default, DEFAULT_PREDICTION_THRESHOLD, but embed's own (it writes every prediction, with its
    # confidence): `nested(PredictionThreshold, min_confidence=0.0)`, said in the help.
    assert defaults == {"embed": 0.0, **{name: 0.7 for name in defaults if name != "embed"}}
    unset = _nightly([*flags, "--judgments", "j"])
    assert (unset.stages.embed.threshold.min_confidence, unset.stages.evaluate.threshold.min_confidence) == (
        0.0,
        0.7,
    )


def test_the_nightly_evaluates_with_one_searcher_unless_asked_for_both() -> None:
    """Issue 26: one copy of the corpus per evaluate worker; the comparison with exact search on request."""
    flags = [
        "--products",
        "p",
        "--model",
        "m",
        "--output",
        "o",
        "--run_id",
        "r",
        "--queries",
        "q",
        "--judgments",
        "j",
    ]
    job = _nightly(flags)
    assert (job.stages.evaluate.evaluate.searcher, job.stages.evaluate.evaluate.compare_exact) == (
        "auto",
        "false",
    )
    both = _nightly([*flags, "--evaluate_flags", "--compare_exact true"])
    assert both.stages.evaluate.evaluate.compare_exact == "true"


def test_stage_flags_of_the_nightly_override_the_jobs_settings_and_reach_the_stages_manifests(
    tmp_path, tiny_model_dir, evaluation_files
) -> None:
    """Issue 48: `--index_flags '--num_leaves 3'` built the default tree and `--evaluate_flags '--depth 5'`
    evaluated at max_k, silently. Typed as a user types them; read back from each stage's manifest."""
    from jobs.cli import main

    write_catalog(tmp_path / "catalog.parquet", catalog(12))
    queries, judgments = evaluation_files
    root = tmp_path / "nightly"
    argv = [
        *("nightly", "--model", str(tiny_model_dir), "--products", str(tmp_path / "catalog.parquet")),
        *("--output", str(root), "--run_id", "night", "--queries", queries, "--judgments", judgments),
        *("--depth", "8", "--index_flags", "--num_leaves 3 --scoring brute_force --target_recall 0"),
        *("--evaluate_flags", "--depth 5 --searcher exact"),
    ]
    assert main(argv) == 0
    index = json.loads((root / "night" / "index" / "shard-00000-of-00001" / "manifest.json").read_text())
    assert (index["config"]["num_leaves"], index["config"]["scoring"]) == (3, "brute_force")
    evaluation = json.loads((root / "night" / "eval" / "manifest.json").read_text())
    evaluation = evaluation.get("info", evaluation)
    assert (evaluation["depth"], evaluation["searcher"]) == (5, "exact")


def test_the_old_name_max_k_still_sets_the_depth_with_a_warning() -> None:
    """Issue 48: one name for the retrieval depth (--depth); --max_k, build-index's and the nightly's old
    name, still sets it, on the job's command line and in --index_flags, and says what it is now."""
    flags = ["--products", "p", "--model", "m", "--output", "o", "--run_id", "r", "--queries", "q"]
    flags += ["--judgments", "j"]
    with pytest.warns(FutureWarning, match=r"--max_k is deprecated: it is now --depth"):
        job = _nightly([*flags, "--max_k", "300"])
    assert (job.stages.index.index.depth, job.stages.evaluate.evaluate.depth) == (300, 300)
    with pytest.warns(FutureWarning, match=r"--max_k is deprecated"):
        job = _nightly([*flags, "--index_flags", "--max_k 400"])
    assert (job.stages.index.index.depth, job.stages.evaluate.evaluate.depth) == (400, 400)


def test_a_stage_flag_no_stage_knows_is_an_error_naming_the_stage() -> None:
    flags = ["--products", "p", "--model", "m", "--output", "o", "--run_id", "r"]
    with pytest.raises(ValueError, match=r"--index_flags: --num_leafs is not a flag of the index stage"):
        _nightly([*flags, "--index_flags", "--num_leafs 7"])


def test_without_evaluate_flags_the_nightly_evaluates_at_the_depth_its_index_flags_build_for() -> None:
    flags = ["--products", "p", "--model", "m", "--output", "o", "--run_id", "r", "--queries", "q"]
    job = _nightly([*flags, "--judgments", "j", "--index_flags", "--depth 500"])
    assert job.stages.index.index.depth == 500
    assert (job.stages.evaluate.evaluate.depth, job.stages.evaluate.evaluate.searcher) == (500, "auto")


# Issue 48: every setting a stage reads, set through `madr nightly --<stage>_flags` away from its default,
# is what that stage ran with (its manifest's "settings"). The job's inputs, folders and last night's
# outputs are the job's to set, not the stage flags'.
SET_BY_THE_JOB = {"model", "products", "previous", "queries", "judgments", "index", "embeddings"}
SET_BY_THE_JOB |= {"zero_shot_previous"}
STAGE_SETTINGS = {
    "embeddings": {
        **{"device": "cpu", "batch_size": 7, "chunk_size": 4, "precision": "fp32", "runtime": "torch"},
        **{"num_shards": 2, "row_group_mb": 2, "torch_threads": 1, "max_dead_letter_fraction": 0.3},
        **{"encode_ahead": "true"},
        **{"min_confidence": 0.4, "stated_aspects": ["brand"], "min_agreement": 0.5},
    },
    "index": {
        **{"num_index_shards": 2, "depth": 30, "target_recall": 0.5, "serving_depths": "5,10"},
        **{"scoring": "asymmetric_hashing", "num_leaves": 3, "num_leaves_to_search": 2},
        **{"training_sample_size": 30, "dimensions_per_block": 2, "anisotropic_quantization_threshold": 0.3},
        **{"reorder_candidates": 10, "soar_lambda": 1.5, "reorder_precision": "int8"},
        **{"lexical": "true", "lexical_language": "dutch"},
    },
    "eval": {
        **{"split": "valid", "depth": 12, "metrics": "recall@10,ndcg@10", "searcher": "ann"},
        **{"compare_exact": "true", "zero_shot": "false", "lexical": "true", "allow_model_mismatch": "true"},
        **{"positive_min_grade": 2, "device": "cpu", "batch_size": 5, "chunk_size": 3, "precision": "fp32"},
        **{"max_dead_letter_fraction": 0.2},
        **{"runtime": "torch", "min_confidence": 0.6, "stated_aspects": ["color"], "min_agreement": 0.7},
    },
}


def _flags(settings: dict) -> str:
    return " ".join(f"--{name} {','.join(v) if isinstance(v, list) else v}" for name, v in settings.items())


def test_the_settings_cover_every_flag_each_stage_reads() -> None:
    """A setting added to a stage must be added above, or the nightly test below would not cover it."""
    from pipelines.settings.options import EmbedSettings, EvaluateSettings, ModelSettings, PredictionThreshold
    from pipelines.settings.stage_config import flag_fields

    def names(*classes: type) -> set[str]:
        return {f.name for cls in classes for f in flag_fields(cls)} - SET_BY_THE_JOB

    assert set(STAGE_SETTINGS["embeddings"]) == names(ModelSettings, EmbedSettings, PredictionThreshold)
    from pipelines.index.config import LexicalSettings

    assert set(STAGE_SETTINGS["index"]) == names(IndexSettings, LexicalSettings)
    assert set(STAGE_SETTINGS["eval"]) == names(ModelSettings, EvaluateSettings, PredictionThreshold)


def test_every_stage_setting_given_through_the_nightly_is_what_its_stage_ran_with(
    tmp_path, tiny_model_dir
) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from jobs.cli import main
    from schemas import QUERY_SCHEMA

    # Enough products that each of the two index shards trains asymmetric hashing (16 codes a block).
    write_catalog(tmp_path / "catalog.parquet", catalog(90))
    queries, judgments = write_test_queries(tmp_path)
    rows = [{**row, "split": "valid"} for row in pq.read_table(queries).to_pylist()]
    pq.write_table(pa.Table.from_pylist(rows, schema=QUERY_SCHEMA), queries)
    root = tmp_path / "nightly"
    argv = [
        *("nightly", "--model", str(tiny_model_dir), "--products", str(tmp_path / "catalog.parquet")),
        *("--output", str(root), "--run_id", "night", "--queries", queries, "--judgments", judgments),
        *("--embed_flags", _flags(STAGE_SETTINGS["embeddings"])),
        *("--index_flags", _flags(STAGE_SETTINGS["index"])),
        *("--evaluate_flags", _flags(STAGE_SETTINGS["eval"])),
    ]
    assert main(argv) == 0
    for folder, expected in STAGE_SETTINGS.items():
        manifest = json.loads((root / "night" / folder / "manifest.json").read_text())
        # The index's top-level manifest keeps what the build adds under "extra".
        ran_with = manifest.get("extra", manifest)["settings"]
        assert {name: ran_with[name] for name in expected} == expected, folder


def test_a_stage_flag_of_another_stage_in_a_stages_own_flags_is_an_error_naming_both() -> None:
    """--index_flags are parsed by build-index's parser: embed's --precision there would be dropped."""
    flags = ["--products", "p", "--model", "m", "--output", "o", "--run_id", "r"]
    message = (
        r"--index_flags: --precision is a flag of the embed stage and the evaluate stage: the index stage"
    )
    with pytest.raises(ValueError, match=message):
        _nightly([*flags, "--index_flags", "--precision int8"])
    # Beam's own options are each stage's to have.
    assert _nightly([*flags, "--index_flags", "--direct_num_workers 2"]).stage_args("index") == [
        "--direct_num_workers",
        "2",
    ]


def test_an_abbreviated_stage_flag_is_refused_not_dropped() -> None:
    """`--evaluate_flags '--search exact'` parsed as --searcher yet did not count as given: the nightly's
    own default (auto) replaced it without a word."""
    base = {"catalog": "c", "model": "m", "out": "o", "run_id": "r", "queries": "q", "judgments": "j"}
    with pytest.raises(ValueError, match=r"--evaluate_flags: --search is not a flag of the evaluate stage"):
        NightlyJob(**base, evaluate_flags=("--search", "exact"))
    given = NightlyJob(**base, evaluate_flags=("--searcher", "exact"))
    assert given.stages.evaluate.evaluate.searcher == "exact"


def test_the_nightly_refuses_tuning_queries_and_decides_which_embeddings_are_reused() -> None:
    base = {"catalog": "c", "model": "m", "out": "o", "run_id": "r"}
    with pytest.raises(ValueError, match="--tuning_queries: the nightly's index stage tunes on held-out"):
        NightlyJob(**base, index_flags=("--tuning_queries", "q.parquet"))
    job = NightlyJob(**base, embed_flags=("--previous", "elsewhere"))
    assert job.with_previous(None).embed.embed.previous is None  # the job's decision, not the flag's
    assert job.with_previous("last-night").embed.embed.previous == "last-night"


def test_no_verify_reaches_every_stage_as_a_value_and_a_stages_own_only_that_stage() -> None:
    """`madr nightly --no_verify` is the job's own flag (no `--no_verify` written back into argv for the
    stages to parse again); in --embed_flags it is the embed stage's alone. Beam's options reach each
    stage without any stage's flags."""
    typed = ["--products", "p", "--model", "m", "--output", "o", "--run_id", "r", "--queries", "q"]
    typed += ["--judgments", "j", "--enrich", "--direct_num_workers", "2"]
    job, _ = parse_command("nightly", [*typed, "--no_verify"])
    stages = job.stages
    assert not job.verify and job.beam_args == ("--direct_num_workers", "2")
    assert not any(c.verify for c in (stages.embed, stages.index, stages.evaluate, stages.enrich))
    assert all(c.overwrite for c in (stages.embed, stages.index, stages.evaluate, stages.enrich))
    assert job.stage_args("embeddings") == job.stage_args("enriched") == ["--direct_num_workers", "2"]
    job, _ = parse_command("nightly", [*typed, "--embed_flags", "--no_verify --precision int8"])
    assert job.verify and not job.stages.embed.verify and job.stages.evaluate.verify
    assert job.stage_args("embeddings") == ["--direct_num_workers", "2"]  # --precision read by embed
