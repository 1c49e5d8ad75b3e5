"""Aspect vocabularies: the value classes each aspect's prediction head predicts.

One `AspectVocabulary` holds, per aspect name, its values ordered by how many
records carry them, after a minimum-frequency filter (madral-kdd22 §8.1 filters
out low-frequency values). MURAL (mural-wsdm24 §5.3.1) predicts values at three
granularities, so a vocabulary also says which unit it counts: whole phrases,
words split on spaces and punctuation, or the backbone's wordpieces.

Matching is case-insensitive (values are case-folded and whitespace-collapsed),
because catalogs spell the same brand "Nike" and "NIKE". A phrase vocabulary also keeps,
per value, the catalog's most frequent spelling ("Wüsthof", not "wüsthof"): predictions are
written in it, so exact-match restricts and filters downstream find them.

An annotated value that is not in the vocabulary (filtered out, or never seen)
encodes to `UNSEEN`. It is never a class: the aspect prediction loss ignores it.
It still counts as an annotation for the presence label (madral-kdd22 §6.2: an
aspect is present when it has any annotation), so presence is not lost with it.
"""

from __future__ import annotations

import enum
import json
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from schemas.value_folding import normalise_value

VOCABULARY_FILE = "aspect_vocabulary.json"
FORMAT = "madr-aspect-vocabulary"
FORMAT_VERSION = 1

# Same value as PyTorch's default `ignore_index`, so an unseen value is ignored by any loss.
UNSEEN = -100

_WORD = re.compile(r"\w+")

Tokenize = Callable[[str], list[str]]


class Granularity(str, enum.Enum):
    """The unit an aspect value is counted and predicted as (mural-wsdm24 §5.3.1)."""

    PHRASE = "phrase"  # the whole value, e.g. "kitchen & dining"
    WORD = "word"  # split on spaces and punctuation: "kitchen", "dining"
    TOKEN = "token"  # the backbone's wordpieces: needs a tokenize function


def most_frequent_spelling(spellings: Mapping[str, int]) -> str:
    """The spelling counted most often; ties go to the one that sorts first, so builds agree."""
    return min(spellings.items(), key=lambda item: (-item[1], item[0]))[0]


def record_spellings(values: Iterable[str]) -> dict[str, str]:
    """Normalised phrase -> the first spelling one record gives it (stripped, inner spaces collapsed)."""
    found: dict[str, str] = {}
    for value in values:
        spelled = " ".join(value.split())
        if spelled:
            found.setdefault(normalise_value(spelled), spelled)
    return found


def value_units(value: str, granularity: Granularity, tokenize: Tokenize | None = None) -> list[str]:
    """The units one annotated value contributes at `granularity`, in order, without repeats."""
    text = normalise_value(value)
    if not text:
        return []
    if granularity is Granularity.PHRASE:
        return [text]
    if granularity is Granularity.WORD:
        units = _WORD.findall(text)
    else:
        if tokenize is None:
            raise ValueError("token granularity needs a tokenize function (the backbone tokenizer's)")
        units = tokenize(text)
    return list(dict.fromkeys(units))


def record_units(
    values: Iterable[str], granularity: Granularity, tokenize: Tokenize | None = None
) -> list[str]:
    """The distinct units of one record's annotations for one aspect (counted once per record)."""
    units: dict[str, None] = {}
    for value in values:
        units.update(dict.fromkeys(value_units(value, Granularity(granularity), tokenize)))
    return list(units)


