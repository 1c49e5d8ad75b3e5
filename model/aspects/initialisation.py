"""Start the aspect layers where the pre-trained backbone already puts aspect values.

A freshly built MADRAL tower has random aspect queries at std 0.02 behind random
projections, and random value tables U_a. Its attention logits start near 0.003,
so every slot reads the same mean-pooled vector, and the value tables have nothing
to align with: runs stopped at the value-frequency floor of the AP loss
(shared/notes/aspect-learning-probe.md). MURAL starts its unshared value tables
from the mean embedding of each value's wordpieces and finds random tables worse
(mural-wsdm24 §4.2, Table 4); this module does the same for the MADRAL family,
in the space where the prediction heads actually read, the backbone's last layer:

- row v of U_a is the backbone's mean content state for the text of value v
  ("Hanes", "Men's Belts"), centred on the aspect's mean so that what the rows share
  does not dominate the logits; b_a starts at 0;
- the projections W^Q, W^K, W^V of the Aspect Extraction Network (Eq. 1-2,
  madral-kdd22) start as the identity, so an extracted slot is an average of token
  states, the space the rows live in;
- aspect a's query starts at the centred mean of its value rows, scaled so that the
  attention logits over a text's tokens spread by `attention_spread` (in units of
  logits): tokens that look like a brand name get the brand slot's attention.

This only chooses a starting point; every parameter is still trained by Eq. 7-8.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn
from transformers import PreTrainedTokenizerBase

from model.aspects.extraction import AspectExtractionNetwork
from model.aspects.heads import AspectPredictionHeads

# Std of the initial attention logits over the tokens of a text: about 2 gives
# softmax weights that single out a few tokens, yet leaves gradient on the others.
ATTENTION_SPREAD = 2.0
# Std of the initial prediction logits across an aspect's values: confident enough to
# rank, far from the saturated logits (tens) that unscaled states would give.
LOGIT_SPREAD = 2.0


@torch.no_grad()
def _content_states(
    transformer: nn.Module, tokenizer: PreTrainedTokenizerBase, texts: Sequence[str], max_length: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Last-layer states (B, L, H) of `texts` and the mask (B, L) of their content tokens (no [CLS]/[SEP])."""
    device = next(transformer.parameters()).device
    encoded = tokenizer(
        list(texts),
        padding=True,
        truncation=True,
        max_length=max_length,
        return_tensors="pt",
        return_special_tokens_mask=True,
    ).to(device)
    output = transformer(input_ids=encoded["input_ids"], attention_mask=encoded["attention_mask"])
    content = encoded["attention_mask"].bool() & ~encoded["special_tokens_mask"].bool()
    # A text that tokenises to nothing (all special) falls back to every real token.
    empty = ~content.any(1)
    content[empty] = encoded["attention_mask"][empty].bool()
    return output.last_hidden_state, content


@torch.no_grad()
def text_states(
    transformer: nn.Module,
    tokenizer: PreTrainedTokenizerBase,
    texts: Sequence[str],
    batch_size: int = 256,
    max_length: int = 16,
) -> torch.Tensor:
    """(len(texts), H): the mean last-layer state of each text's content tokens."""
    rows: list[torch.Tensor] = []
    for start in range(0, len(texts), batch_size):
        states, content = _content_states(
            transformer, tokenizer, texts[start : start + batch_size], max_length
        )
        weights = content.to(states.dtype)
        rows.append((states * weights[..., None]).sum(1) / weights.sum(1, keepdim=True))
    return torch.cat(rows)


@torch.no_grad()
def initialise_value_tables(
    heads: AspectPredictionHeads, value_states: dict[str, torch.Tensor], logit_spread: float = LOGIT_SPREAD
) -> None:
    """U_a <- centred value states, scaled; b_a <- 0.

    Unscaled, the rows give logits of several tens and an AP loss far above uniform
    chance on the first step; the scale puts the logits of the value names' own states
    at std `logit_spread` across the classes.
    """
    for aspect, states in value_states.items():
        table = heads.tables[aspect]
        if states.shape != table.weight.shape:
            raise ValueError(
                f"{aspect}: {tuple(states.shape)} value states for a table of {tuple(table.weight.shape)}"
            )
        rows = states - states.mean(0, keepdim=True)
        if len(rows) > 1:
            rows = rows * (logit_spread / (states @ rows.T).std().clamp_min(1e-6))
        table.weight.copy_(rows.to(table.weight))
        table.bias.zero_()


@torch.no_grad()
def initialise_extraction(
    network: AspectExtractionNetwork,
    aspect_directions: dict[str, torch.Tensor],
    token_states: torch.Tensor,
    attention_spread: float = ATTENTION_SPREAD,
) -> None:
    """Identity projections; each named slot's query along its aspect's direction.

    `token_states` (N, H) is a sample of content-token states, used to set the query's
    length so that its logits over tokens have std `attention_spread`. Slots without a
    direction (OTHER) keep their random query: with identity projections and near-zero
    logits they start as the mean of the tokens, what "everything else" should be.
    """
    hidden = network.queries.shape[1]
    for projection in (network.w_query, network.w_key, network.w_value):
        projection.weight.copy_(torch.eye(hidden, dtype=projection.weight.dtype))
    for name, direction in aspect_directions.items():
        if name not in network.names:
            continue
        logits = token_states.to(direction) @ direction * network.scale
        spread = logits.std().clamp_min(1e-6)
        network.queries[network.names.index(name)] = (direction * attention_spread / spread).to(
            network.queries
        )


def initialise_aspect_layers(
    transformer: nn.Module,
    tokenizer: PreTrainedTokenizerBase,
    value_names: dict[str, Sequence[str]],
    heads: AspectPredictionHeads,
    extractors: Sequence[nn.Module],
    sample_texts: Sequence[str],
) -> None:
    """Value tables from the value names, and every Aspect Extraction Network pointed at its aspects.

    `value_names[a]` lists V_a in class order; `sample_texts` are a few texts whose token
    states calibrate the attention scale (the value names themselves serve when no
    catalog text is at hand).
    """
    # Dropout off: the rows must be the states the model computes at inference.
    training = transformer.training
    transformer.eval()
    try:
        states = {aspect: text_states(transformer, tokenizer, names) for aspect, names in value_names.items()}
        token_sample = _token_states(transformer, tokenizer, sample_texts)
    finally:
        transformer.train(training)
    initialise_value_tables(heads, states)
    networks = [e for e in extractors if isinstance(e, AspectExtractionNetwork)]
    centre = token_sample.mean(0)
    directions = {aspect: values.mean(0) - centre for aspect, values in states.items()}
    for network in networks:
        initialise_extraction(network, directions, token_sample - centre)


@torch.no_grad()
def _token_states(
    transformer: nn.Module,
    tokenizer: PreTrainedTokenizerBase,
    texts: Sequence[str],
    batch_size: int = 256,
    max_length: int = 64,
) -> torch.Tensor:
    """(tokens, H): the content-token states of `texts`, flattened."""
    rows = []
    for start in range(0, len(texts), batch_size):
        states, content = _content_states(
            transformer, tokenizer, texts[start : start + batch_size], max_length
        )
        rows.append(states[content])
    return torch.cat(rows)
