"""Shoppers' queries for the second store and their graded judgments, decided by rules over attributes.

Each query starts from an *intent* (a leaf and the attributes the shopper states: brand, model line,
gender, a feature, a colour, a size), is worded in German, French or English the way a shopper types it,
and is judged by `grade`, never by text similarity:

    3  the leaf, and every stated attribute holds
    2  the leaf, stated attributes hold except soft ones: another shade of the colour family asked, the
       adjacent size (length, litres, kg, pack), a unisex product when men's or women's was asked
    1  the leaf with a hard mismatch (another brand, line, gender or colour family, a missing feature, a
       size further off), or a sibling leaf (same parent in the tree) of the brand asked, if any
    0  anything else (the judged ones are hard negatives from the same department)

Every product the rules grade 2 or 3 is judged (the relevant set is complete); grade 1 and 0 products are
a sample, as an assessor's pool is. A query is kept only when 2-10 products are relevant, from two
listings or more (a model query: two variant rows or more), and when no earlier query had its intent.
"""

from __future__ import annotations

import random
from collections import defaultdict
from dataclasses import dataclass, replace

from listings import LANG_COLUMN, LANGUAGE_INDEX, Product
from vocabulary import COLOURS, FEATURES, LEAVES, TITLE_SIZES
from wording import GENDER_QUERY, NEEDS, QUERY_PATTERNS

QUERY_KINDS: tuple[tuple[str, int], ...] = (
    ("brand", 54),
    ("feature", 40),
    ("size", 24),
    ("gender", 14),
    ("need", 40),
    ("model", 30),
    ("colour", 38),
)
QUERY_LANGUAGES: tuple[tuple[str, float], ...] = (("de", 0.55), ("fr", 0.23), ("en", 0.22))
SAME_LANGUAGE_RATE = 0.6
TYPO_RATE = 0.11
MAX_RELEVANT = 10
MAX_JUDGED = 15
MIN_JUDGED = 8
LABELS: dict[int, str] = {3: "exact", 2: "substitute", 1: "related", 0: "irrelevant"}


@dataclass(frozen=True)
class Intent:
    """What a query asks for; None means the shopper did not say."""

    leaf: int
    brand: str | None = None
    line: str | None = None
    gender: str | None = None
    feature: str | None = None
    colour: str | None = None
    size: str | None = None


@dataclass(frozen=True)
class Query:
    query_id: str
    text: str
    language: str
    kind: str
    intent: Intent


@dataclass(frozen=True)
class Judgment:
    query_id: str
    sku: str
    grade: int
    rule: str


def _sizes_adjacent(leaf: int, asked: str, got: str) -> bool:
    kind = LEAVES[leaf].title_size
    values = TITLE_SIZES[kind][0] if kind else ()
    if asked not in values or got not in values:
        return False
    if "x" in asked and asked.split("x")[0] != got.split("x")[0]:  # a tyre of another rim size
        return False
    return abs(values.index(asked) - values.index(got)) == 1


def grade(intent: Intent, product: Product) -> tuple[int, str]:
    """The grade of ``product`` for ``intent`` and the rule that decided it (see the module docstring)."""
    model = product.model
    if model.leaf != intent.leaf:
        sibling = LEAVES[model.leaf].parent == LEAVES[intent.leaf].parent
        if sibling and (intent.brand is None or model.brand == intent.brand):
            return 1, "sibling type"
        return 0, "other type"
    hard: list[str] = []
    soft: list[str] = []
    if intent.brand and model.brand != intent.brand:
        hard.append("other brand")
    if intent.line and model.line != intent.line:
        hard.append("other model")
    if intent.gender and model.gender != intent.gender:
        (soft if model.gender == "u" and intent.gender in "mw" else hard).append("gender " + model.gender)
    if intent.feature and intent.feature not in model.features:
        hard.append("lacks " + intent.feature)
    if intent.colour and product.colour != intent.colour:
        same_family = product.colour is not None and COLOURS[product.colour][0] == COLOURS[intent.colour][0]
        (soft if same_family else hard).append(f"colour {product.colour}")
    if intent.size and product.title_size != intent.size:
        near = product.title_size is not None and _sizes_adjacent(
            intent.leaf, intent.size, product.title_size
        )
        (soft if near else hard).append(f"size {product.title_size}")
    if hard:
        return 1, "same type; " + ", ".join(hard + soft)
    if soft:
        return 2, "same type; " + ", ".join(soft)
    return 3, "same type; all stated attributes hold"