@dataclass(frozen=True)
class AspectValues:
    """One aspect's classes: `values[i]` is class i (normalised), carried by `counts[i]` records, and
    spelled `spellings[i]` most often in the catalog (empty: no spellings kept, e.g. word units)."""

    values: tuple[str, ...] = ()
    counts: tuple[int, ...] = ()
    spellings: tuple[str, ...] = ()
    _index: dict[str, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "values", tuple(self.values))
        object.__setattr__(self, "counts", tuple(int(count) for count in self.counts))
        object.__setattr__(self, "spellings", tuple(self.spellings))
        if len(self.values) != len(self.counts):
            raise ValueError(f"{len(self.values)} values but {len(self.counts)} counts")
        if self.spellings and len(self.spellings) != len(self.values):
            raise ValueError(f"{len(self.values)} values but {len(self.spellings)} spellings")
        if any(normalise_value(s) != v for s, v in zip(self.spellings, self.values, strict=False)):
            raise ValueError("a spelling must normalise to its value")
        if len(set(self.values)) != len(self.values):
            raise ValueError("aspect values repeat")
        object.__setattr__(self, "_index", {value: i for i, value in enumerate(self.values)})

    def __len__(self) -> int:
        return len(self.values)

    def id_of(self, unit: str) -> int:
        return self._index.get(unit, UNSEEN)

    def spelling(self, index: int) -> str:
        """Class `index` as the catalog spells it most often (its normalised value without spellings)."""
        return self.spellings[index] if self.spellings else self.values[index]


