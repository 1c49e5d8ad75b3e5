"""The second store's catalog: models, their Shopify listings (handles) and variant rows, from a seed.

A *model* is what relevance is decided on (leaf, brand, line, gender, features); a *listing* is one Shopify
product (a handle, its title, HTML body and tags, in one language); a *variant row* is one sellable colour /
size of a listing and becomes one madr product (its Variant SKU is the product id). Near-duplicates arise
the way they do in real shops: variant rows of one handle share the title; a model in several colours may
be split into one handle per colour; a model sold in several lengths, capacities or pack sizes is one
handle per size; and ~8% of models are listed a second time under a reworded (sometimes translated) title.
"""

from __future__ import annotations

import random
import re
import unicodedata
from dataclasses import dataclass

from vocabulary import (
    BRANDS,
    COLOURS,
    FEATURES,
    FUEL_STEMS,
    LEAVES,
    LINE_STEMS,
    LINE_SUFFIXES,
    OPTION_SIZES,
    TITLE_SIZES,
    Leaf,
)
from wording import (
    ARTICLES,
    BOILERPLATE,
    COLOUR_SUFFIX,
    DEPARTMENT_TAGS,
    GENDER_TITLE,
    INTROS,
    RELIST_MARKS,
    SPEC_LABELS,
    TITLE_PATTERNS,
    USES,
)

LISTING_LANGUAGES: tuple[tuple[str, float], ...] = (("de", 0.58), ("fr", 0.24), ("en", 0.18))
RELIST_RATE = 0.08
SPLIT_BY_COLOUR_RATE = 0.35
SECOND_TITLE_SIZE_RATE = 0.4
COLOUR_WEIGHTS: dict[str, float] = {"schwarz": 4.0, "weiss": 1.5, "grau": 1.5, "anthrazit": 1.5, "blau": 2.0}


@dataclass(frozen=True)
class Model:
    """What a shopper's intent is matched against: every listing and variant of it shares these."""

    leaf: int
    brand: str
    line: str
    gender: str
    features: tuple[str, ...]
    price: float
    grams: int | None  # None: the title's size says the weight (16 kg, 12er-Pack)


@dataclass(frozen=True)
class Product:
    """One variant row: a madr product. ``title_size`` is in the title, ``option_size`` is Option2."""

    sku: str
    handle: str
    model: Model
    colour: str | None
    option_size: str | None
    title_size: str | None
    language: str
    relisted: bool


@dataclass(frozen=True)
class Listing:
    """One Shopify product (handle) with the rows it exports."""

    handle: str
    title: str
    body: str
    tags: tuple[str, ...]
    language: str
    products: tuple[Product, ...]
    options: bool  # False: one row with Shopify's "Default Title"


def _weighted(rng: random.Random, items: list[str] | tuple[str, ...], weights: list[float]) -> str:
    return rng.choices(list(items), weights=weights, k=1)[0]


def _language(rng: random.Random) -> str:
    return _weighted(rng, [lang for lang, _ in LISTING_LANGUAGES], [w for _, w in LISTING_LANGUAGES])


def slug(text: str) -> str:
    """Shopify's handle: ASCII, lower case, hyphens (umlauts folded the Swiss way, ä -> ae)."""
    text = text.replace("ä", "ae").replace("ö", "oe").replace("ü", "ue").replace("Ä", "Ae").replace("Ö", "Oe")
    text = unicodedata.normalize("NFKD", text.replace("Ü", "Ue")).encode("ascii", "ignore").decode()
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def ean13(rng: random.Random) -> str:
    """A Swiss (prefix 76) EAN-13 with a valid check digit."""
    digits = "76" + "".join(str(rng.randrange(10)) for _ in range(10))
    total = sum(int(d) * (3 if i % 2 else 1) for i, d in enumerate(digits))
    return digits + str((10 - total % 10) % 10)


def swiss_number(value: int) -> str:
    return f"{value:,}".replace(",", "'")


