"""Pre-training (madral-kdd22 Eq. 7, mural-wsdm24 Eq. 9): masking, MLM loss, the loop, `madr pretrain`."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import torch
from torch.nn import functional
from transformers import BertConfig

from jobs.cli import main
from model import AspectVocabulary, DenseEncoder, Side, load_encoder, new_encoder
from model.mlm import IGNORE_INDEX, MlmHead, mask_for_mlm, masked_lm_loss
from model.training import Pretrainer, PretrainingConfig, PretrainingRecord, TrainingConfig
from model.training.optimizer import freeze_lower_layers
from model.training.pretrain import PretrainingBatch, pretraining_batches
from pipelines.train.finetune import TrainJob, load_pretrained_encoder, run_training
from pipelines.train.pretrain import PretrainJob, load_pretraining_records
from product_data.synthetic import SyntheticConfig, generate_benchmark
from schemas import ECOMMERCE_ASPECTS
from tests.conftest import tiny_backbone

ASPECTS = ("category", "brand", "color")
ITEMS = {"socks": "Socks", "juicer": "Juicers", "lamp": "Lamps"}
BRANDS = ("nike", "breville", "ikea")
COLORS = ("red", "white", "black", "silver")
RECORDS = [
    PretrainingRecord(
        f"{color} {brand} {item} . a {color} {item} made by {brand}",
        Side.DOCUMENT,
        {"category": [category], "brand": [brand.title()], "color": [color.title()]},
    )
    for item, category in ITEMS.items()
    for brand in BRANDS
    for color in COLORS
] + [
    PretrainingRecord(f"{color} {item}", Side.QUERY, {"category": [category], "color": [color.title()]})
    for item, category in ITEMS.items()
    for color in COLORS
]
VOCABULARY = AspectVocabulary.from_records([r.aspects for r in RECORDS], ASPECTS)
TEXTS = ["white nike socks", "a silver breville juicer made by breville for the kitchen", "lamp"]
ANNOTATIONS = [r.aspects for r in RECORDS[:3]]


def build(variant: str, seed: int = 0, **settings: object) -> tuple[DenseEncoder, object]:
    torch.manual_seed(seed)
    settings = {"backbone": tiny_backbone(), "projection_dim": 8, "max_document_length": 24, **settings}
    return new_encoder(variant, pretrained=False, vocabulary=VOCABULARY, **settings)


def masked_inputs(encoder: DenseEncoder, run) -> torch.Tensor:
    """The input ids the tower of `encoder` sees while `run()` executes."""
    seen: list[torch.Tensor] = []
    towers = list(encoder.transformers.values())
    handles = [
        tower.register_forward_pre_hook(
            lambda _m, _a, kwargs: seen.append(kwargs["input_ids"]), with_kwargs=True
        )
        for tower in towers
    ]
    try:
        run()
    finally:
        for handle in handles:
            handle.remove()
    assert len(seen) == 1
    return seen[0]


# Masking and the MLM loss


@pytest.mark.parametrize("variant", ["bibert", "madral", "mural"])
def test_mlm_never_masks_cls_sep_pad_or_guiding_tokens(variant: str) -> None:
    encoder, tokenizer = build(variant)
    batch = encoder.tokenize(tokenizer, TEXTS, Side.DOCUMENT)
    guiding = list(getattr(encoder, "guiding_token_ids", ()))
    protected = torch.isin(batch.input_ids, torch.tensor([*tokenizer.all_special_ids, *guiding]))
    assert (batch.input_ids == tokenizer.pad_token_id).any() and (~protected).any()
    changed = torch.zeros_like(protected)
    for seed in range(12):
        generator = torch.Generator().manual_seed(seed)
        seen = masked_inputs(
            encoder,
            lambda g=generator: encoder.pretraining_loss(
                batch, tokenizer, Side.DOCUMENT, ANNOTATIONS, g, mask_probability=0.5
            ),
        )
        assert torch.equal(seen[protected], batch.input_ids[protected])
        changed |= seen != batch.input_ids
    assert changed[~protected].float().mean() > 0.5  # content tokens do get masked


def test_masked_lm_loss_by_hand_on_one_token() -> None:
    head = MlmHead(BertConfig(hidden_size=2, hidden_act="gelu", layer_norm_eps=1e-12), vocab_size=3)
    with torch.no_grad():
        head.transform.dense.weight.copy_(torch.eye(2))
        head.transform.dense.bias.zero_()
        head.bias.copy_(torch.tensor([0.0, 0.5, -0.5]))
    words = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    hidden = torch.tensor([[[0.0, 0.0], [2.0, 1.0]]])  # position 0 is not a target
    labels = torch.tensor([[IGNORE_INDEX, 1]])
    # dense = identity; GELU(x) = x Φ(x); LayerNorm over 2 values maps (a, b), a > b, to (1, -1).
    gelu = [x * 0.5 * (1 + math.erf(x / math.sqrt(2))) for x in (2.0, 1.0)]
    assert gelu[0] > gelu[1]
    normed = (1.0, -1.0)
    logits = [
        normed[0] * w[0] + normed[1] * w[1] + b for w, b in zip(words.tolist(), [0.0, 0.5, -0.5], strict=True)
    ]
    expected = -logits[1] + math.log(sum(math.exp(v) for v in logits))
    assert masked_lm_loss(head, hidden, words, labels).item() == pytest.approx(expected, rel=1e-5)


@pytest.mark.parametrize("variant", ["bibert", "madral"])
def test_the_mlm_loss_is_cross_entropy_over_the_masked_positions(variant: str) -> None:
    encoder, tokenizer = build(variant)
    encoder.eval()
    batch = encoder.tokenize(tokenizer, TEXTS, Side.QUERY)
    with torch.no_grad():
        loss = encoder.pretraining_loss(
            batch, tokenizer, Side.QUERY, ANNOTATIONS, torch.Generator().manual_seed(7), mask_probability=0.4
        )
        ids, labels = mask_for_mlm(
            batch.input_ids,
            tokenizer.all_special_ids,
            0.4,
            torch.Generator().manual_seed(7),
            mask_token_id=tokenizer.mask_token_id,
            vocab_size=tokenizer.vocab_size,
        )
        tower = encoder.transformer(Side.QUERY)
        hidden = tower(input_ids=ids, attention_mask=batch.attention_mask).last_hidden_state
        head = encoder.mlm_head(Side.QUERY)
        targets = labels != IGNORE_INDEX
        logits = head.transform(hidden[targets]) @ tower.get_input_embeddings().weight.T + head.bias
        expected = functional.cross_entropy(logits, labels[targets])
    assert targets.sum() >= 3
    torch.testing.assert_close(loss.mlm, expected)


def test_aspect_part_is_zero_without_aspect_learning_and_positive_with_it() -> None:
    losses = {}
    for variant in ("madr", "madral", "mural"):
        encoder, tokenizer = build(variant)
        batch = encoder.tokenize(tokenizer, TEXTS, Side.DOCUMENT)
        losses[variant] = encoder.pretraining_loss(
            batch,
            tokenizer,
            Side.DOCUMENT,
            ANNOTATIONS,
            torch.Generator().manual_seed(1),
            mask_probability=0.5,
        )
        losses[variant].total.backward()
    madr, madral, mural = losses["madr"], losses["madral"], losses["mural"]
    assert madr.aspect.item() == 0 and torch.equal(madr.total, madr.mlm)
    assert madral.aspect.item() > 0 and madral.mlm.item() > 0
    torch.testing.assert_close(madral.total, madral.mlm + madral.aspect)  # Eq. 7: no λ
    assert mural.aspect.item() > 0
    torch.testing.assert_close(mural.total, mural.mlm + 0.1 * mural.aspect)  # Eq. 9, the config's λ


def test_dssm_refuses_pretraining() -> None:
    encoder, tokenizer = build("dssm")
    batch = encoder.tokenize(tokenizer, TEXTS, Side.QUERY)
    with pytest.raises(NotImplementedError, match="DSSM is not pre-trained"):
        encoder.pretraining_loss(batch, tokenizer, Side.QUERY, ANNOTATIONS, torch.Generator())


# The loop


def _config(**changes: object) -> PretrainingConfig:
    settings = {
        "epochs": 3,
        "max_steps": 20,
        "batch_size": 8,
        "learning_rate": 1e-2,
        "show_progress": False,
        "seed": 3,
        "warmup_fraction": 0.0,
    }
    settings.update(changes)
    return PretrainingConfig(**settings)


def _held_out_mlm(encoder: DenseEncoder, tokenizer) -> float:
    """The MLM loss of fixed product texts under fixed masks, dropout off."""
    encoder.eval()
    texts = [r.text for r in RECORDS if r.side is Side.DOCUMENT][::3]
    batch = encoder.tokenize(tokenizer, texts, Side.DOCUMENT)
    with torch.no_grad():
        losses = [
            encoder.pretraining_loss(
                batch, tokenizer, Side.DOCUMENT, [None] * len(texts), torch.Generator().manual_seed(seed)
            ).mlm.item()
            for seed in range(4)
        ]
    return sum(losses) / len(losses)


def test_batches_hold_one_side_and_are_seeded() -> None:
    batches = pretraining_batches(RECORDS, 8, seed=1, epoch=0)
    assert batches == pretraining_batches(RECORDS, 8, seed=1, epoch=0)
    assert batches != pretraining_batches(RECORDS, 8, seed=1, epoch=1)
    assert sorted(t for b in batches for t in b.texts) == sorted(r.text for r in RECORDS)
    for batch in batches:
        assert {r.side for r in RECORDS if r.text in batch.texts} == {batch.side}


def test_twenty_steps_lower_the_mlm_loss_and_save_a_loadable_model(tmp_path) -> None:
    encoder, tokenizer = build("madral")
    before = _held_out_mlm(encoder, tokenizer)
    report = Pretrainer(encoder, tokenizer, _config(), tmp_path).fit(RECORDS)
    after = _held_out_mlm(encoder, tokenizer)
    assert report.steps == 20 and len(report.history) == 20
    # Measured: held-out MLM 10.25 -> 5.60; mean of steps 1-5: MLM 9.74, aspect 4.63; of steps 16-20:
    # MLM 6.04, aspect 3.41.
    assert after < before - 2.0
    assert report.final.mlm < report.initial.mlm - 2.0
    assert 0 < report.final.aspect < report.initial.aspect

    loaded, loaded_tokenizer = load_encoder(tmp_path)
    assert loaded.vocabulary == VOCABULARY
    for side in Side:
        torch.testing.assert_close(
            loaded.embed_texts(loaded_tokenizer, TEXTS, side).embedding,
            encoder.embed_texts(tokenizer, TEXTS, side).embedding,
        )
    assert _held_out_mlm(loaded, loaded_tokenizer) == pytest.approx(after, rel=1e-6)  # MLM heads saved too


def test_bf16_autocast_learns_like_fp32_and_keeps_fp32_weights(tmp_path) -> None:
    """--bf16 runs the forward pass in bfloat16; the weights, the optimiser and the saved model stay fp32."""
    encoder, tokenizer = build("mtbert")
    before = _held_out_mlm(encoder, tokenizer)
    report = Pretrainer(encoder, tokenizer, _config(bf16=True), tmp_path).fit(RECORDS)
    assert report.steps == 20 and all(math.isfinite(step.mlm) for step in report.history)
    assert _held_out_mlm(encoder, tokenizer) < before - 2.0
    assert {parameter.dtype for parameter in encoder.parameters()} == {torch.float32}
    loaded, _ = load_encoder(tmp_path)
    assert {parameter.dtype for parameter in loaded.parameters()} == {torch.float32}


def test_native_bfloat16_follows_the_cpu_flags() -> None:
    from model.hardware import bf16_is_native

    cpu = torch.device("cpu")
    assert bf16_is_native(cpu, frozenset({"avx2", "amx_bf16"}))
    assert bf16_is_native(cpu, frozenset({"avx512_bf16"}))
    assert not bf16_is_native(cpu, frozenset({"avx2", "avx512_vnni"}))
    assert bf16_is_native(torch.device("meta")) is False


class _InterruptedPretrainer(Pretrainer):
    """Raises after `fail_after` batches, like a pre-empted worker."""

    def __init__(self, *args: object, fail_after: int, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        self.calls_left = fail_after

    def batch_loss(self, batch, step):
        self.calls_left -= 1
        if self.calls_left < 0:
            raise KeyboardInterrupt
        return super().batch_loss(batch, step)


def test_resume_after_interruption_matches_an_uninterrupted_run(tmp_path) -> None:
    config = _config(max_steps=None, epochs=2, batch_size=16, checkpoint_every=3)  # 4 batches an epoch
    straight, tokenizer = build("madral")
    expected = Pretrainer(straight, tokenizer, config, tmp_path / "straight").fit(RECORDS)

    interrupted, tokenizer = build("madral")
    with pytest.raises(KeyboardInterrupt):
        _InterruptedPretrainer(interrupted, tokenizer, config, tmp_path / "resumed", fail_after=5).fit(
            RECORDS
        )
    resumed, tokenizer = build("madral", seed=99)  # another init: the checkpoint must override it
    report = Pretrainer(resumed, tokenizer, config, tmp_path / "resumed").fit(RECORDS)
    assert report.steps == expected.steps == 8
    for ours, theirs in zip(report.history, expected.history, strict=True):
        assert (ours.total, ours.mlm, ours.aspect) == pytest.approx((theirs.total, theirs.mlm, theirs.aspect))
    for (name, value), (_, other) in zip(
        resumed.state_dict().items(), straight.state_dict().items(), strict=True
    ):
        torch.testing.assert_close(value, other, msg=name)


def test_a_checkpoint_of_another_run_is_refused(tmp_path) -> None:
    encoder, tokenizer = build("bibert")
    with pytest.raises(KeyboardInterrupt):
        _InterruptedPretrainer(encoder, tokenizer, _config(checkpoint_every=1), tmp_path, fail_after=2).fit(
            RECORDS
        )
    with pytest.raises(ValueError, match="checkpoint of a different run"):
        Pretrainer(encoder, tokenizer, _config(checkpoint_every=1, aspect_weight=0.5), tmp_path).fit(RECORDS)


# The commands


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> str:
    root = tmp_path_factory.mktemp("data")
    generate_benchmark(SyntheticConfig(num_products=300, num_queries=30, seed=5), str(root))
    return str(root)


def test_madr_pretrain_then_madr_train_init_from(dataset: str, tiny_backbone_dir, tmp_path, capsys) -> None:
    shape = ["--projection_dim", "16", "--max_document_length", "32"]
    pretrained = tmp_path / "pretrained"
    common = ["--data", dataset, "--variant", "madral", "--backbone", str(tiny_backbone_dir), *shape]
    assert (
        main(["pretrain", *common, "--out", str(pretrained), "--max_steps", "4", "--batch_size", "16"]) == 0
    )
    assert "pre-trained 4 steps" in capsys.readouterr().out
    manifest = json.loads((pretrained / "manifest.json").read_text())
    assert manifest["kind"] == "madr-model" and manifest["pretrained"] is True
    assert manifest["records"] == {"query": manifest["records"]["query"], "document": 300}
    assert manifest["records"]["query"] > 0 and manifest["losses"]["window"] == 1
    assert manifest["losses"]["initial"]["mlm"] > 0 and manifest["losses"]["initial"]["aspect"] > 0
    assert not (pretrained / "checkpoints").exists()

    tuned = tmp_path / "tuned"
    flags = ["--init_from", str(pretrained), "--max_steps", "2", "--batch_size", "4", "--seed", "1"]
    assert main(["train", *common, "--out", str(tuned), *flags]) == 0
    manifest = json.loads((tuned / "manifest.json").read_text())
    assert manifest["init_from"] == str(pretrained) and manifest["steps"] == 2
    start, _ = load_encoder(pretrained)
    model, _ = load_encoder(tuned)
    # Fine-tuning started from the pre-trained weights: the MLM head it never trains came along unchanged.
    assert model.vocabulary == start.vocabulary
    start_state, state = start.state_dict(), model.state_dict()
    heads = [name for name in start_state if name.startswith("mlm_heads.")]
    assert heads and all(torch.equal(state[name], start_state[name]) for name in heads)

    # repro-ecir24 §8.1: en-v1 fine-tunes MADRAL-ori's pre-trained model; only OTHER's parts stay new.
    v1 = tmp_path / "v1"
    v1_flags = ["--variant", "madral-en-v1", "--out", str(v1), *flags]
    assert main(["train", *common[:2], "--backbone", str(tiny_backbone_dir), *shape, *v1_flags]) == 0
    assert json.loads((v1 / "manifest.json").read_text())["init_from"] == str(pretrained)
    assert load_encoder(v1)[0].config.variant == "madral-en-v1"

    with pytest.raises(ValueError, match="holds a 'madral' model whose transformer does not fit a 'bibert'"):
        run_training(
            TrainJob(
                dataset=dataset, output=str(tmp_path / "x"), variant="bibert", init_from=str(pretrained)
            ),
            TrainingConfig(max_steps=1, show_progress=False),
        )


def test_the_same_command_twice_gives_the_same_model(dataset: str, tiny_backbone_dir, tmp_path) -> None:
    # A new model's random layers came from the unseeded global generator: two demo runs differed.
    common = ["--data", dataset, "--variant", "madral", "--backbone", str(tiny_backbone_dir)]
    flags = ["--projection_dim", "16", "--max_document_length", "32", "--max_steps", "2", "--batch_size", "8"]
    for name in ("a", "b"):
        torch.manual_seed(len(name) * 1000 + ord(name))  # the global generator differs between the runs
        assert main(["pretrain", *common, *flags, "--output", str(tmp_path / name)]) == 0
    first, second = (load_encoder(tmp_path / name)[0].state_dict() for name in ("a", "b"))
    assert first.keys() == second.keys()
    assert all(torch.equal(first[name], second[name]) for name in first)


def test_frozen_layers_keep_the_word_embeddings_and_the_lowest_layers(tmp_path) -> None:
    encoder, tokenizer = build("madral", drop_last_layer=False)  # both layers of the tiny backbone in use
    start = {name: tensor.clone() for name, tensor in encoder.state_dict().items()}
    Pretrainer(encoder, tokenizer, _config(max_steps=3, frozen_layers=1), tmp_path).fit(RECORDS)
    moved = {
        name
        for name, tensor in encoder.state_dict().items()
        if name not in start or not torch.equal(tensor, start[name])
    }
    frozen = {name for name in start if ".embeddings." in name or ".encoder.layer.0." in name}
    assert frozen and not frozen & moved
    assert any(".encoder.layer.1." in name for name in moved)  # the layers above still train
    with pytest.raises(ValueError, match="exceeds the backbone's"):
        freeze_lower_layers(encoder, 99)
    with pytest.raises(ValueError, match="frozen_layers must be >= 0"):
        _config(frozen_layers=-1)


def test_head_refit_moves_only_the_prediction_heads_and_lowers_their_loss(
    dataset: str, tiny_backbone_dir, tmp_path
) -> None:
    common = ["train", "--data", dataset, "--variant", "madral", "--backbone", str(tiny_backbone_dir)]
    flags = ["--projection_dim", "16", "--max_document_length", "32", "--max_steps", "2", "--batch_size", "4"]
    assert main([*common, *flags, "--out", str(tmp_path / "plain")]) == 0
    assert main([*common, *flags, "--out", str(tmp_path / "refit"), "--head_refit_epochs", "3"]) == 0
    plain, tokenizer = load_encoder(tmp_path / "plain")
    refit, _ = load_encoder(tmp_path / "refit")
    plain_state, refit_state = plain.state_dict(), refit.state_dict()
    moved = {name for name in plain_state if not torch.equal(plain_state[name], refit_state[name])}
    assert moved and all(name.startswith("aspect_prediction.") for name in moved)
    for side in Side:  # so the embeddings, and every retrieval figure, are the same
        torch.testing.assert_close(
            refit.embed_texts(tokenizer, TEXTS, side).embedding,
            plain.embed_texts(tokenizer, TEXTS, side).embedding,
        )
    report = json.loads((tmp_path / "refit" / "manifest.json").read_text())["head_refit"]
    assert report["epochs"] == 3 and 0 < report["products"] <= 300  # the annotated ones
    assert report["final_loss"] < report["initial_loss"]


def test_a_side_left_out_of_aspect_sides_pretrains_with_mlm_alone(tmp_path) -> None:
    """madral-kdd22's ablation of aspect learning on one side: that side's batches have no aspect loss."""
    encoder, tokenizer = build("madral")
    encoder.eval()
    queries = PretrainingBatch(Side.QUERY, tuple(TEXTS), tuple(ANNOTATIONS))
    documents = PretrainingBatch(Side.DOCUMENT, tuple(TEXTS), tuple(ANNOTATIONS))
    both = Pretrainer(encoder, tokenizer, _config(), tmp_path / "both")
    documents_only = Pretrainer(encoder, tokenizer, _config(aspect_sides=("document",)), tmp_path / "d")
    with torch.no_grad():
        assert both.batch_loss(queries, 0).aspect.item() > 0
        left_out = documents_only.batch_loss(queries, 0)
        assert left_out.aspect.item() == 0 and left_out.total.item() == pytest.approx(left_out.mlm.item())
        assert documents_only.batch_loss(documents, 0).aspect.item() == pytest.approx(
            both.batch_loss(documents, 0).aspect.item()
        )


@pytest.mark.parametrize("share", [1 / 3, 2 / 3, 1.0])
def test_pretraining_learns_from_a_share_of_the_annotations_and_masks_every_product(
    dataset: str, share: float
) -> None:
    """repro-ecir24 §8.5: 1/3, 2/3 or all of the products' annotations; every product still in L_MLM."""
    encoder, _ = build("madral")
    everything = load_pretraining_records(PretrainJob(dataset=dataset, output="o", variant="madral"), encoder)
    job = PretrainJob(dataset=dataset, output="o", variant="madral", annotated_share=share)
    records = load_pretraining_records(job, encoder)
    assert [r.text for r in records] == [r.text for r in everything]
    documents = [(a, b) for a, b in zip(everything, records, strict=True) if a.side is Side.DOCUMENT]
    annotated = [a for a, _ in documents if a.aspects]
    kept = [b for _, b in documents if b.aspects]
    assert all(b.aspects in (None, a.aspects) for a, b in documents)
    assert len(kept) == pytest.approx(share * len(annotated), abs=0.08 * len(annotated))
    queries = [(a, b) for a, b in zip(everything, records, strict=True) if a.side is Side.QUERY]
    assert all(a.aspects == b.aspects for a, b in queries)  # the share is of the products' annotations
    with pytest.raises(ValueError, match="annotated_share"):
        PretrainJob(dataset=dataset, output="o", variant="madral", annotated_share=1.5)


