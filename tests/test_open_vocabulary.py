"""New aspect values for a trained model without retraining: `madr extend-vocabulary`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from jobs.cli import main
from model import Side, load_encoder, new_encoder
from model.aspects.open_vocabulary import add_aspect_values, carried_rows
from model.aspects.vocabulary import AspectVocabulary
from pipelines.storage.verify import verify_model
from schemas import write_manifest
from tests.conftest import tiny_backbone
from tests.test_embed_pipeline import catalog, write_catalog

RECORDS = [
    {"category": ["Juicers"], "brand": ["Breville"], "color": ["Silver"]},
    {"category": ["Bedding"], "brand": ["Casper"], "color": ["Pink"]},
    {"category": ["Bedding"], "brand": ["Casper"], "color": ["White"]},
]


@pytest.fixture()
def model_dir(tmp_path: Path) -> str:
    vocabulary = AspectVocabulary.from_records(RECORDS, ("category", "brand", "color"))
    torch.manual_seed(0)
    encoder, tokenizer = new_encoder(
        "mtbert", pretrained=False, backbone=tiny_backbone(), projection_dim=8, vocabulary=vocabulary
    )
    encoder.save_pretrained(tmp_path / "model", tokenizer)
    write_manifest(tmp_path / "model", "madr-model", {"variant": "mtbert", "held_out_products": None})
    return str(tmp_path / "model")


def test_carried_rows_recover_a_scaled_and_shifted_table() -> None:
    generator = torch.Generator().manual_seed(1)
    known, new = torch.randn(30, 16, generator=generator), torch.randn(4, 16, generator=generator)
    shift = torch.randn(16, generator=generator)
    trained = 0.3 * (known - known.mean(0)) + shift
    assert torch.allclose(carried_rows(known, trained, new), 0.3 * (new - known.mean(0)) + shift, atol=1e-5)


def test_new_values_get_rows_and_the_known_ones_keep_theirs(model_dir: str, tmp_path: Path) -> None:
    encoder, tokenizer = load_encoder(model_dir)
    texts = ["Fellow Stagg kettle", "Breville juicer"]
    before = encoder.embed_texts(tokenizer, texts, Side.DOCUMENT).aspect_logits["brand"]
    added = add_aspect_values(encoder, tokenizer, {"brand": [("Fellow", 3), ("BREVILLE", 9), ("fellow", 1)]})
    assert added == {"brand": 1}  # Breville is known; "fellow" is the same value as "Fellow"
    values = encoder.vocabulary.values("brand")
    assert values.values[-1] == "fellow" and values.spellings[-1] == "Fellow" and values.counts[-1] == 3
    assert encoder.config.aspect_vocabulary_sizes["brand"] == len(values) == 3
    after = encoder.embed_texts(tokenizer, texts, Side.DOCUMENT).aspect_logits["brand"]
    assert after.shape == (2, 3) and torch.allclose(after[:, :2], before, atol=1e-6)
    # Saved and loaded as any model: the same predictions.
    encoder.save_pretrained(tmp_path / "grown", tokenizer)
    loaded, _ = load_encoder(tmp_path / "grown")
    again = loaded.embed_texts(tokenizer, texts, Side.DOCUMENT).aspect_logits["brand"]
    assert torch.allclose(again, after, atol=1e-6)
    with pytest.raises(ValueError, match="has no \\['material'\\] heads"):
        add_aspect_values(encoder, tokenizer, {"material": [("oak", 1)]})


def test_the_command_writes_a_verified_model_with_the_catalogs_values(
    model_dir: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = catalog(6)  # brand "Nike" on every product, no colour
    rows[0]["aspects"] = {"brand": ["Fellow"], "color": ["Matte Black"]}
    rows[1]["aspects"] = {"brand": ["FELLOW"]}
    rows[2]["aspects"] = {"brand": ["Fellow"]}  # the catalog's most frequent spelling is the one written
    products = write_catalog(tmp_path / "catalog.parquet", rows)
    (tmp_path / "values.json").write_text(json.dumps({"category": ["Kettles"]}))
    out = tmp_path / "extended"
    flags = ["--model", model_dir, "--products", products, "--values", str(tmp_path / "values.json")]
    assert main(["extend-vocabulary", *flags, "--output", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "brand           2 values + 2 new" in printed  # Fellow and Nike
    assert verify_model(str(out))["values_added"]["color"] == {"before": 3, "added": 1}
    vocabulary = AspectVocabulary.load(out)
    assert "Fellow" in vocabulary.values("brand").spellings
    assert "kettles" in vocabulary.values("category").values
    assert main(["extend-vocabulary", *flags, "--output", str(out)]) != 0  # not empty: --overwrite
    assert "pass --overwrite" in capsys.readouterr().err
    assert main(["extend-vocabulary", "--model", model_dir, "--output", str(tmp_path / "x")]) != 0
    assert "give --products" in capsys.readouterr().err
