"""The category taxonomy: 3-4 level paths, a few hundred leaves, built from compact tables.

Hand-written groups live in `departments.py`; clothing is generated here as audience x
garment x style ("Clothing, Shoes & Jewelry > Men > Socks > Men's Athletic Socks"), and
sports as sport x equipment. Leaf names are unique, because a leaf name is the value of
the *category* aspect and relevance compares categories (madral-kdd22 §5 annotates a
document with category values such as Sandals, Shoes).
"""

from __future__ import annotations

import functools
from collections import defaultdict
from dataclasses import dataclass

from product_data.synthetic.departments import COMPANIONS, HAND_WRITTEN
from product_data.synthetic.profiles import PROFILES
from product_data.synthetic.vocabulary import BRAND_DOMAINS

_SPORTS = "Sports & Outdoors"
SPORTS: tuple[tuple[str, str, str, str], ...] = (
    ("Team Sports > Soccer", "sports_gear", "team_sports",
     "Soccer Balls: size 5 soccer ball; Shin Guards: soccer shin pads; Soccer Goals: portable soccer net;"
     "Goalkeeper Gloves: goalie gloves"),
    ("Team Sports > Basketball", "sports_gear", "team_sports",
     "Basketballs: indoor basketball; Basketball Hoops: portable hoop; Basketball Nets: replacement net"),
    ("Team Sports > Baseball & Softball", "sports_gear", "team_sports",
     "Baseball Bats: bat; Baseball Gloves: mitt; Baseballs: practice baseballs; Batting Helmets: helmet"),
    ("Team Sports > Football", "sports_gear", "team_sports",
     "Footballs: official football; Football Gloves: receiver gloves; Kicking Tees: football tee"),
    ("Team Sports > Volleyball", "sports_gear", "team_sports",
     "Volleyballs: beach volleyball; Volleyball Nets: volleyball set; Volleyball Knee Pads: knee pads"),
    ("Racket Sports > Tennis", "sports_gear", "racket_sports",
     "Tennis Rackets: tennis racquet; Tennis Balls: pressurized tennis balls; Tennis Bags: racket bag"),
    ("Racket Sports > Pickleball", "sports_gear", "racket_sports",
     "Pickleball Paddles: pickleball paddle set; Pickleballs: outdoor pickleballs; Pickleball Nets: net"),
    ("Racket Sports > Badminton", "sports_gear", "racket_sports",
     "Badminton Rackets: badminton racquet; Shuttlecocks: birdies; Badminton Sets: backyard badminton"),
    ("Golf > Golf Clubs", "sports_gear", "golf",
     "Golf Drivers: driver; Iron Sets: golf irons; Putters: golf putter; Golf Club Sets: complete golf set"),
    ("Golf > Golf Accessories", "sports_gear", "golf",
     "Golf Balls: golf ball pack; Golf Bags: golf stand bag; Golf Gloves: leather golf glove; Golf Tees: "
     "tees"),
    ("Exercise & Fitness > Yoga", "fitness", "fitness",
     "Yoga Mats: exercise mat; Yoga Blocks: foam yoga block; Yoga Straps: stretching strap;"
     "Yoga Wheels: back roller wheel"),
    ("Exercise & Fitness > Strength Training", "fitness", "fitness",
     "Dumbbells: hand weights; Kettlebells: kettle bell; Resistance Bands: exercise bands;"
     "Weight Benches: workout bench; Pull-Up Bars: chin up bar"),
    ("Exercise & Fitness > Cardio Training", "fitness", "fitness",
     "Treadmills: running machine; Exercise Bikes: stationary bike; Rowing Machines: rower;"
     "Elliptical Machines: elliptical; Jump Ropes: skipping rope"),
    ("Exercise & Fitness > Fitness Accessories", "fitness", "fitness",
     "Foam Rollers: muscle roller; Exercise Balls: stability ball; Gym Bags: duffel bag;"
     "Workout Gloves: lifting gloves"),
    ("Outdoor Recreation > Camping & Hiking", "outdoor", "outdoor",
     "Tents: camping tent; Sleeping Bags: sleeping bag; Camping Chairs: folding chair;"
     "Hiking Backpacks: backpacking pack; Headlamps: head lamp; Camping Stoves: backpacking stove;"
     "Coolers: ice chest; Hydration Packs: water backpack; Trekking Poles: hiking poles"),
    ("Outdoor Recreation > Cycling", "outdoor", "cycling",
     "Bikes: bicycle; Bike Helmets: bicycle helmet; Bike Lights: bicycle light; Bike Locks: u lock"),
    ("Outdoor Recreation > Water Sports", "outdoor", "water_sports",
     "Kayaks: inflatable kayak; Life Jackets: life vest; Snorkel Sets: snorkel mask; Paddle Boards: sup "
     "board"),
    ("Outdoor Recreation > Fishing", "outdoor", "fishing",
     "Fishing Rods: fishing pole; Fishing Reels: spinning reel; Fishing Lures: bait; Tackle Boxes: tackle "
     "box"),
)

