"""Multi-granularity aspect learning for MURAL (mural-wsdm24 §3, §4.2, §4.3, §5.3.1).

Three pieces, each small and testable alone:

- the value vocabularies V_a^g of every aspect a at granularities phrase, word and
  token (one `model.aspects.AspectVocabulary` per granularity) and the wordpieces
  that initialise their embeddings;
- the grouping schemes that decide which guiding token represents which (a, g)
  objective (Eq. 3-5);
- the group-wise contrastive loss (Eq. 2) and its averaging over groups.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import torch
from torch.nn import functional
from transformers import PreTrainedTokenizerBase

from model.aspects.labels import AspectLabels
from model.aspects.vocabulary import AspectVocabulary, Granularity
from model.mural_tokens import guiding_token_text

GRANULARITIES: tuple[str, ...] = tuple(g.value for g in Granularity)  # phrase, word, token
Objective = tuple[str, str]  # (aspect, granularity): one L_a^g of Eq. 2
GranularityLabels = Mapping[str, AspectLabels]  # granularity -> the batch's A_a^g for every aspect a


class Grouping(str, enum.Enum):
    """How the |A| * |G| objectives share guiding tokens (mural-wsdm24 §4.3)."""

    SINGLE = "single"  # one token per (aspect, granularity) objective, Eq. 3
    GRANULARITY = "granularity"  # one token per granularity, Eq. 4
    ASPECT = "aspect"  # one token per aspect, Eq. 5


@dataclass(frozen=True)
class AspectGroup:
    """One guiding token and the objectives its final-layer encoding is trained on."""

    name: str
    objectives: tuple[Objective, ...]

    @property
    def token(self) -> str:
        return guiding_token_text(self.name)


def _single(aspects: Sequence[str], granularities: Sequence[str]) -> list[AspectGroup]:
    return [AspectGroup(f"{a}_{g}", ((a, g),)) for a in aspects for g in granularities]


def _by_granularity(aspects: Sequence[str], granularities: Sequence[str]) -> list[AspectGroup]:
    return [AspectGroup(g, tuple((a, g) for a in aspects)) for g in granularities]


def _by_aspect(aspects: Sequence[str], granularities: Sequence[str]) -> list[AspectGroup]:
    return [AspectGroup(a, tuple((a, g) for g in granularities)) for a in aspects]


_GROUPINGS: dict[Grouping, Callable[[Sequence[str], Sequence[str]], list[AspectGroup]]] = {
    Grouping.SINGLE: _single,
    Grouping.GRANULARITY: _by_granularity,
    Grouping.ASPECT: _by_aspect,
}


def aspect_groups(
    aspects: Sequence[str], granularities: Sequence[str], grouping: Grouping
) -> tuple[AspectGroup, ...]:
    """The guiding-token groups of a scheme, in input order (o_1 .. o_K)."""
    return tuple(_GROUPINGS[Grouping(grouping)](aspects, granularities))


def value_wordpieces(
    vocabulary: AspectVocabulary, aspect: str, tokenizer: PreTrainedTokenizerBase
) -> list[list[int]]:
    """The wordpiece ids of each value of `aspect`, whose mean embedding stands for it (§4.2)."""
    values = list(vocabulary.values(aspect).values)
    if vocabulary.granularity is Granularity.TOKEN:
        # A token value such as '##made' is already a wordpiece; tokenising it as text would split it.
        return [[i] for i in tokenizer.convert_tokens_to_ids(values)]
    return [tokenizer(value, add_special_tokens=False)["input_ids"] for value in values]


def build_vocabularies(
    annotations: Iterable[Mapping[str, Sequence[str]] | None],
    aspects: Sequence[str],
    tokenizer: PreTrainedTokenizerBase,
    granularities: Sequence[str] = GRANULARITIES,
    min_count: int = 1,
) -> dict[str, AspectVocabulary]:
    """V_a^g for every granularity g, from records' phrase annotations (§5.3.1).

    One `AspectVocabulary` per granularity, so the value tables, the labels and the
    MADRAL heads all count values the same way (case-folded, punctuation-split words,
    the backbone's wordpieces).
    """
    records = [record or {} for record in annotations]
    return {
        g: AspectVocabulary.from_records(records, aspects, min_count, Granularity(g), tokenizer.tokenize)
        for g in granularities
    }


def vocabulary_sizes(
    vocabularies: Mapping[str, AspectVocabulary], aspects: Sequence[str]
) -> dict[str, dict[str, int]]:
    """|V_a^g| as `MuralConfig.value_vocabulary_sizes` wants it: aspect -> granularity -> size."""
    return {a: {g: len(vocabularies[g].values(a)) for g in vocabularies} for a in aspects}


def build_labels(
    annotations: Sequence[Mapping[str, Sequence[str]] | None],
    vocabularies: Mapping[str, AspectVocabulary],
    aspects: Sequence[str],
    tokenizer: PreTrainedTokenizerBase,
) -> dict[str, AspectLabels]:
    """The annotation sets A_a^g of a batch: granularity -> `AspectLabels` (ids padded with -100)."""
    return {
        g: AspectLabels.from_annotations(annotations, vocabulary, aspects, tokenizer.tokenize)
        for g, vocabulary in vocabularies.items()
    }


def multi_hot(ids: torch.Tensor, size: int) -> torch.Tensor:
    """[batch, M] class ids padded with -100 -> [batch, size] bool membership."""
    valid = ids >= 0
    rows = torch.zeros(ids.shape[0], size + 1, dtype=torch.bool, device=ids.device)
    rows.scatter_(1, torch.where(valid, ids, size), True)  # padding lands in the extra column
    return rows[:, :size]


def group_contrastive_loss(
    encodings: torch.Tensor, value_embeddings: torch.Tensor, positives: torch.Tensor
) -> torch.Tensor:
    """L_a^g(X) of Eq. 2 (mural-wsdm24) for each example: [batch].

    -1/|A_a^g| * sum over positives o+ of log( exp(h . e_o+) / sum_v exp(h . e_v) ),
    with sim the dot product and the softmax over the whole table V_a^g. Rows without
    positives give 0; callers must leave them out of any average.
    """
    log_probs = functional.log_softmax(encodings @ value_embeddings.T, dim=-1)
    positives = positives.to(log_probs.dtype)
    counts = positives.sum(dim=-1)
    return -(log_probs * positives).sum(dim=-1) / counts.clamp(min=1)


def aspect_learning_loss(
    groups: Sequence[AspectGroup],
    group_encodings: torch.Tensor,
    value_embeddings: Callable[[str, str], torch.Tensor],
    labels: GranularityLabels,
) -> torch.Tensor:
    """L_A(X) of Eq. 3-5 (mural-wsdm24), averaged over the batch.

    Objectives of group k use the k-th guiding-token encoding. Within a group the
    objectives are averaged, then the groups: with every annotation present this is
    exactly Eq. 3, 4 or 5. Objectives an example has no annotation for are left out of
    its averages (Eq. 2 is undefined for an empty A_a^g), and examples without any
    annotation are left out of the batch mean; a batch without any annotation gives 0.
    """
    batch = group_encodings.shape[0]
    group_sums, groups_present = group_encodings.new_zeros(batch), group_encodings.new_zeros(batch)
    for k, group in enumerate(groups):
        loss_sum, present = group_encodings.new_zeros(batch), group_encodings.new_zeros(batch)
        for aspect, granularity in group.objectives:
            granularity_labels = labels.get(granularity)
            if granularity_labels is None or aspect not in granularity_labels.values:
                continue  # no annotations of this kind in the batch: implicit learning only (§4.1)
            table = value_embeddings(aspect, granularity)
            positives = multi_hot(granularity_labels.values[aspect].to(group_encodings.device), len(table))
            has_label = positives.any(dim=-1).to(group_encodings.dtype)
            losses = group_contrastive_loss(group_encodings[:, k], table, positives)
            loss_sum = loss_sum + losses * has_label
            present = present + has_label
        group_present = (present > 0).to(group_encodings.dtype)
        group_sums = group_sums + group_present * loss_sum / present.clamp(min=1)
        groups_present = groups_present + group_present
    annotated = groups_present > 0
    if not annotated.any():
        return group_encodings.sum() * 0.0  # keeps the graph, so backward() works on any batch
    return (group_sums[annotated] / groups_present[annotated]).mean()