@dataclass(frozen=True)
class AspectVocabulary:
    """Per aspect name, the ordered values a model predicts; saved as JSON next to the model.

    Build it with `from_counts` (or the Beam transform `pipelines.train.vocabulary.BuildAspectVocabulary`).
    """

    aspects: dict[str, AspectValues]
    granularity: Granularity = Granularity.PHRASE
    min_count: int = 1

    def __post_init__(self) -> None:
        object.__setattr__(self, "granularity", Granularity(self.granularity))
        if self.min_count < 1:
            raise ValueError(f"min_count must be >= 1, got {self.min_count}")
        object.__setattr__(self, "aspects", dict(self.aspects))

    @classmethod
    def from_counts(
        cls,
        counts: Mapping[str, Mapping[str, int]],
        min_count: int = 1,
        granularity: Granularity = Granularity.PHRASE,
        spellings: Mapping[str, Mapping[str, str]] | None = None,
    ) -> AspectVocabulary:
        """Keep units counted at least `min_count` times; most frequent first, ties alphabetical.

        The aspects keep the order of `counts`; an aspect whose values are all
        filtered out stays, empty, so a model config can say which aspect has no classes.
        `spellings` (aspect -> unit -> the catalog's spelling) is kept for the units it covers.
        """
        aspects = {}
        for name, unit_counts in counts.items():
            kept = sorted(
                ((unit, count) for unit, count in unit_counts.items() if count >= min_count),
                key=lambda item: (-item[1], item[0]),
            )
            spelled = (spellings or {}).get(name) or {}
            spelling = tuple(spelled.get(u, u) for u, _ in kept) if spelled else ()
            aspects[name] = AspectValues(tuple(u for u, _ in kept), tuple(c for _, c in kept), spelling)
        return cls(aspects, Granularity(granularity), min_count)

    @classmethod
    def from_records(
        cls,
        annotations: Iterable[Mapping[str, Sequence[str]]],
        aspects: Sequence[str],
        min_count: int = 1,
        granularity: Granularity = Granularity.PHRASE,
        tokenize: Tokenize | None = None,
    ) -> AspectVocabulary:
        """In-memory counterpart of the Beam transform, for small catalogs and tests."""
        counts: dict[str, Counter[str]] = {name: Counter() for name in aspects}
        spelled: dict[str, dict[str, Counter[str]]] = {name: {} for name in aspects}
        for record in annotations:
            for name in aspects:
                counts[name].update(record_units(record.get(name) or (), Granularity(granularity), tokenize))
                if Granularity(granularity) is Granularity.PHRASE:
                    for unit, spelling in record_spellings(record.get(name) or ()).items():
                        spelled[name].setdefault(unit, Counter())[spelling] += 1
        spellings = {
            name: {u: most_frequent_spelling(c) for u, c in units.items()} for name, units in spelled.items()
        }
        return cls.from_counts(counts, min_count, granularity, spellings)

    def at_granularity(self, granularity: Granularity, tokenize: Tokenize | None = None) -> AspectVocabulary:
        """A word- or token-level vocabulary derived from this phrase-level one (mural-wsdm24 §5.3.1).

        Each unit is counted with the summed counts of the phrases that contain it, so
        the same `min_count` filter applies at every granularity.
        """
        if self.granularity is not Granularity.PHRASE:
            raise ValueError(
                f"derive granular vocabularies from a phrase vocabulary, not {self.granularity.value}"
            )
        counts: dict[str, Counter[str]] = {name: Counter() for name in self.aspects}
        for name, values in self.aspects.items():
            for phrase, count in zip(values.values, values.counts, strict=True):
                for unit in value_units(phrase, Granularity(granularity), tokenize):
                    counts[name][unit] += count
        return AspectVocabulary.from_counts(counts, self.min_count, Granularity(granularity))

    def __contains__(self, aspect: str) -> bool:
        return aspect in self.aspects

    def values(self, aspect: str) -> AspectValues:
        try:
            return self.aspects[aspect]
        except KeyError:
            raise KeyError(
                f"the vocabulary has no aspect {aspect!r}; it has {', '.join(self.aspects) or 'none'}"
            ) from None

    def sizes(self, aspects: Sequence[str] | None = None) -> dict[str, int]:
        """|V_a| per aspect, in the order asked for (all aspects by default)."""
        names = self.aspects if aspects is None else aspects
        return {name: len(self.values(name)) for name in names}

    def encode(self, aspect: str, values: Iterable[str], tokenize: Tokenize | None = None) -> list[int]:
        """Class ids of one record's annotations: one per distinct unit, `UNSEEN` for unknown units.

        An empty annotation gives an empty list, which the loss masks out.
        """
        table = self.values(aspect)
        return [table.id_of(unit) for unit in record_units(values, self.granularity, tokenize)]

    def decode(self, aspect: str, ids: Iterable[int]) -> list[str]:
        table = self.values(aspect)
        return [table.values[i] for i in ids]

    def spell(self, aspect: str, index: int) -> str:
        """Class `index` of `aspect` as the catalog spells it most often: what predictions are written as."""
        return self.values(aspect).spelling(index)

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "version": FORMAT_VERSION,
            "granularity": self.granularity.value,
            "min_count": self.min_count,
            "aspects": {
                name: {
                    "values": list(table.values),
                    "counts": list(table.counts),
                    **({"spellings": list(table.spellings)} if table.spellings else {}),
                }
                for name, table in self.aspects.items()
            },
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> AspectVocabulary:
        if data.get("format") != FORMAT or data.get("version") != FORMAT_VERSION:
            raise ValueError(
                f"not a {FORMAT} v{FORMAT_VERSION} file (format={data.get('format')!r}, "
                f"version={data.get('version')!r})"
            )
        aspects = {
            name: AspectValues(
                tuple(table["values"]), tuple(table["counts"]), tuple(table.get("spellings", ()))
            )
            for name, table in data["aspects"].items()
        }
        return cls(aspects, Granularity(data["granularity"]), int(data["min_count"]))

    def save(self, path: str | Path) -> Path:
        """Write JSON; a directory gets `aspect_vocabulary.json` inside it."""
        target = Path(path)
        if target.is_dir():
            target = target / VOCABULARY_FILE
        target.write_text(json.dumps(self.to_dict(), indent=1, ensure_ascii=False) + "\n")
        return target

    @classmethod
    def load(cls, path: str | Path) -> AspectVocabulary:
        source = Path(path)
        if source.is_dir():
            source = source / VOCABULARY_FILE
        if not source.is_file():
            raise FileNotFoundError(f"{source} does not exist; build it with BuildAspectVocabulary")
        return cls.from_dict(json.loads(source.read_text()))