_CLOTHING = "Clothing, Shoes & Jewelry"
# Audience -> (possessive used in names and titles, words a query uses before a noun, after "for").
AUDIENCES: dict[str, tuple[str, tuple[str, ...], str]] = {
    "Men": ("Men's", ("mens", "men's"), "men"),
    "Women": ("Women's", ("womens", "women's", "ladies"), "women"),
    "Boys": ("Boys'", ("boys",), "boys"),
    "Girls": ("Girls'", ("girls",), "girls"),
}
_KIDS_STYLES = 2  # kids' groups carry only the first styles: kids' catalogs are narrower
# (audience initials, garment group, profile, styles); styles use the leaf mini-language.
APPAREL: tuple[tuple[str, str, str, str], ...] = (
    ("MWBG", "Socks", "apparel", "Athletic Socks: sports socks; Dress Socks: trouser socks; Casual Socks:"
     " everyday socks; No Show Socks: low cut socks; Wool Socks: merino socks"),
    ("MWBG", "T-Shirts", "apparel", "Graphic Tees: graphic t shirts; Crew Neck T-Shirts: crew neck tees;"
     "V-Neck T-Shirts: v neck tees; Long Sleeve T-Shirts: long sleeve shirts; Performance T-Shirts: workout "
     "shirts"),
    ("MWBG", "Jeans", "apparel", "Skinny Jeans: skinny fit jeans; Straight Jeans: straight leg jeans;"
     "Relaxed Fit Jeans: loose jeans; Bootcut Jeans: boot cut jeans"),
    ("MW", "Hoodies & Sweatshirts", "apparel", "Pullover Hoodies: hooded sweatshirt; Zip-Up Hoodies: zip "
                                               "hoodie;"
     "Crewneck Sweatshirts: sweatshirt"),
    ("MWBG", "Jackets & Coats", "apparel", "Rain Jackets: waterproof jacket; Puffer Jackets: down jacket;"
     "Fleece Jackets: fleece; Denim Jackets: jean jacket; Winter Coats: parka"),
    ("MW", "Pants", "apparel", "Chino Pants: chinos; Cargo Pants: utility pants; Dress Pants: slacks;"
     "Joggers: jogger pants; Sweatpants: track pants"),
    ("MW", "Shorts", "apparel", "Athletic Shorts: gym shorts; Cargo Shorts: utility shorts; Denim Shorts: "
                                "jean shorts"),
    ("M", "Underwear", "apparel", "Boxer Briefs: boxer brief; Boxers: boxer shorts; Briefs: brief underwear;"
     "Undershirts: crew undershirt"),
    ("W", "Lingerie & Underwear", "apparel", "Bras: everyday bra; Sports Bras: workout bra; Panties: "
                                             "underwear"),
    ("WG", "Dresses", "apparel", "Casual Dresses: day dress; Maxi Dresses: long dress; Cocktail Dresses: "
                                 "party dress;"
     "Sundresses: summer dress"),
    ("W", "Skirts", "apparel", "Mini Skirts: short skirt; Midi Skirts: midi length skirt; Maxi Skirts: long "
                               "skirt;"
     "Pleated Skirts: pleat skirt"),
    ("WG", "Leggings", "apparel", "Yoga Leggings: yoga pants; Athletic Leggings: workout leggings;"
     "Fleece Lined Leggings: warm leggings"),
    ("MW", "Sleep & Lounge", "apparel", "Pajama Sets: pajamas, pjs; Sleep Shirts: nightshirt;"
     "Lounge Pants: pajama pants"),
    ("M", "Swimwear", "apparel", "Swim Trunks: bathing suit; Board Shorts: surf shorts"),
    ("W", "Swimwear", "apparel", "One-Piece Swimsuits: one piece bathing suit; Bikini Sets: bikini;"
     "Swim Cover-Ups: beach cover up"),
    ("MWBG", "Shoes", "footwear", "Running Shoes: running sneakers; Sneakers: tennis shoes; Hiking Boots: "
                                  "hiking "
     "shoes; Sandals: slides; Slippers: house shoes; Walking Shoes: walking sneakers; Rain Boots: rubber "
     "boots"),
    ("M", "Shoes", "footwear", "Dress Shoes: oxford shoes; Loafers: slip on loafers; Work Boots: steel toe "
                               "boots"),
    ("W", "Shoes", "footwear", "Flats: ballet flats; Heels: high heels, pumps; Ankle Boots: booties"),
    ("MW", "Hats & Caps", "apparel", "Baseball Caps: ball cap; Beanies: knit hat; Sun Hats: wide brim hat;"
     "Bucket Hats: fishing hat"),
    ("MW", "Accessories", "apparel", "Belts: leather belt; Winter Gloves: warm gloves; Sunglasses: polarized "
                                     "sunglasses"),
)
_INITIALS = {"M": "Men", "W": "Women", "B": "Boys", "G": "Girls"}