class CatalogBuilder:
    """Builds the whole catalog from one `random.Random`; no state outlives `build`."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.handles: set[str] = set()
        self.lines: set[tuple[str, str]] = set()  # (leaf or brand, line): a line names one model
        self.counter = 10000

    def build(self) -> list[Listing]:
        listings: list[Listing] = []
        for index, leaf in enumerate(LEAVES):
            for _ in range(self.rng.randint(6, 15)):
                listings.extend(self._model_listings(index, leaf))
        return listings

    def _line(self, leaf: Leaf, brand: str) -> str:
        """A line name no other model of the leaf and no other model of the brand has, so that a query
        naming a line (with or without its brand) means one model."""
        stems = FUEL_STEMS if leaf.domain == "fuel" else LINE_STEMS[leaf.department]
        for _ in range(500):
            suffix = self.rng.choice(LINE_SUFFIXES)
            line = f"{self.rng.choice(stems)} {suffix}" if self.rng.random() < 0.8 else self.rng.choice(stems)
            if (leaf.name, line) not in self.lines and (brand, line) not in self.lines:
                self.lines.update({(leaf.name, line), (brand, line)})
                return line
        raise RuntimeError(f"no unused line name left for {leaf.name}")

    def _gender(self, leaf: Leaf) -> str:
        codes = list(leaf.genders)
        weights = [0.15 if code == "k" else 1.0 for code in codes]
        return _weighted(self.rng, codes, weights)

    def _model(self, index: int, leaf: Leaf) -> Model:
        brands = BRANDS[leaf.domain]
        brand = _weighted(self.rng, brands, [1.0 / (rank + 1) ** 0.6 for rank in range(len(brands))])
        count = self.rng.choices((0, 1, 2), weights=(2, 5, 3))[0] if leaf.features else 0
        features = tuple(sorted(self.rng.sample(leaf.features, min(count, len(leaf.features)))))
        low, high = leaf.price
        price = round(self.rng.uniform(low, high)) - 0.1
        line = self._line(leaf, brand)
        grams = self.rng.randint(*leaf.grams) if leaf.grams else None
        return Model(index, brand, line, self._gender(leaf), features, price, grams)

    def _model_listings(self, index: int, leaf: Leaf) -> list[Listing]:
        model = self._model(index, leaf)
        rng = self.rng
        colours: list[str | None] = [None]
        if leaf.coloured:
            names = list(COLOURS)
            weights = [COLOUR_WEIGHTS.get(name, 1.0) for name in names]
            wanted = rng.choices((1, 2, 3), weights=(55, 30, 15))[0]
            picked: list[str] = []
            while len(picked) < wanted:
                colour = _weighted(rng, names, weights)
                if colour not in picked:
                    picked.append(colour)
            colours = list(picked)
        option_sizes: list[str | None] = [None]
        if leaf.option_size:
            adult, kids = OPTION_SIZES[leaf.option_size]
            values = kids if model.gender == "k" else adult
            start = rng.randrange(len(values))
            option_sizes = list(values[start : start + rng.choice((1, 2, 2, 3))])
        title_sizes: list[str | None] = [None]
        if leaf.title_size:
            values = TITLE_SIZES[leaf.title_size][0]
            position = rng.randrange(2 if model.gender == "k" else len(values))
            title_sizes = [values[position]]
            more = 0.7 if leaf.title_size in ("pack", "set") else SECOND_TITLE_SIZE_RATE
            if rng.random() < more:
                neighbour = position + 1 if position + 1 < len(values) else position - 1
                title_sizes.append(values[neighbour])
        language = _language(rng)
        listings = []
        for title_size in title_sizes:
            split = len(colours) > 1 and rng.random() < SPLIT_BY_COLOUR_RATE
            groups = [[colour] for colour in colours] if split else [colours]
            for group in groups:
                listings.append(self._listing(model, leaf, language, group, option_sizes, title_size, split))
        if rng.random() < RELIST_RATE:
            language = _language(rng) if rng.random() < 0.3 else language
            first = listings[0].products[0]
            listings.append(
                self._listing(
                    model,
                    leaf,
                    language,
                    [first.colour],
                    [first.option_size],
                    first.title_size,
                    True,
                    relist=True,
                )
            )
        return listings

    def _listing(
        self,
        model: Model,
        leaf: Leaf,
        language: str,
        colours: list[str | None],
        option_sizes: list[str | None],
        title_size: str | None,
        colour_in_title: bool,
        relist: bool = False,
    ) -> Listing:
        rng = self.rng
        rows = [(colour, size) for colour in colours for size in option_sizes][:6]
        options = len(rows) > 1 or option_sizes != [None]
        single_colour = colours[0] if len(colours) == 1 else None
        show_colour = single_colour is not None and (colour_in_title or not options or rng.random() < 0.5)
        title = self._title(model, leaf, language, title_size, single_colour if show_colour else None)
        if relist:
            title = rng.choice(RELIST_MARKS[language]).format(title=title)
        handle = base = slug(title)
        suffix = 2
        while handle in self.handles:
            handle, suffix = f"{base}-{suffix}", suffix + 1
        self.handles.add(handle)
        self.counter += 1
        code = leaf.department[:2].upper()  # WI, BE, RA, LA, WA, FI
        products = tuple(
            Product(
                sku="-".join(
                    part
                    for part in (
                        f"BF-{code}{self.counter}",
                        (colour or "")[:3].upper(),
                        (size or "").replace(".", ""),
                    )
                    if part
                ),
                handle=handle,
                model=model,
                colour=colour,
                option_size=size,
                title_size=title_size,
                language=language,
                relisted=relist,
            )
            for colour, size in rows
        )
        body = self._body(model, leaf, language, title_size, single_colour)
        return Listing(
            handle, title, body, self._tags(model, leaf, language, colours), language, products, options
        )

    def _title(
        self, model: Model, leaf: Leaf, language: str, title_size: str | None, colour: str | None
    ) -> str:
        rng = self.rng
        gender = GENDER_TITLE[language][model.gender]
        if model.gender == "u" and rng.random() < 0.75:
            gender = ""
        patterns = [p for p in TITLE_PATTERNS[language] if gender or "{gender}-" not in p]
        style = sum(map(ord, model.brand)) % len(patterns)
        pattern = patterns[style] if rng.random() < 0.7 else rng.choice(patterns)
        brand = model.brand.upper() if sum(map(ord, model.brand)) % 5 == 0 else model.brand
        size = TITLE_SIZES[leaf.title_size][1][language].format(v=title_size) if leaf.title_size else ""
        title = pattern.format(
            brand=brand, line=model.line, noun=leaf.nouns[language][0], gender=gender, size=size
        )
        title = " ".join(title.split())
        if colour:
            title += COLOUR_SUFFIX[language].format(colour=COLOURS[colour][LANG_COLUMN[language]])
        return title

    def _body(
        self, model: Model, leaf: Leaf, language: str, title_size: str | None, colour: str | None
    ) -> str:
        rng = self.rng
        strong = f"<strong>{model.brand.replace('&', '&amp;')} {model.line}</strong>"
        noun = leaf.nouns[language][0]
        article = ARTICLES[language] + ("" if language != "en" else (" " + noun))
        intro = rng.choice(INTROS[language]).format(
            strong=strong, noun=noun, noun_article=article, use=rng.choice(USES[leaf.department][language])
        )
        labels = SPEC_LABELS[language]
        items = [FEATURES[feature][LANGUAGE_INDEX[language]] for feature in model.features]
        items = [item[0].upper() + item[1:] for item in items]
        if title_size and leaf.title_size:
            items.append(
                f"{labels['size']}: {TITLE_SIZES[leaf.title_size][1][language].format(v=title_size)}"
            )
        if colour and rng.random() < 0.6:
            items.append(f"{labels['colour']}: {COLOURS[colour][LANG_COLUMN[language]]}")
        if model.gender != "u":
            items.append(f"{labels['gender']}: {GENDER_TITLE[language][model.gender]}")
        if model.grams:
            items.append(f"{labels['weight']}: {swiss_number(model.grams)}&nbsp;g")
        bullets = "<ul>" + "".join(f"<li>{item}</li>" for item in items) + "</ul>"
        return intro + bullets + rng.choice(BOILERPLATE[language])

    def _tags(self, model: Model, leaf: Leaf, language: str, colours: list[str | None]) -> tuple[str, ...]:
        tags = [DEPARTMENT_TAGS[leaf.department], leaf.name]
        if model.gender != "u":
            tags.append(GENDER_TITLE[language][model.gender])
        tags.extend(FEATURES[feature][LANGUAGE_INDEX[language]] for feature in model.features)
        tags.extend(f"farbe-{COLOURS[colour][1].lower()}" for colour in colours if colour)
        tags.append(self.rng.choice(("FW24", "SS25", "FW25")))
        if self.rng.random() < 0.12:
            tags.append("sale")
        return tuple(dict.fromkeys(tags))


LANGUAGE_INDEX: dict[str, int] = {"de": 0, "fr": 1, "en": 2}
LANG_COLUMN: dict[str, int] = {"de": 1, "fr": 2, "en": 3}  # a language's column in COLOURS


def shipping_grams(product: Product) -> int:
    """Shopify's Variant Grams: the model's weight, or what the title's size says (kg, g, a pack)."""
    if product.model.grams:
        return product.model.grams
    kind = LEAVES[product.model.leaf].title_size
    value = int(product.title_size or "1")
    return {"dumbbell": 1000, "kettlebell": 1000, "pack": 40}.get(kind or "", 1) * value


def build_catalog(rng: random.Random) -> list[Listing]:
    """Every listing of the store, in leaf order."""
    return CatalogBuilder(rng).build()