def _typo(rng: random.Random, text: str) -> str:
    """One slip of the kind shoppers make: a dropped, doubled or swapped letter, or a lost umlaut."""
    words = text.split()
    candidates = [i for i, word in enumerate(words) if len(word) >= 5 and word.isalpha()]
    if not candidates:
        return text
    i = rng.choice(candidates)
    word = words[i]
    folded = word.translate(str.maketrans("äöüéè", "aouee"))
    if folded != word and rng.random() < 0.5:
        words[i] = folded
    else:
        at = rng.randrange(1, len(word) - 1)
        slip = rng.choice(("drop", "double", "swap"))
        if slip == "drop":
            words[i] = word[:at] + word[at + 1 :]
        elif slip == "double":
            words[i] = word[:at] + word[at] + word[at:]
        else:
            words[i] = word[: at - 1] + word[at] + word[at - 1] + word[at + 1 :]
    return " ".join(words)


class QueryWriter:
    """Draws intents from target products, words them, and keeps those with a small complete relevant set."""

    def __init__(self, rng: random.Random, products: list[Product], titles: set[str]) -> None:
        self.rng = rng
        self.titles = titles  # lower-cased: a query that copies a title would test nothing
        self.by_leaf: dict[int, list[Product]] = defaultdict(list)
        self.by_department: dict[str, list[Product]] = defaultdict(list)
        for product in products:
            self.by_leaf[product.model.leaf].append(product)
            self.by_department[LEAVES[product.model.leaf].department].append(product)
        self.texts: set[str] = set()
        self.intents: set[Intent] = set()  # two wordings of one intent would not be two samples

    def write(self) -> tuple[list[Query], list[Judgment]]:
        kinds = [kind for kind, count in QUERY_KINDS for _ in range(count)]
        self.rng.shuffle(kinds)
        queries: list[Query] = []
        judgments: list[Judgment] = []
        for number, kind in enumerate(kinds, start=1):
            query, relevant = self._query(f"S{number:04d}", kind)
            queries.append(query)
            judgments.extend(self._judge(query, relevant))
        return queries, judgments

    def _language(self) -> str:
        return self.rng.choices([lang for lang, _ in QUERY_LANGUAGES], [w for _, w in QUERY_LANGUAGES])[0]

    def _eligible(self, kind: str, leaf: int) -> bool:
        spec = LEAVES[leaf]
        return {
            "size": spec.title_size is not None,
            "colour": spec.coloured,
            "feature": bool(spec.features),
            "need": spec.name in NEEDS,
            "gender": spec.genders not in ("u",),
        }.get(kind, True)

    def _query(self, query_id: str, kind: str) -> tuple[Query, list[tuple[Product, int, str]]]:
        rng = self.rng
        leaves = [leaf for leaf in range(len(LEAVES)) if self._eligible(kind, leaf) and self.by_leaf[leaf]]
        for _ in range(400):
            target = rng.choice(self.by_leaf[rng.choice(leaves)])
            # Most shoppers search in the language the product is listed in; the rest in their own.
            language = target.language if rng.random() < SAME_LANGUAGE_RATE else self._language()
            worded = self._word(kind, language, target)
            if worded is None:
                continue
            text, intent, language = worded
            slipped = _typo(rng, text) if rng.random() < TYPO_RATE else text
            text, kind_label = slipped, kind + ("+typo" if slipped != text else "")
            if text in self.texts or text.lower() in self.titles or intent in self.intents:
                continue
            graded = [(p, *grade(intent, p)) for p in self.by_leaf[intent.leaf]]
            relevant = [(p, g, rule) for p, g, rule in graded if g >= 2]
            handles = {p.handle for p, _, _ in relevant}
            enough = len(handles) >= 2 or (kind == "model" and len(relevant) >= 2)
            if enough and len(relevant) <= MAX_RELEVANT and any(g == 3 for _, g, _ in relevant):
                self.texts.add(text)
                self.intents.add(intent)
                return Query(query_id, text, language, kind_label, intent), relevant
        raise RuntimeError(f"no {kind} query with 2-{MAX_RELEVANT} relevant products found")

    def _word(self, kind: str, language: str, target: Product) -> tuple[str, Intent, str] | None:
        """The query text, its intent and language, or None when the target cannot be asked for this way."""
        rng = self.rng
        model = target.model
        leaf = LEAVES[model.leaf]
        intent = Intent(model.leaf)
        fields = {"noun": leaf.nouns[language][1 if rng.random() < 0.7 else 0]}
        if kind == "need":
            phrases = [(lang, phrase) for lang, phrase in NEEDS[leaf.name] if lang == language]
            language, fields["need"] = rng.choice(phrases or list(NEEDS[leaf.name]))
        pattern = rng.choice(QUERY_PATTERNS[language][kind])
        if kind == "brand" or "{brand}" in pattern:
            intent = replace(intent, brand=model.brand)
            fields["brand"] = model.brand.lower() if rng.random() < 0.8 else model.brand
        if kind == "model":
            intent = replace(intent, brand=model.brand, line=model.line)
            fields["line"] = model.line
            fields["noun"] = leaf.nouns[language][0]
        if kind == "feature" or "{feature}" in pattern:
            if not model.features:
                return None
            feature = rng.choice(model.features)
            intent = replace(intent, feature=feature)
            fields["feature"] = FEATURES[feature][LANGUAGE_INDEX[language]].lower()
            if fields["feature"] in fields.get("need", ""):  # "klickpedale fahrrad" already says it
                return None
            if fields["feature"].startswith("with ") and pattern.startswith("{feature} "):
                pattern = pattern.removeprefix("{feature} ") + " {feature}"  # "bike chain with quick link"
        if kind == "size":
            if target.title_size is None or leaf.title_size is None:
                return None
            intent = replace(intent, size=target.title_size)
            size = TITLE_SIZES[leaf.title_size][1][language].format(v=target.title_size)
            fields["size"] = size.replace(" ", "") if rng.random() < 0.4 else size
            fields["noun"] = leaf.nouns[language][0]
        if kind == "colour" or "{colour}" in pattern:
            if target.colour is None:
                return None
            intent = replace(intent, colour=target.colour)
            fields["colour"] = COLOURS[target.colour][LANG_COLUMN[language]].lower()
            fields["noun"] = leaf.nouns[language][0]
        if "{gender}" in pattern or kind == "gender":
            if model.gender == "u":
                if kind == "gender":
                    return None
                pattern = pattern.replace("{gender}", "")
            else:
                intent = replace(intent, gender=model.gender)
                fields["gender"] = rng.choice(GENDER_QUERY[language][model.gender])
        text = " ".join(pattern.format(**fields).split())
        if rng.random() < 0.85:
            text = text.lower()
        return text, intent, language

    def _judge(self, query: Query, relevant: list[tuple[Product, int, str]]) -> list[Judgment]:
        """The relevant set, then hard negatives: grade 1 of the leaf and its siblings, grade 0 of the
        department (same brand or same group first), to 8-15 judged products."""
        rng = self.rng
        intent = query.intent
        leaf = LEAVES[intent.leaf]
        judged = {p.sku for p, _, _ in relevant}
        total = rng.randint(max(MIN_JUDGED, len(relevant) + 3), MAX_JUDGED)
        ones: list[tuple[Product, int, str]] = []
        zeros: list[tuple[Product, int, str]] = []
        for product in self.by_department[leaf.department]:
            if product.sku in judged:
                continue
            g, rule = grade(intent, product)
            if g == 1:
                ones.append((product, g, rule))
            elif g == 0:
                other = LEAVES[product.model.leaf]
                close = product.model.brand == intent.brand or other.path[:2] == leaf.path[:2]
                zeros.append((product, g, rule + ("; same brand or group" if close else "")))
        rng.shuffle(ones)
        rng.shuffle(zeros)
        zeros.sort(key=lambda item: not item[2].endswith("group"))  # stable: hard negatives first
        wanted_ones = min(len(ones), round((total - len(relevant)) * 0.55))
        negatives = ones[:wanted_ones] + zeros[: total - len(relevant) - wanted_ones]
        rows = sorted(relevant + negatives, key=lambda item: (-item[1], item[0].sku))
        return [Judgment(query.query_id, product.sku, g, rule) for product, g, rule in rows]


def write_queries(
    rng: random.Random, products: list[Product], titles: set[str]
) -> tuple[list[Query], list[Judgment]]:
    """The store's judged queries and their judgments; none is one of the (lower-cased) ``titles``."""
    return QueryWriter(rng, products, titles).write()
