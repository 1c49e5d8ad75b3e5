"""The training loop: the loss by hand, learning, determinism, resume after an interruption."""

from __future__ import annotations

import math

import pytest
import torch
from torch.nn import functional

from model import Side, new_encoder
from model.training import QueryExamples, Trainer, TrainingConfig, in_batch_softmax_loss
from model.training.trainer import epoch_batches, validation_batches
from tests.conftest import tiny_backbone

EXAMPLES = [
    QueryExamples(f"{color} {item}", (f"{color} {item} for sale",), (f"{item} in another shade",))
    for color in ("red", "blue", "green", "black", "white", "pink")
    for item in ("socks", "juicer", "lamp")
]


def test_in_batch_softmax_loss_matches_a_hand_computation() -> None:
    q = functional.normalize(torch.tensor([[1.0, 0.0], [0.0, 1.0]]), dim=-1)
    pos = functional.normalize(torch.tensor([[1.0, 1.0], [0.0, 1.0]]), dim=-1)
    neg = functional.normalize(torch.tensor([[1.0, -1.0], [-1.0, 0.0]]), dim=-1)
    s = math.sqrt(0.5)
    # Query 0 scores [pos0, pos1, neg0, neg1] = [s, 0, s, -1]; target pos0.
    row0 = [s, 0.0, s, -1.0]
    row1 = [s, 1.0, -s, 0.0]  # query 1, target pos1
    t = 0.5
    expected = 0.5 * sum(
        -row[target] / t + math.log(sum(math.exp(v / t) for v in row))
        for row, target in ((row0, 0), (row1, 1))
    )
    assert in_batch_softmax_loss(q, pos, neg, t).item() == pytest.approx(expected, rel=1e-6)
    no_negatives = 0.5 * sum(
        -row[target] / t + math.log(sum(math.exp(v / t) for v in row[:2]))
        for row, target in ((row0, 0), (row1, 1))
    )
    assert in_batch_softmax_loss(q, pos, None, t).item() == pytest.approx(no_negatives, rel=1e-6)


def test_epoch_batches_never_pair_a_query_with_itself_and_are_seeded() -> None:
    first = epoch_batches(EXAMPLES, 4, seed=1, epoch=0)
    assert first == epoch_batches(EXAMPLES, 4, seed=1, epoch=0)
    assert first != epoch_batches(EXAMPLES, 4, seed=1, epoch=1)
    assert all(len(set(batch.queries)) == len(batch.queries) >= 2 for batch in first)
    assert sum(len(batch.queries) for batch in first) == len(EXAMPLES) - len(EXAMPLES) % 4 % 2


def _fresh(seed: int = 0):
    torch.manual_seed(seed)
    return new_encoder("bibert", pretrained=False, backbone=tiny_backbone(), projection_dim=16)


def _config(**changes: object) -> TrainingConfig:
    settings = {"epochs": 20, "batch_size": 6, "learning_rate": 3e-3, "show_progress": False, "seed": 5}
    settings.update(changes)
    return TrainingConfig(**settings)


def test_training_raises_the_validation_metric_and_is_deterministic(tmp_path) -> None:
    encoder, tokenizer = _fresh()
    trainer = Trainer(encoder, tokenizer, _config(), tmp_path / "a")
    before = trainer.validation_loss(validation_batches(EXAMPLES, 6))
    mrr_before = trainer.validation_metric(EXAMPLES)
    report = trainer.fit(EXAMPLES, EXAMPLES)
    assert trainer.validation_loss(validation_batches(EXAMPLES, 6)) < before - 0.5  # measured: 2.49 -> 1.16
    assert report.best_valid_metric > mrr_before + 0.3
    assert (tmp_path / "a" / "model.safetensors").is_file()

    again, again_tokenizer = _fresh()
    Trainer(again, again_tokenizer, _config(), tmp_path / "b").fit(EXAMPLES, EXAMPLES)
    for (name, value), (_, other) in zip(
        encoder.state_dict().items(), again.state_dict().items(), strict=True
    ):
        torch.testing.assert_close(value, other, msg=name)