def test_a_warm_start_keeps_the_source_models_vocabulary_so_its_heads_keep_their_meaning(
    dataset: str, tiny_backbone_dir, tmp_path
) -> None:
    """en-v1 fine-tunes MADRAL-ori's pre-trained model, whose vocabulary pre-training built over other
    products than the fine-tuning job's: a vocabulary built again orders the classes otherwise, and the
    copied head rows then scored the wrong values (60,000-product run: category Acc@1 0.16, not 0.94)."""
    shape = {"projection_dim": 16, "max_document_length": 32, "backbone": str(tiny_backbone_dir)}
    products = [row["aspects"] for row in pq.read_table(Path(dataset) / "products").to_pylist()]
    # Counted over a fifth of the catalog, as a pre-training that held products out would count them.
    fifth = AspectVocabulary.from_records([dict(a) for a in products[::5] if a], ECOMMERCE_ASPECTS)
    source = tmp_path / "madral"
    job = TrainJob(dataset=dataset, output=str(tmp_path / "v1"), variant="madral", **shape)
    madral, tokenizer = job.new_encoder(fifth)
    madral.save_pretrained(source, tokenizer)
    v1_job = dataclasses.replace(job, variant="madral-en-v1", init_from=str(source))
    rebuilt = v1_job.new_encoder_for_dataset()[2]
    assert rebuilt != fifth  # the case this test is about: other counts, another class order

    encoder, _, sizes = load_pretrained_encoder(v1_job)
    assert encoder.vocabulary == fifth and sizes == fifth.sizes()
    heads = {n: t for n, t in madral.state_dict().items() if n.startswith("aspect_prediction.")}
    state = encoder.state_dict()
    assert heads and all(torch.equal(state[name], tensor) for name, tensor in heads.items())
