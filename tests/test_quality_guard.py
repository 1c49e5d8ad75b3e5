"""The nightly's quality guard (`pipelines.nightly.quality_guard`): tonight's reported ranking (the served,
fused one with BM25) against last night, the zero-shot row and the BM25 + zero-shot hybrid."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipelines.evaluate.report import PER_QUERY_FILE
from pipelines.layout import ZERO_SHOT_FOLDER
from pipelines.nightly.latest import read_latest
from pipelines.nightly.quality_guard import QualityRefused, quality_check
from schemas import JUDGMENT_SCHEMA, QUERY_SCHEMA
from tests.test_embed_pipeline import catalog, write_catalog


def _per_query(folder: Path, ndcg: np.ndarray, recall: np.ndarray | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    recall = ndcg if recall is None else recall
    rows = {"query_id": [f"q{i}" for i in range(len(ndcg))], "recall@100": recall, "ndcg@10": ndcg}
    pq.write_table(pa.table(rows), folder / PER_QUERY_FILE)
    return folder


def test_a_significant_loss_against_zero_shot_is_named_and_refused(tmp_path) -> None:
    rng = np.random.default_rng(51)
    base = rng.uniform(0.6, 0.9, size=40)
    tonight = _per_query(tmp_path / "eval", base - 0.05 + rng.normal(0, 0.01, size=40))
    _per_query(tmp_path / "eval" / ZERO_SHOT_FOLDER / "eval", base)
    check = quality_check("refuse", str(tonight), None)
    losses = check.losses()
    assert [loss.split()[0] for loss in losses] == ["recall@100", "ndcg@10"]  # the file's column order
    assert all("for the backbone used zero-shot (p " in loss for loss in losses)
    assert "significantly below" in check.verdict() and "not published" in check.verdict()
    with pytest.raises(QualityRefused, match="--quality_guard warn"):
        check.enforce()
    quality_check("warn", str(tonight), None).enforce()  # warns only
    assert quality_check("off", str(tonight), None).verdict() == "quality guard: off"


def test_a_served_ranking_below_the_hybrid_is_refused_and_last_night_is_compared_like_with_like(
    tmp_path,
) -> None:
    """Tonight's served (fused) ranking lost its BM25 side: far below the BM25 + zero-shot hybrid, though
    its dense ranking is last night's. Last night reported its dense ranking, so it is compared with
    tonight's dense one (dense/), and is not the loss."""
    rng = np.random.default_rng(62)
    base = rng.uniform(0.6, 0.9, size=40)
    tonight = _per_query(tmp_path / "tue", base - 0.2 + rng.normal(0, 0.01, size=40))
    (tonight / "manifest.json").write_text(json.dumps({"ranking": {"reported": "fused"}}))
    _per_query(tonight / "dense", base)
    _per_query(tonight / "lexical" / "bm25+zero-shot", base)
    last = _per_query(tmp_path / "mon", base)  # no "ranking": an evaluation that reported its dense one
    check = quality_check("refuse", str(tonight), ("mon", str(last)))
    losses = check.losses()
    assert losses and all("for the BM25 + zero-shot hybrid (p " in loss for loss in losses)
    with pytest.raises(QualityRefused):
        check.enforce()


def test_a_loss_under_the_margin_or_not_significant_is_not_acted_on(tmp_path) -> None:
    rng = np.random.default_rng(7)
    base = rng.uniform(0.6, 0.9, size=40)
    last = _per_query(tmp_path / "mon", base)
    small = _per_query(tmp_path / "tue", base - 0.005)  # significant, but half a point
    noisy = _per_query(tmp_path / "wed", base + rng.normal(-0.02, 0.2, size=40).clip(-0.5, 0.1))
    for tonight in (small, noisy):
        check = quality_check("refuse", str(tonight), ("mon", str(last)))
        assert check.losses() == [] and check.verdict().startswith(
            "quality guard: not below last night (run mon)"
        )
        check.enforce()
    first = quality_check("refuse", str(small), None)
    assert first.comparisons == () and "nothing to compare with" in first.verdict()
    # Runs that share no query are not called "not below": nothing was tested.
    (tmp_path / "other").mkdir()
    stranger = pa.table({"query_id": [f"x{i}" for i in range(40)], "ndcg@10": base, "recall@100": base})
    pq.write_table(stranger, tmp_path / "other" / PER_QUERY_FILE)
    unrelated = quality_check("refuse", str(small), ("sun", str(tmp_path / "other")))
    assert unrelated.verdict().startswith("quality guard: not compared")


# One product per kind, and a shopper's query for each: the backbone used zero-shot finds them, a tiny
# untrained model (a deliberately broken one) ranks at random.
KINDS = (
    ("Merino wool crew neck sweater, charcoal", "wool sweater"),
    ("Stainless steel electric kettle 1.7 L", "electric kettle"),
    ("Kids waterproof rain boots, yellow", "rain boots for kids"),
    ("Cast iron skillet 12 inch, pre-seasoned", "cast iron pan"),
    ("Bamboo cutting board with juice groove", "wooden chopping board"),
    ("Noise cancelling over-ear headphones", "noise cancelling headphones"),
    ("Yoga mat 6 mm, non-slip, purple", "yoga mat"),
    ("LED desk lamp with USB charging port", "desk lamp"),
    ("Ceramic coffee mug set of 4", "coffee mugs"),
    ("Men's leather belt, brown, reversible buckle", "leather belt men"),
    ("Cordless drill driver 18 V with two batteries", "cordless drill"),
    ("Memory foam bed pillow, queen", "pillow for sleeping"),
    ("Dog chew toy, natural rubber, large breeds", "dog toy"),
    ("Stainless steel insulated water bottle 750 ml", "insulated water bottle"),
    ("Garden hose 50 ft with spray nozzle", "garden hose"),
    ("Wireless optical computer mouse", "wireless mouse"),
    ("Women's running shoes, lightweight mesh", "running shoes women"),
    ("Cotton bath towel set, white, 6 pieces", "bath towels"),
    ("Acoustic guitar strings, light gauge", "guitar strings"),
    ("Baby stroller, foldable, with canopy", "baby stroller"),
    ("Non-stick frying pan 10 inch", "frying pan"),
    ("Sunscreen lotion SPF 50, water resistant", "sunscreen"),
    ("Wall clock, silent, modern round", "wall clock"),
    ("Camping tent for 4 people, waterproof", "tent 4 person"),
)


