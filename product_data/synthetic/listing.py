"""Render a `ProductSpec` into a product record: title, description, bullets, annotations.

Listings mention aspects the way real ones do, and sometimes don't: the brand is in most
titles; the color is in the title, only in the description, or nowhere. The ``aspects``
map is what an annotation tool found (madral-kdd22 §8.1: an in-house NLP tool), so it is
drawn first, at rates calibrated to Table 3, and what is annotated is usually also
mentioned. The brand / color *fields* are the catalog's truth and are set more often.
"""

from __future__ import annotations

import random
from typing import Any

from product_data.synthetic.catalog import CatalogModel, ProductSpec
from product_data.synthetic.profiles import Profile
from product_data.synthetic.taxonomy import AUDIENCES, Leaf

CATEGORY_ANNOTATION_RATE = 0.99  # Table 3, madral-kdd22: 99.0% of documents
PARENT_ANNOTATION_RATE = 0.12  # several category values per document, e.g. {Sandals, Shoes} (§5)
# Where an aspect shows up, given whether the tagger found it: (P(title), P(body)); rest: nowhere.
_COLOR_ANNOTATED = (0.6, 0.4)
_COLOR_UNANNOTATED = (0.25, 0.35)
# Description length buckets when there is one: (probability, min words, max words). The spread
# matters downstream: length-bucketed batching needs short, medium and long documents.
_LENGTHS: tuple[tuple[float, int, int], ...] = ((0.47, 8, 30), (0.35, 30, 60), (0.18, 60, 150))
_NO_DESCRIPTION = 0.15  # title-only listings
_NO_BULLETS = 0.25

_SENTENCES = (
    "Made from {material_l} for everyday use.",
    "Built from {material_l} and designed for {use}.",
    "{feature}.",
    "Perfect for {use}.",
    "The {adj_l} design suits {use}.",
    "Whether for {use} or {use2}, it delivers reliable performance.",
    "Ideal for {use}, it combines {feature_l} with {adj_l} style.",
    "Easy to clean and simple to store.",
    "Backed by a 1-year limited warranty.",
    "Makes a great gift for family and friends.",
    "Package includes: 1 x {noun}.",
    "Measures {d1} x {d2} x {d3} inches.",
    "{feature} and {feature2_l} make it stand out from other {plural_l}.",
    "Customers love its {adj_l} look.",
    "Please contact us with any questions; your satisfaction is our priority.",
)
_BOOK_SENTENCES = (
    "This {adj_l} book is written for {use}.",
    "Inside you will find {n} chapters of clear, practical advice.",
    "{feature}.",
    "Written by an award-winning author with years of experience.",
    "Each chapter builds on the last, from the basics to advanced techniques.",
    "A perfect gift for {use}.",
    "Now in its {edition} edition, updated and expanded.",
)
_COLOR_SENTENCES = ("Finished in {color}.", "Color: {color}.", "The {color_l} finish adds a pop of color.")
_BRAND_SENTENCES = ("From {brand}, a name you can trust.", "{brand} quality you can count on.")
_BOOK_BRAND_SENTENCES = ("Published by {brand}.", "A {brand} title.")
_BULLET_LABELS = ("EASY TO USE", "DURABLE", "VERSATILE", "PREMIUM QUALITY", "THOUGHTFUL DESIGN")
_FICTION_WORDS = (("Silent", "Last", "Hidden", "Broken", "Golden", "Midnight", "Winter", "Lost"),
                  ("Harbor", "Orchard", "Letter", "Garden", "Kingdom", "Lighthouse", "River", "Promise"))
_MODEL_SUFFIXES = ("", "", "XL", "B", "S", "-01", "W", "BSS")


def _where(rng: random.Random, title: float, body: float) -> str:
    draw = rng.random()
    return "title" if draw < title else "body" if draw < title + body else "none"


def _model_number(rng: random.Random, brand: str | None) -> str:
    initial = next((ch for ch in (brand or "X").upper() if ch.isalpha()), "X")
    return f"{initial}{rng.choice('BCDEFGHJKMPRSTVX')}{rng.randint(100, 9999)}{rng.choice(_MODEL_SUFFIXES)}"


def _topic(noun: str) -> str:
    words = noun.split()
    generic = ("Cookbook", "Book", "Guide", "Novel")
    return " ".join(words[:-1]) if len(words) > 1 and words[-1] in generic else noun


