"""`madr train` for every family of variants, then the same embed path, on a tiny backbone folder."""

from __future__ import annotations

import json

import numpy as np
import pytest

from jobs.cli import parse_command
from model import load_encoder
from model.registry import learns_aspects_by_default
from model.training import TrainingConfig
from pipelines.embed.stage import embed_catalog
from pipelines.io.parquet_reading import read_embeddings, read_parquet_table
from pipelines.layout import DatasetLayout
from pipelines.train.encoder_job import parse_variant_options
from pipelines.train.finetune import TrainJob, run_training
from product_data.synthetic import SyntheticConfig, generate_benchmark

CASES = {
    "bibert": ((), 0.0),
    "madral": ((), 0.1),
    "madral-en-v2": ((), 0.1),
    "mtbert": ((), 0.1),
    "bibert-concat": ((), 0.0),
    "mur": ((), 0.0),
    "uhd": ((("dimensions", 256), ("winners", 8)), 0.0),
}


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> str:
    root = tmp_path_factory.mktemp("data")
    generate_benchmark(SyntheticConfig(num_products=300, num_queries=30, seed=5), str(root))
    return str(root)


@pytest.mark.parametrize("variant", CASES)
def test_variant_trains_saves_and_embeds(variant: str, dataset: str, tiny_backbone_dir, tmp_path) -> None:
    options, aspect_weight = CASES[variant]
    job = TrainJob(
        dataset=dataset,
        output=str(tmp_path / "model"),
        variant=variant,
        backbone=str(tiny_backbone_dir),
        projection_dim=16,
        max_document_length=32,
        variant_options=options,
    )
    loop = TrainingConfig(max_steps=2, batch_size=4, show_progress=False, aspect_loss_weight=aspect_weight)
    report = run_training(job, loop)
    assert report.steps == 2 and np.isfinite(report.final_train_loss)
    manifest = json.loads((tmp_path / "model" / "manifest.json").read_text())
    assert manifest["variant"] == variant and manifest["loss"]["aspect"] == aspect_weight
    assert not (tmp_path / "model" / "checkpoints").exists()

    encoder, _ = load_encoder(tmp_path / "model")
    assert encoder.config.variant == variant
    out = tmp_path / "embeddings"
    counts = embed_catalog(
        *parse_command(
            "embed",
            [
                "--products",
                DatasetLayout(dataset).products,
                "--model",
                str(tmp_path / "model"),
                "--output",
                str(out),
            ],
        )
    )
    assert counts["products_embedded"] == 300
    _, matrix, _ = read_embeddings(str(out))
    assert matrix.shape[0] == 300 and np.isfinite(matrix).all()
    columns = ["aspect_values", "aspect_confidences", "fusion_weights"]
    rows = read_parquet_table(str(out), "embeddings", columns).to_pylist()
    if learns_aspects_by_default(variant):
        values = dict(rows[0]["aspect_values"])
        # Brand and colour only where the product's text names them (`AbstentionRule`); category always.
        assert "category" in values and set(values) <= set(encoder.config.aspects)
        assert {a for a, _ in rows[0]["aspect_confidences"]} == set(encoder.config.aspects)
        assert all(0 < confidence <= 1 for _, confidence in rows[0]["aspect_confidences"])
        vocabulary = encoder.vocabulary
        # Each a value of the vocabulary, in the catalog's most frequent spelling.
        assert all(value in vocabulary.values(aspect).spellings for aspect, value in values.items())
    else:
        assert rows[0]["aspect_values"] is None


def test_aspect_loss_on_a_variant_without_aspects_is_refused(
    dataset: str, tiny_backbone_dir, tmp_path
) -> None:
    job = TrainJob(
        dataset=dataset, output=str(tmp_path / "m"), backbone=str(tiny_backbone_dir), projection_dim=8
    )
    with pytest.raises(ValueError, match="learns no aspects"):
        run_training(
            job, TrainingConfig(max_steps=1, batch_size=4, show_progress=False, aspect_loss_weight=0.5)
        )


def test_variant_options_parse_json_values() -> None:
    assert parse_variant_options(["fusion=cls_gating", "dimensions=4096", "bucket_layers=[5, 6]"]) == (
        ("fusion", "cls_gating"),
        ("dimensions", 4096),
        ("bucket_layers", [5, 6]),
    )
    with pytest.raises(ValueError, match="KEY=VALUE"):
        parse_variant_options(["fusion"])


def test_madr_train_from_the_command_line(dataset: str, tiny_backbone_dir, tmp_path) -> None:
    from jobs.cli import main

    out = tmp_path / "cli-model"
    main(
        [
            "train",
            "--data",
            dataset,
            "--out",
            str(out),
            "--backbone",
            str(tiny_backbone_dir),
            "--projection_dim",
            "8",
            "--max_steps",
            "1",
            "--batch_size",
            "4",
            "--max_document_length",
            "24",
            "--variant_option",
            "shared_towers=false",
        ]
    )
    encoder, _ = load_encoder(out)
    assert encoder.config.max_document_length == 24 and not encoder.config.shared_towers
