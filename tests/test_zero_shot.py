"""The backbone used zero-shot: equal to sentence-transformers, and reported beside every evaluation."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from sentence_transformers import SentenceTransformer

from evaluation import paired_t_test
from jobs.cli import parse_command
from model import Side, load_encoder, new_encoder
from model.backbone import bundled_backbone_path
from model.interpolation import average_with_backbone
from model.pooling import Pooling, pool
from pipelines.embed.stage import embed_catalog
from pipelines.zero_shot import zero_shot_model
from schemas import PRODUCT_SCHEMA
from tests.conftest import STORE_ITEMS, embed_and_evaluate, tiny_backbone, write_judged_store

TEXTS = [
    "red mattress topper",
    "Brother BC3423S Ergonomic Toner Cartridge for Laser Printer, Wired . Prints 3,000 pages",
    "a",
    "Wüsthof Classic 8-Zoll Kochmesser, geschmiedet . Acier inoxydable",
]


@pytest.fixture(scope="module")
def sentence_transformer() -> SentenceTransformer:
    """all-MiniLM-L6-v2 as sentence-transformers loads it: the bundled folder is a full ST model."""
    return SentenceTransformer(str(bundled_backbone_path()), device="cpu")


@pytest.mark.e2e
def test_zero_shot_variant_embeds_as_sentence_transformers_does(sentence_transformer) -> None:
    encoder, tokenizer = new_encoder("zero-shot", max_document_length=64)
    sentence_transformer.max_seq_length = 64
    ours = encoder.embed_texts(tokenizer, TEXTS, Side.DOCUMENT).embedding.numpy()
    theirs = sentence_transformer.encode(TEXTS, convert_to_numpy=True, normalize_embeddings=True)
    assert ours.shape == theirs.shape == (len(TEXTS), 384)
    np.testing.assert_allclose(ours, theirs, atol=1e-5)
    # Not trivially equal: a CLS-pooled BiBERT of the same backbone is another model.
    bibert, _ = new_encoder("bibert", max_document_length=64, projection_dim=None, projection_init="identity")
    cls = bibert.embed_texts(tokenizer, TEXTS, Side.DOCUMENT).embedding.numpy()
    assert np.abs(cls - theirs).max() > 0.1


@pytest.mark.e2e
def test_embed_stage_writes_sentence_transformers_vectors(sentence_transformer, tmp_path) -> None:
    """Through the production path: `madr embed` (ONNX Runtime on this CPU) of the cached zero-shot model."""
    products = [
        {"product_id": f"p{i}", "title": text, "bullet_points": [], "description": None, "locale": "us"}
        for i, text in enumerate(TEXTS)
    ]
    path = tmp_path / "products.parquet"
    pq.write_table(pa.Table.from_pylist(products, schema=PRODUCT_SCHEMA), path)
    model = zero_shot_model(max_query_length=32, max_document_length=128)
    assert zero_shot_model(max_query_length=32, max_document_length=128) == model  # made once, then reused
    embed_catalog(
        *parse_command("embed", ["--products", str(path), "--model", model, "--output", str(tmp_path / "e")])
    )
    rows = pq.read_table(list((tmp_path / "e").glob("embeddings-*.parquet"))).to_pylist()
    written = {row["product_id"]: np.asarray(row["embedding"]) for row in rows}
    sentence_transformer.max_seq_length = 128
    theirs = sentence_transformer.encode(TEXTS, convert_to_numpy=True, normalize_embeddings=True)
    ours = np.stack([written[f"p{i}"] for i in range(len(TEXTS))])
    np.testing.assert_allclose(ours, theirs, atol=1e-5)


def test_mean_pooling_leaves_padding_out() -> None:
    hidden = torch.tensor([[[1.0, 2.0], [3.0, 4.0], [100.0, 100.0]]])
    mask = torch.tensor([[1, 1, 0]])
    assert pool(hidden, mask, Pooling.MEAN).tolist() == [[2.0, 3.0]]
    assert pool(hidden, mask, Pooling.CLS).tolist() == [[1.0, 2.0]]


@pytest.mark.parametrize(
    ("variant", "settings"),
    [("bibert", {}), ("mtbert", {"aspect_learning": False}), ("no-fusion", {"aspect_learning": False})],
)
def test_identity_projection_starts_a_model_at_its_pooled_backbone(
    variant, settings, tiny_backbone_dir
) -> None:
    """A new model with mean pooling and an identity projection embeds as the pooled backbone does."""
    encoder, tokenizer = new_encoder(
        variant,
        backbone_path=tiny_backbone_dir,
        pooling="mean",
        projection_init="identity",
        projection_dim=None,
        **settings,
    )
    encoder.eval()
    batch = encoder.tokenize(tokenizer, TEXTS, Side.DOCUMENT)
    with torch.no_grad():
        states = encoder.transformer(Side.DOCUMENT)(
            input_ids=batch.input_ids, attention_mask=batch.attention_mask
        ).last_hidden_state
        expected = torch.nn.functional.normalize(pool(states, batch.attention_mask, Pooling.MEAN), dim=-1)
        assert torch.allclose(encoder(batch, Side.DOCUMENT).embedding, expected, atol=1e-6)


def test_identity_projection_needs_the_hidden_width() -> None:
    with pytest.raises(ValueError, match="projection_init='identity' needs projection_dim"):
        new_encoder("bibert", pretrained=False, backbone=tiny_backbone(), projection_init="identity")


def test_zero_shot_model_directory_loads_as_its_variant(tmp_path) -> None:
    model = zero_shot_model(max_query_length=16, max_document_length=48, cache=tmp_path)
    encoder, _ = load_encoder(model)
    assert encoder.config.variant == "zero-shot"
    assert (encoder.config.pooling, encoder.config.projection_dim) == (Pooling.MEAN, 384)
    assert (encoder.config.max_query_length, encoder.config.max_document_length) == (16, 48)
    assert json.loads((Path(model) / "manifest.json").read_text())["trained"] is False


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Twelve products a zero-shot MiniLM tells apart, with judged queries."""
    root = tmp_path_factory.mktemp("store")
    brands = ["Fellow", "Zwilling"]
    products = [
        {
            "product_id": f"p{i}",
            "title": f"{brands[i % 2]} {STORE_ITEMS[i % 6]}",
            "bullet_points": [],
            "description": None,
            "aspects": {"category": [STORE_ITEMS[i % 6]]},
            "locale": "us",
        }
        for i in range(12)
    ]
    # Said in other words than the titles: a sentence-embedding model matches them, a random one cannot.
    said = ["coffee maker", "kitchen knife", "warm hiking socks", "sneakers", "reading light", "duvet"]
    return write_judged_store(root, products, said)