def _named(leaf: Leaf, brand: str | None) -> str:
    """How a listing names another product: "Breville Juicer", "Nike Men's Running Shoes"."""
    noun = f"{AUDIENCES[leaf.audience][0]} {leaf.noun}" if leaf.audience else leaf.noun
    return f"{brand} {noun}" if brand else noun


def _book_title(rng: random.Random, leaf: Leaf, profile: Profile, thing: str | None) -> str:
    topic, adj, n = _topic(leaf.noun), rng.choice(profile.adjectives), rng.choice((50, 75, 101, 120, 150))
    if thing is not None and profile.name == "cookbook":  # madral-kdd22 Table 8's "juicer book"
        return rng.choice((f"{topic} with the {thing}: {n} Superfood Recipes to Make at Home",
                           f"The {thing} Cookbook: {n} {adj} Recipes for Beginners",
                           f"Mastering Your {thing}: {n} {adj} {topic} Recipes"))
    if thing is not None:
        return rng.choice((f"The {thing} Handbook: A Beginner's Guide", f"Getting the Most from Your {thing}",
                           f"{thing} Basics: Tips, Tricks and {n} Projects"))
    if leaf.parent in ("Literature & Fiction", "Children's Books"):
        return f"The {rng.choice(_FICTION_WORDS[0])} {rng.choice(_FICTION_WORDS[1])}: A {leaf.noun}"
    if profile.name == "cookbook":
        return rng.choice((f"The {adj} {leaf.noun}: {n} Easy Recipes for {rng.choice(profile.uses).title()}",
                           f"{topic} Made Simple: {n} {adj} Recipes"))
    return rng.choice((f"{topic} for Beginners: A Step-by-Step Guide", f"The {adj} Guide to {topic}"))


def _title(rng: random.Random, spec: ProductSpec, leaf: Leaf, profile: Profile, brand_in: bool,
           color_in: bool, mentioned: Leaf | None) -> str:
    brand = spec.brand if brand_in else None
    color = spec.color if color_in else None
    if profile.title_style == "book":
        thing = _named(mentioned, spec.mentions[1]) if mentioned is not None and spec.mentions else None
        return _book_title(rng, leaf, profile, thing)
    head = [brand] if brand else []
    if profile.title_style == "model" and rng.random() < 0.7:
        head.append(_model_number(rng, spec.brand))
    if profile.title_style == "apparel" and leaf.audience:
        head.append(AUDIENCES[leaf.audience][0])
    if rng.random() < 0.6:
        head.append(rng.choice(profile.adjectives))
    if profile.title_style == "home" and rng.random() < 0.35:
        head.append(rng.choice(profile.materials))
    head.append(leaf.noun)
    title = " ".join(head)
    if mentioned is not None and spec.mentions is not None:
        thing = _named(mentioned, spec.mentions[1])
        if mentioned.profile in ("book", "cookbook"):
            title = f"{title} with Bonus {mentioned.noun}"
        else:
            title = f"{title} {rng.choice(('for', 'Compatible with', 'Replacement for'))} {thing}"
    elif profile.title_style != "apparel" and rng.random() < 0.35:
        title = f"{title} with {rng.choice(profile.features)}"
    tail = [spec.variant] if rng.random() < 0.55 else []
    if color:
        tail.insert(rng.randint(0, len(tail)), color)
    return ", ".join([title, *tail])


def _slots(rng: random.Random, spec: ProductSpec, leaf: Leaf, profile: Profile) -> dict[str, Any]:
    material, feature, feature2 = rng.choice(profile.materials), *rng.sample(profile.features, 2)
    use, use2 = rng.sample(profile.uses, 2) if len(profile.uses) > 1 else (profile.uses[0],) * 2
    return dict(
        noun=leaf.noun, noun_l=leaf.noun.lower(), plural_l=leaf.name.lower(), material_l=material.lower(),
        feature=feature, feature_l=feature.lower(), feature2_l=feature2.lower(), use=use, use2=use2,
        adj_l=rng.choice(profile.adjectives).lower(), d1=rng.randint(4, 30), d2=rng.randint(3, 20),
        d3=rng.randint(1, 12), n=rng.randint(8, 30),
        edition=rng.choice(("second", "third", "10th anniversary")),
        brand=spec.brand, color=spec.color, color_l=(spec.color or "").lower(),
    )


