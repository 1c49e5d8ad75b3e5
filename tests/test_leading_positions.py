"""The last layer computed at the leading positions only equals the full forward pass there."""

from __future__ import annotations

import pytest
import torch
from transformers import BertConfig, BertModel

from model import DenseEncoder, Side, TokenizedBatch
from model.leading_positions import last_hidden_at_leading_positions
from tests.conftest import tiny_backbone
from tests.test_baselines import TEXTS, build

# One short text among long ones: its padding must stay masked as a key in the pruned layer.
BATCH_TEXTS = [*TEXTS, "juicer", "a stainless steel cold press juicer with two speeds and a pulp filter"]


def random_bert(seed: int = 0) -> BertModel:
    torch.manual_seed(seed)
    return BertModel(BertConfig.from_dict(tiny_backbone()), add_pooling_layer=False).eval()


def padded_batch() -> tuple[torch.Tensor, torch.Tensor]:
    lengths = [3, 9, 6, 12]
    ids = torch.randint(1000, 2000, (len(lengths), max(lengths)))
    mask = (torch.arange(max(lengths))[None, :] < torch.tensor(lengths)[:, None]).long()
    return ids * mask, mask


@pytest.mark.parametrize("positions", [1, 4, 12])
def test_leading_positions_equal_the_full_forward_pass(positions: int) -> None:
    bert = random_bert()
    ids, mask = padded_batch()
    with torch.inference_mode():
        full = bert(input_ids=ids, attention_mask=mask).last_hidden_state
        leading = last_hidden_at_leading_positions(bert, ids, mask, positions)
    assert leading.shape == (4, positions, 32)
    torch.testing.assert_close(leading, full[:, :positions], atol=1e-5, rtol=1e-5)


def test_padding_keys_stay_masked() -> None:
    """Changing what sits under padding must not change the result (it would if the mask were lost)."""
    bert = random_bert()
    ids, mask = padded_batch()
    noisy = torch.where(mask.bool(), ids, torch.randint(3000, 4000, ids.shape))
    with torch.inference_mode():
        clean = last_hidden_at_leading_positions(bert, ids, mask, 1)
        changed = last_hidden_at_leading_positions(bert, noisy, mask, 1)
    torch.testing.assert_close(clean, changed, atol=1e-5, rtol=1e-5)


def test_positions_must_be_positive() -> None:
    ids, mask = padded_batch()
    with pytest.raises(ValueError, match="positions must be >= 1"):
        last_hidden_at_leading_positions(random_bert(), ids, mask, 0)


def full_forward_output(encoder: DenseEncoder, batch: TokenizedBatch, side: Side) -> torch.Tensor:
    """The encoder's embedding with the library's full forward pass, by disabling the shortcut."""
    original = encoder.sequence_output
    encoder.sequence_output = lambda b, s, positions_read=None: original(b, s, None)  # type: ignore[method-assign]
    try:
        return encoder(batch, side).embedding
    finally:
        del encoder.sequence_output


@pytest.mark.parametrize(
    ("variant", "settings", "positions"),
    [
        ("bibert", {}, 1),
        ("mtbert", {}, 1),
        ("mpbert", {"pooled_tokens": 3}, 3),
        ("madral-en-v2", {}, 4),
        ("madral", {}, None),
    ],
)
def test_encoders_read_only_what_they_need_and_embed_the_same(
    variant: str, settings: dict, positions: int | None
) -> None:
    encoder, tokenizer = build(variant, **settings)
    encoder.eval()
    batch = encoder.tokenize(tokenizer, BATCH_TEXTS, Side.DOCUMENT)
    calls: list[int | None] = []
    original = encoder.sequence_output

    def spy(b: TokenizedBatch, s: Side, positions_read: int | None = None) -> torch.Tensor:
        calls.append(positions_read)
        return original(b, s, positions_read)

    encoder.sequence_output = spy  # type: ignore[method-assign]
    with torch.inference_mode():
        output = encoder(batch, Side.DOCUMENT)
    del encoder.sequence_output
    assert calls == [positions]
    with torch.inference_mode():
        torch.testing.assert_close(
            output.embedding, full_forward_output(encoder, batch, Side.DOCUMENT), atol=1e-5, rtol=1e-5
        )


def test_training_keeps_the_full_forward_pass() -> None:
    encoder, tokenizer = build("mtbert")
    encoder.train()
    batch = encoder.tokenize(tokenizer, BATCH_TEXTS, Side.DOCUMENT)
    hidden = encoder.sequence_output(batch, Side.DOCUMENT, positions_read=1)
    assert hidden.shape[1] == batch.input_ids.shape[1]