class _InterruptedTrainer(Trainer):
    """Raises after `fail_after` loss computations, like a pre-empted worker."""

    def __init__(self, *args: object, fail_after: int, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        self.calls_left = fail_after

    def batch_loss(self, batch):
        if self.encoder.training:
            self.calls_left -= 1
            if self.calls_left < 0:
                raise KeyboardInterrupt
        return super().batch_loss(batch)


def test_resume_after_interruption_matches_an_uninterrupted_run(tmp_path) -> None:
    config = _config(epochs=3, checkpoint_every=2)
    straight, tokenizer = _fresh()
    Trainer(straight, tokenizer, config, tmp_path / "straight").fit(EXAMPLES)

    interrupted, tokenizer = _fresh()
    with pytest.raises(KeyboardInterrupt):
        _InterruptedTrainer(interrupted, tokenizer, config, tmp_path / "resumed", fail_after=5).fit(EXAMPLES)
    resumed, tokenizer = _fresh(seed=99)  # different init: the checkpoint must override it
    report = Trainer(resumed, tokenizer, config, tmp_path / "resumed").fit(EXAMPLES)
    assert report.steps == 9
    query = resumed.embed_texts(tokenizer, ["red socks"], Side.QUERY).embedding
    torch.testing.assert_close(query, straight.embed_texts(tokenizer, ["red socks"], Side.QUERY).embedding)


def test_a_checkpoint_of_another_run_is_refused(tmp_path) -> None:
    encoder, tokenizer = _fresh()
    with pytest.raises(KeyboardInterrupt):
        _InterruptedTrainer(encoder, tokenizer, _config(checkpoint_every=1), tmp_path, fail_after=3).fit(
            EXAMPLES
        )
    with pytest.raises(ValueError, match="checkpoint of a different run"):
        Trainer(encoder, tokenizer, _config(checkpoint_every=1, learning_rate=1e-4), tmp_path).fit(EXAMPLES)


def test_training_config_rejects_nonsense() -> None:
    with pytest.raises(ValueError, match="in-batch negatives"):
        TrainingConfig(batch_size=1)
    with pytest.raises(ValueError, match="no positive"):
        QueryExamples("q", ())


def test_a_query_without_a_hard_negative_keeps_the_others_hard_negatives() -> None:
    examples = [
        QueryExamples("red socks", ("red socks for sale",), ("blue socks",)),
        QueryExamples("juicer", ("a juicer",)),  # no hard negative
        QueryExamples("lamp", ("a lamp",), ("a lampshade", "a lamp post")),
    ]
    batch = validation_batches(examples, 3)[0]
    assert batch.hard_negatives == ["blue socks", "a lampshade"]
    assert batch.negative_of == [0, 2]
    for batch in epoch_batches(examples, 3, seed=0, epoch=0):
        owners = [batch.queries[i] for i in batch.negative_of]
        assert sorted(owners) == ["lamp", "red socks"] and len(batch.hard_negatives) == 2


def test_the_loss_of_a_mixed_batch_counts_each_hard_negative_once() -> None:
    """L_SCE over 3 positives + 2 hard negatives, plus L_CE over 3 positive and 2 negative pairs (Eq. 8)."""
    encoder, tokenizer = _fresh()
    examples = [
        QueryExamples("red socks", ("red socks for sale",), ("blue socks",)),
        QueryExamples("juicer", ("a juicer",)),
        QueryExamples("lamp", ("a lamp",), ("a lampshade",)),
    ]
    batch = validation_batches(examples, 3)[0]
    trainer = Trainer(encoder, tokenizer, _config(), "unused")
    encoder.eval()
    with torch.no_grad():
        loss = trainer.batch_loss(batch).item()
        q = encoder.embed_texts(tokenizer, batch.queries, Side.QUERY).embedding
        d = encoder.embed_texts(tokenizer, batch.positives + batch.hard_negatives, Side.DOCUMENT).embedding
    t = encoder.config.temperature
    scores = (q @ d.T / t).tolist()
    sce = sum(-row[i] + math.log(sum(math.exp(v) for v in row)) for i, row in enumerate(scores)) / 3
    pairs = [(0, 0, 1), (1, 1, 1), (2, 2, 1), (0, 3, 0), (2, 4, 0)]  # (query, document, relevant)

    def bce(logit: float, label: int) -> float:
        return -math.log(1 / (1 + math.exp(-logit))) if label else -math.log(1 - 1 / (1 + math.exp(-logit)))

    ce = sum(bce(scores[i][j], y) for i, j, y in pairs) / len(pairs)
    assert loss == pytest.approx(sce + ce, rel=1e-4)


def test_validation_mrr_by_hand() -> None:
    """Two queries over a pool of three documents, with a model rigged to known embeddings."""
    from model.training.validation import validation_mrr

    class Rigged(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.weight = torch.nn.Parameter(torch.zeros(1))
            # query "a" is closest to doc "y" then "x"; query "b" is closest to "z".
            self.vectors = {
                "a": [1.0, 0.2],
                "b": [0.0, 1.0],
                "x": [0.9, 0.0],
                "y": [1.0, 0.3],
                "z": [0.0, 1.0],
            }

        def tokenize(self, tokenizer, texts, side):
            return TokenizedTexts(texts)

        def forward(self, batch, side):
            return type("Out", (), {"embedding": torch.tensor([self.vectors[t] for t in batch.texts])})

    class TokenizedTexts:
        def __init__(self, texts):
            self.texts = texts

        def to(self, device):
            return self

    examples = [QueryExamples("a", ("x",), ("y",)), QueryExamples("b", ("z",))]
    # "a": ranking y, x, z -> first positive x at rank 2 -> 1/2; "b": z first -> 1. Mean 0.75.
    assert validation_mrr(Rigged(), None, examples) == pytest.approx(0.75)
    assert validation_mrr(Rigged(), None, examples, depth=1) == pytest.approx(0.5)


def test_early_stopping_keeps_the_best_checkpoint(tmp_path) -> None:
    encoder, tokenizer = _fresh()
    config = _config(epochs=40, patience=2, learning_rate=3e-2)
    report = Trainer(encoder, tokenizer, config, tmp_path).fit(EXAMPLES, EXAMPLES)
    steps_per_epoch = len(epoch_batches(EXAMPLES, 6, seed=5, epoch=0))
    assert report.steps < 40 * steps_per_epoch  # stopped early
    assert report.steps - report.best_step == 2 * steps_per_epoch  # two validations without a gain
    saved, _ = new_encoder("bibert", pretrained=False, backbone=tiny_backbone(), projection_dim=16)
    saved.load_weights(tmp_path)
    trainer = Trainer(saved, tokenizer, config, tmp_path / "unused")
    assert trainer.validation_metric(EXAMPLES) == pytest.approx(report.best_valid_metric)


def test_without_hard_negatives_batches_have_in_batch_negatives_only() -> None:
    batches = epoch_batches(EXAMPLES, 4, seed=1, epoch=0, hard_negatives=False)
    assert batches and all(not b.hard_negatives and not b.negative_of for b in batches)
    assert all(b.hard_negatives for b in epoch_batches(EXAMPLES, 4, seed=1, epoch=0))
    with pytest.raises(ValueError, match="hard_negatives must be 0 or 1"):
        TrainingConfig(hard_negatives=2)