def _description(rng: random.Random, slots: dict[str, Any], profile: Profile, must: list[str]) -> str | None:
    draw, (_, low, high) = rng.random(), _LENGTHS[-1]
    for share, low_, high_ in _LENGTHS:
        if draw < share:
            low, high = low_, high_
            break
        draw -= share
    target = rng.randint(low, high)
    pool = list(_BOOK_SENTENCES if profile.title_style == "book" else _SENTENCES)
    rng.shuffle(pool)
    sentences, words = list(must), sum(len(s.split()) for s in must)
    for template in pool * 4:
        if words >= target:
            break
        sentence = template.format(**slots)
        sentences.insert(rng.randint(0, len(sentences)), sentence)
        words += len(sentence.split())
    return " ".join(sentences)


def _bullets(rng: random.Random, slots: dict[str, Any], profile: Profile, spec: ProductSpec,
             brand_in: bool, color_in: bool) -> list[str]:
    bullets = [f"BRAND: {spec.brand}"] if brand_in else []
    features = rng.sample(profile.features, rng.randint(1, 3))
    bullets += [f"{rng.choice(_BULLET_LABELS)}: {feature}." for feature in features]
    if rng.random() < 0.7:
        bullets.append(f"MATERIAL: {slots['material_l'].capitalize()}")
    if rng.random() < 0.6:
        bullets.append(f"{profile.variant_label.upper()}: {spec.variant}")
    if color_in:
        bullets.append(f"COLOR: {spec.color}")
    rng.shuffle(bullets)
    return bullets


def render_product(pid: str, spec: ProductSpec, model: CatalogModel, rng: random.Random,
                   locale: str) -> dict[str, Any]:
    """One product record in PRODUCT_SCHEMA's shape; all randomness comes from ``rng``."""
    leaf, profile = model.leaf(spec.leaf), model.profile(spec.leaf)
    mentioned = model.leaf(spec.mentions[0]) if spec.mentions is not None else None
    aspects: dict[str, list[str]] = {}
    if rng.random() < CATEGORY_ANNOTATION_RATE:
        with_parent = rng.random() < PARENT_ANNOTATION_RATE
        aspects["category"] = [leaf.name, leaf.parent] if with_parent else [leaf.name]
    brand_where = color_where = "none"
    if spec.brand is not None:
        if rng.random() < model.brand_annotation_rate:
            aspects["brand"] = [spec.brand]
            brand_where = _where(rng, profile.brand_title_rate, 1.0)
        else:  # the tagger missed it: often because the listing does not say it
            brand_where = _where(rng, profile.brand_title_rate * 0.5, 0.2)
    if spec.color is not None:
        annotated = rng.random() < model.color_annotation_rate
        if annotated:
            aspects["color"] = [spec.color]
        color_where = _where(rng, *(_COLOR_ANNOTATED if annotated else _COLOR_UNANNOTATED))
    has_description = rng.random() >= _NO_DESCRIPTION
    has_bullets = rng.random() >= _NO_BULLETS
    if not (has_description or has_bullets):  # a title-only listing says what it says in the title
        brand_where = "title" if "brand" in aspects else brand_where
        color_where = "title" if "color" in aspects else color_where
    slots = _slots(rng, spec, leaf, profile)
    title = _title(rng, spec, leaf, profile, brand_where == "title", color_where == "title", mentioned)
    must: list[str] = []
    if brand_where == "body":
        book = profile.title_style == "book"
        must.append(rng.choice(_BOOK_BRAND_SENTENCES if book else _BRAND_SENTENCES).format(**slots))
    if color_where == "body" and has_description:
        must.append(rng.choice(_COLOR_SENTENCES).format(**slots))
    if mentioned is not None and spec.mentions is not None:
        if mentioned.profile in ("book", "cookbook"):
            must.append(f"Includes a free {mentioned.noun.lower()} to get you started.")
        else:
            must.append(f"Made for the {_named(mentioned, spec.mentions[1])}.")
    description = _description(rng, slots, profile, must) if has_description else None
    body_brand = brand_where == "body" and not has_description
    bullets = _bullets(rng, slots, profile, spec, body_brand, color_where == "body") if has_bullets else []
    return {
        "product_id": pid,
        "title": title,
        "description": description,
        "bullet_points": bullets,
        "brand": spec.brand,
        "color": spec.color,
        "category_path": list(leaf.path),
        "aspects": aspects,
        "locale": locale,
    }