def _evaluate(store: dict[str, str], model: Path, output: Path, *flags: str) -> dict:
    return embed_and_evaluate(store, model, output, "recall@2,ndcg@2,mrr@10", *flags)


@pytest.mark.e2e
def test_evaluate_reports_the_zero_shot_row_with_paired_tests(store, tiny_model_dir, tmp_path) -> None:
    result = _evaluate(store, tiny_model_dir, tmp_path / "eval", "--products", store["products"])
    zero = result["zero_shot"]
    metrics = json.loads((tmp_path / "eval" / "manifest.json").read_text())["zero_shot"]["metrics"]
    assert metrics == zero["metrics"]
    # The zero-shot MiniLM finds the items by what they are; a random tiny model cannot.
    recall = zero["metrics"]["recall@2"]
    assert recall["mean_a"] >= 0.8 > recall["mean_b"]
    assert recall["delta"] == pytest.approx(recall["mean_b"] - recall["mean_a"])
    # Its row is an evaluation of its own, scored like the model's: check the t-test from the files.
    own = pq.read_table(tmp_path / "eval" / "per_query.parquet").to_pylist()
    base = pq.read_table(tmp_path / "eval" / "zero_shot" / "eval" / "per_query.parquet").to_pylist()
    ours = {row["query_id"]: row["ndcg@2"] for row in own}
    theirs = {row["query_id"]: row["ndcg@2"] for row in base}
    expected = paired_t_test([ours[q] for q in sorted(ours)], [theirs[q] for q in sorted(ours)]).pvalue
    assert zero["metrics"]["ndcg@2"]["pvalue"] == pytest.approx(expected)
    assert zero["metrics"]["ndcg@2"]["queries"] == 6
    assert "Against the backbone used zero-shot" in result["table"]


def test_evaluate_without_products_or_with_zero_shot_false_has_no_row(
    store, tiny_model_dir, tmp_path
) -> None:
    assert _evaluate(store, tiny_model_dir, tmp_path / "a")["zero_shot"] is None
    off = _evaluate(
        store, tiny_model_dir, tmp_path / "b", "--products", store["products"], "--zero_shot", "false"
    )
    assert off["zero_shot"] is None and not (tmp_path / "b" / "zero_shot").exists()


def test_averaging_with_the_backbone_is_wise_ft(tiny_backbone_dir) -> None:
    """α = 0 gives the zero-shot model back, α = 1 the model itself, α = 0.5 the midpoint of each weight."""

    def trained() -> torch.nn.Module:
        torch.manual_seed(0)
        encoder, _ = new_encoder(
            "mtbert",
            backbone_path=tiny_backbone_dir,
            pooling="mean",
            projection_init="identity",
            projection_dim=None,
            aspect_learning=False,
        )
        with torch.no_grad():
            for parameter in encoder.parameters():
                parameter.add_(torch.randn_like(parameter) * 0.1)  # stands in for fine-tuning
        return encoder

    zero, tokenizer = new_encoder("zero-shot", backbone_path=tiny_backbone_dir)
    batch = zero.tokenize(tokenizer, TEXTS, Side.DOCUMENT)
    back = trained()
    average_with_backbone(back, 0.0, tiny_backbone_dir)
    with torch.no_grad():
        torch.testing.assert_close(back(batch, Side.DOCUMENT).embedding, zero(batch, Side.DOCUMENT).embedding)
    model, half = trained(), trained()
    average_with_backbone(half, 0.5, tiny_backbone_dir)
    name = "transformers.shared.encoder.layer.0.attention.self.query.weight"
    start = zero.state_dict()[name]
    torch.testing.assert_close(half.state_dict()[name], (model.state_dict()[name] + start) / 2)
    eye = torch.eye(32)
    projection = "towers.shared.projection.weight"
    torch.testing.assert_close(half.state_dict()[projection], (model.state_dict()[projection] + eye) / 2)
    same = trained()
    average_with_backbone(same, 1.0, tiny_backbone_dir)
    torch.testing.assert_close(same.state_dict()[name], model.state_dict()[name])


def test_averaging_refuses_a_model_that_did_not_start_as_the_backbone(tiny_backbone_dir) -> None:
    encoder, _ = new_encoder("bibert", backbone_path=tiny_backbone_dir)
    with pytest.raises(ValueError, match="pooling='mean' and projection_init='identity'"):
        average_with_backbone(encoder, 0.5, tiny_backbone_dir)