@dataclass(frozen=True)
class Leaf:
    """One leaf category and how listings and shoppers name its products."""

    index: int
    path: tuple[str, ...]  # department first, the leaf itself last
    noun: str  # how a title names one product: "Juicer", "Athletic Socks"
    query_forms: tuple[str, ...]  # lower-case names a shopper types: "juicer", "juice extractor"
    profile: str  # key of `profiles.PROFILES`
    brand_domain: str  # key of `vocabulary.BRAND_DOMAINS`
    audience: str | None = None  # "Men", "Women", "Boys", "Girls" for clothing and shoes

    @property
    def name(self) -> str:
        return self.path[-1]

    @property
    def parent(self) -> str:
        return self.path[-2]

    @property
    def department(self) -> str:
        return self.path[0]


@dataclass(frozen=True)
class Taxonomy:
    """All leaves plus the relations hard negatives are drawn from."""

    leaves: tuple[Leaf, ...]
    companions: tuple[tuple[int, ...], ...]  # per leaf: leaves whose listings name its products

    def __post_init__(self) -> None:
        names = [leaf.name for leaf in self.leaves]
        if len(set(names)) != len(names):
            repeated = sorted({name for name in names if names.count(name) > 1})
            raise ValueError(f"leaf names must be unique (they are category aspect values): {repeated}")
        for leaf in self.leaves:
            if not 3 <= len(leaf.path) <= 4:
                raise ValueError(f"leaf {leaf.name!r} has depth {len(leaf.path)}, expected 3 or 4")
            if leaf.profile not in PROFILES or leaf.brand_domain not in BRAND_DOMAINS:
                raise ValueError(f"leaf {leaf.name!r}: unknown profile or brand domain")
        if len(self.companions) != len(self.leaves) or not all(self.companions):
            raise ValueError("every leaf needs at least one companion leaf")

    @functools.cached_property
    def index_of(self) -> dict[str, int]:
        return {leaf.name: leaf.index for leaf in self.leaves}

    @functools.cached_property
    def siblings(self) -> tuple[tuple[int, ...], ...]:
        """Per leaf, the other leaves under the same parent path."""
        groups: dict[tuple[str, ...], list[int]] = defaultdict(list)
        for leaf in self.leaves:
            groups[leaf.path[:-1]].append(leaf.index)
        return tuple(tuple(i for i in groups[leaf.path[:-1]] if i != leaf.index) for leaf in self.leaves)

    def related(self, a: int, b: int) -> bool:
        """Distinct leaves a shopper would accept as a fair substitute: siblings under one parent,
        or one clothing style for two audiences (Men's / Women's Athletic Socks)."""
        left, right = self.leaves[a], self.leaves[b]
        if a == b:
            return False
        same_style = left.audience is not None and right.audience is not None and left.noun == right.noun
        return left.path[:-1] == right.path[:-1] or same_style

    @property
    def parents(self) -> set[tuple[str, ...]]:
        return {leaf.path[:-1] for leaf in self.leaves}

    def leaf(self, name: str) -> Leaf:
        return self.leaves[self.index_of[name]]


def singular(name: str) -> str:
    """English singular of a catalog plural ("Juicers" -> "Juicer", "Benches" -> "Bench")."""
    head, _, last = name.rpartition(" ")
    if last.endswith("ies"):
        last = last[:-3] + "y"
    elif last.endswith(("sses", "xes", "ches", "shes")):
        last = last[:-2]
    elif last.endswith("s") and not last.endswith("ss"):
        last = last[:-1]
    return f"{head} {last}" if head else last