def _store_with_distinct_products(folder: Path) -> tuple[str, str]:
    """The catalog (catalog.parquet) and a test query judging each product: (queries, judgments)."""
    template = catalog(1)[0]
    products = [
        {**template, "product_id": f"p{i}", "title": title, "description": None, "aspects": None}
        for i, (title, _) in enumerate(KINDS)
    ]
    write_catalog(folder / "catalog.parquet", products)
    queries = [
        {"query_id": f"q{i}", "text": text, "aspects": None, "split": "test"}
        for i, (_, text) in enumerate(KINDS)
    ]
    judgments = [
        {"query_id": f"q{i}", "product_id": f"p{i}", "grade": 3, "label": None} for i in range(len(KINDS))
    ]
    paths = str(folder / "queries.parquet"), str(folder / "judgments.parquet")
    pq.write_table(pa.Table.from_pylist(queries, schema=QUERY_SCHEMA), paths[0])
    pq.write_table(pa.Table.from_pylist(judgments, schema=JUDGMENT_SCHEMA), paths[1])
    return paths


@pytest.fixture(scope="module")
def damaged_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bundled MiniLM as a BiBERT, damaged on purpose: its word embedding rows shuffled (seeded), so
    every wordpiece reads another's vector. It loads, embeds and annotates like any model; it retrieves
    at about chance."""
    import torch

    from model import new_encoder
    from schemas import write_manifest

    directory = tmp_path_factory.mktemp("damaged-bibert")
    encoder, tokenizer = new_encoder("bibert", model_version="damaged")
    table = encoder.get_submodule("transformers.shared.embeddings.word_embeddings").weight
    order = torch.randperm(table.shape[0], generator=torch.Generator().manual_seed(51))
    with torch.no_grad():
        table.copy_(table[order])
    encoder.save_pretrained(directory, tokenizer)
    write_manifest(directory, "madr-model", {"variant": "bibert", "model_version": "damaged"})
    return directory


def test_the_nightly_refuses_a_night_below_last_nights_then_publishes_it_when_told(
    tmp_path, damaged_model_dir, capsys
) -> None:
    """Typed as a user types it. The model is a deliberately damaged MiniLM (`damaged_model_dir`), far
    below the backbone used zero-shot, which the nightly evaluates by default: Monday is refused under
    `refuse`, then published with a warning, and its report says so. Monday's published evaluation is
    then replaced by a perfect one, so Tuesday (the same model, the same catalog) is also significantly
    below last night."""
    from jobs.cli import main

    queries, judgments = _store_with_distinct_products(tmp_path)
    root = tmp_path / "nightly"
    argv = [
        *("nightly", "--model", str(damaged_model_dir), "--products", str(tmp_path / "catalog.parquet")),
        *("--output", str(root), "--queries", queries, "--judgments", judgments, "--depth", "20"),
    ]
    # Monday without BM25: its dense ranking is the one reported and guarded (with BM25 the served ranking
    # of this store, whose queries say the titles' words, is as good as the hybrid's).
    monday = [*argv, "--lexical", "false"]
    assert main([*monday, "--run_id", "mon", "--quality_guard", "refuse"]) == 2
    err = capsys.readouterr().err
    assert "tonight is significantly below" in err and "for the backbone used zero-shot (p " in err
    assert read_latest(str(root)) is None
    refused = (root / "mon" / "report.html").read_text()
    assert "<strong>not published</strong>" in refused and "refused by the quality guard" in refused
    assert main([*monday, "--run_id", "mon"]) == 0
    out = capsys.readouterr().out
    assert "quality guard: tonight is significantly below" in out and "backbone used zero-shot" in out
    monday = pq.read_table(root / "mon" / "eval" / PER_QUERY_FILE)
    perfect = pa.table({name: [1.0] * monday.num_rows for name in monday.column_names if name != "query_id"})
    pq.write_table(
        perfect.add_column(0, "query_id", monday.column("query_id")), root / "mon" / "eval" / PER_QUERY_FILE
    )

    # Tuesday ships BM25 and reports its served ranking; last night (dense) is compared with its dense one.
    assert main([*argv, "--run_id", "tue", "--quality_guard", "refuse"]) == 2
    err = capsys.readouterr().err
    assert "tonight is significantly below" in err and "last night (run mon)" in err
    assert json.loads((root / "tue" / "eval" / "manifest.json").read_text())["ranking"]["reported"] == "fused"
    assert read_latest(str(root))["run_id"] == "mon"
    assert main([*argv, "--run_id", "tue"]) == 0  # warn: the finished run is published
    out = capsys.readouterr().out
    assert "quality guard: tonight is significantly below" in out and "published anyway" in out
    assert read_latest(str(root))["run_id"] == "tue"
    manifest = json.loads((root / "tue" / "manifest.json").read_text())
    assert manifest.get("info", manifest)["quality"]["below"]