def parse_entries(text: str) -> list[tuple[str, str | None, tuple[str, ...]]]:
    """Parse "Name (Noun): syn, syn; Name2: syn" into (name, noun or None, synonyms)."""
    entries = []
    for raw in text.split(";"):
        head, _, synonyms = raw.partition(":")
        name, _, noun = head.strip().partition(" (")
        syns = tuple(s.strip().lower() for s in synonyms.split(",") if s.strip())
        entries.append((name.strip(), noun.rstrip(")").strip() or None, syns))
    return entries


def _dedupe(items: list[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(item for item in items if item))


def _hand_written_forms(name: str, noun: str, synonyms: tuple[str, ...]) -> tuple[str, ...]:
    # "Quilts & Bedspreads" is asked for as "quilt", "quilts" or "bedspreads": partial names.
    return _dedupe([noun.lower(), *(part.strip().lower() for part in name.split("&")), *synonyms])


def _apparel_forms(audience: str, style: str, synonyms: tuple[str, ...]) -> tuple[str, ...]:
    # Clothing queries name their audience ("mens athletic socks", "sandals for girls"), which keeps
    # the men's and women's leaves of one style apart.
    _, before, after = AUDIENCES[audience]
    bases = [style.lower(), *synonyms]
    prefixed = [f"{word} {base}" for base in bases for word in before]
    return _dedupe(prefixed + [f"{base} for {after}" for base in bases])


def _raw_leaves() -> list[dict]:
    raw: list[dict] = []
    groups = list(HAND_WRITTEN) + [(f"{_SPORTS} > {path}", *rest) for path, *rest in SPORTS]
    for group, profile, domain, entries in groups:
        parents = tuple(part.strip() for part in group.split(">"))
        for name, noun, synonyms in parse_entries(entries):
            noun = noun or singular(name.split(" & ")[0])
            raw.append(dict(path=(*parents, name), noun=noun, profile=profile, brand_domain=domain,
                            query_forms=_hand_written_forms(name, noun, synonyms)))
    for initials, garment, profile, entries in APPAREL:
        domain = "footwear" if profile == "footwear" else "apparel"
        for initial in initials:
            audience = _INITIALS[initial]
            styles = parse_entries(entries)
            if audience in ("Boys", "Girls"):
                styles = styles[:_KIDS_STYLES]
            for style, _, synonyms in styles:
                name = f"{AUDIENCES[audience][0]} {style}"
                raw.append(dict(path=(_CLOTHING, audience, garment, name), noun=style, profile=profile,
                                brand_domain=domain, audience=audience,
                                query_forms=_apparel_forms(audience, style, synonyms)))
    return raw


def _companions(leaves: list[Leaf]) -> tuple[tuple[int, ...], ...]:
    """Resolve `COMPANIONS`: the leaf's own entry, then its group's, then its department's.

    A leaf named as someone's companion gets that someone back (the juicing cookbook's
    companion is the juicer); what is left falls back to its siblings.
    """
    index = {leaf.name: leaf.index for leaf in leaves}
    unknown = {n for names in COMPANIONS.values() for n in names} - set(index)
    if unknown:
        raise ValueError(f"COMPANIONS names unknown leaves: {sorted(unknown)}")
    referrers: dict[int, list[int]] = defaultdict(list)
    for leaf in leaves:
        for name in COMPANIONS.get(leaf.name, ()):
            referrers[index[name]].append(leaf.index)
    result = []
    for leaf in leaves:
        keys = [leaf.name] + [" > ".join(leaf.path[:k]) for k in range(len(leaf.path) - 1, 0, -1)]
        if leaf.name not in COMPANIONS and referrers[leaf.index]:
            found = referrers[leaf.index]
        else:
            names = next((COMPANIONS[key] for key in keys if key in COMPANIONS), ())
            found = [index[name] for name in names]
        found = [i for i in found if i != leaf.index]
        if not found:
            found = [other.index for other in leaves
                     if other.path[:-1] == leaf.path[:-1] and other is not leaf]
        result.append(tuple(found))
    return tuple(result)


@functools.lru_cache(maxsize=1)
def build_taxonomy() -> Taxonomy:
    """The taxonomy is static data: built once per process, identical for every seed."""
    leaves = [Leaf(index=i, **fields) for i, fields in enumerate(_raw_leaves())]
    return Taxonomy(tuple(leaves), _companions(leaves))
