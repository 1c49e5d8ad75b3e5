"""Product kinds: what a listing of each kind says besides its category, brand and color.

A `Profile` is shared by many leaf categories (every kitchen appliance is an "appliance")
and holds the non-aspect vocabulary of a listing: materials, features, the one variant
attribute a shopper may ask for ("queen size", "wireless", "20v max"), and how often a
product of this kind has a brand or a color at all (books have no color; almost every
shirt has one). The variant is the "OTHER" information madral-kdd22 §4 leaves to the
text: it is no aspect, but it does move relevance (see `relevance.py`).
"""

from __future__ import annotations

from dataclasses import dataclass

from product_data.synthetic.vocabulary import COLOR_FAMILIES

TITLE_STYLES: tuple[str, ...] = ("model", "home", "apparel", "book")


@dataclass(frozen=True)
class Profile:
    """The listing vocabulary of one kind of product."""

    name: str
    title_style: str  # how titles are built: "model" numbers, "home" goods, "apparel", "book"
    brand_rate: float  # share of products of this kind that have a brand field
    color_rate: float  # share that have a color field; 0 for colorless kinds
    palette: tuple[str, ...]  # color families this kind comes in
    variant_label: str  # bullet label of the variant attribute, e.g. "Size"
    variants: tuple[str, ...]
    qualifier: str  # how a query names a variant, e.g. "{v} size" -> "queen size"
    materials: tuple[str, ...]
    features: tuple[str, ...]
    adjectives: tuple[str, ...]
    uses: tuple[str, ...]  # completes "Perfect for ..."
    brand_title_rate: float = 0.9  # when the brand is annotated, how often the title says it

    def __post_init__(self) -> None:
        if self.title_style not in TITLE_STYLES:
            raise ValueError(f"profile {self.name}: title_style must be one of {TITLE_STYLES}")
        for rate in (self.brand_rate, self.color_rate, self.brand_title_rate):
            if not 0.0 <= rate <= 1.0:
                raise ValueError(f"profile {self.name}: rates must lie in [0, 1], got {rate}")
        unknown = set(self.palette) - set(COLOR_FAMILIES)
        if unknown:
            raise ValueError(f"profile {self.name}: unknown color families {sorted(unknown)}")
        if self.color_rate > 0 and not self.palette:
            raise ValueError(f"profile {self.name}: a colored kind needs a palette")
        if not (self.variants and self.materials and self.features and self.adjectives and self.uses):
            raise ValueError(f"profile {self.name}: needs variants, materials, features, adjectives, uses")
        if "{v}" not in self.qualifier:
            raise ValueError(f"profile {self.name}: qualifier must contain '{{v}}'")

    @property
    def colors(self) -> tuple[str, ...]:
        return tuple(shade for family in self.palette for shade in COLOR_FAMILIES[family])

    def qualifier_text(self, variant: str) -> str:
        return self.qualifier.format(v=variant).lower()


def _profile(name: str, style: str, brand: float, color: float, palette: str, variant: str,
             qualifier: str, materials: str, features: str, adjectives: str, uses: str,
             brand_title_rate: float = 0.9) -> Profile:
    """Compact constructor: list-valued fields are '|'-separated; palette is space-separated.

    ``variant`` is "Label: v1|v2|...".
    """
    label, values = variant.split(":", 1)
    split = lambda text: tuple(part.strip() for part in text.split("|") if part.strip())  # noqa: E731
    return Profile(
        name, style, brand, color, tuple(palette.split()), label.strip(), split(values), qualifier,
        split(materials), split(features), split(adjectives), split(uses), brand_title_rate,
    )


_HOME = "White Gray Blue Pink Green Brown Purple Black Red Yellow Orange"
_TECH = "Black White Gray Metallic Blue"
_ALL = " ".join(COLOR_FAMILIES)

PROFILES: dict[str, Profile] = {p.name: p for p in (
    _profile("appliance", "model", 0.92, 0.7, "Black White Metallic Red Blue Green", "Power: 500-Watt|"
             "700-Watt|1000-Watt|1200-Watt|1500-Watt", "{v}", "Stainless Steel|BPA-Free Plastic|Die-Cast "
             "Metal|Brushed Aluminum|Tempered Glass", "Dishwasher-safe removable parts|Overload protection|"
             "Variable speed control|Auto shut-off|Non-slip feet|Cord storage|Large capacity|One-touch "
             "controls|Easy-clean design|Compact footprint", "Compact|Professional|Digital|Programmable|"
             "Quiet|High-Speed|Classic|Premium|Easy-Clean", "busy mornings|small kitchens|family meals|"
             "healthy living|meal prep"),
    _profile("appliance_part", "home", 0.8, 0.3, "Black White Metallic", "Pack: 1 Count|2 Pack|3 Pack|6 "
             "Pack|12 Pack", "{v}", "Stainless Steel|BPA-Free Plastic|Food-Grade Silicone|Paper|Mesh",
             "Exact-fit replacement|Easy to install|Dishwasher safe|Food-grade materials|Universal fit",
             "Replacement|Genuine|Universal|Heavy-Duty|Reusable", "replacing worn parts|everyday use|"
             "upgrades"),
    _profile("cookware", "home", 0.9, 0.45, "Black Metallic Red Blue Gray Green", "Size: 8-Inch|10-Inch|"
             "12-Inch|3-Quart|5-Quart|10-Piece", "{v}", "Cast Iron|Stainless Steel|Hard-Anodized Aluminum|"
             "Carbon Steel|Ceramic|Copper|Nonstick Aluminum", "Oven safe to 500 degrees|Induction "
             "compatible|PFOA-free nonstick coating|Stay-cool handles|Dishwasher safe|Even heat "
             "distribution|Tempered glass lid", "Nonstick|Pre-Seasoned|Tri-Ply|Enameled|Professional|"
             "Everyday", "searing|baking|family dinners|weeknight cooking|holiday baking"),
    _profile("kitchen_tools", "home", 0.85, 0.45, "Black Metallic Red Blue Gray Green White", "Set: Single|"
             "2-Piece|3-Piece|5-Piece|12-Piece", "{v}", "Stainless Steel|Silicone|Bamboo|BPA-Free Plastic|"
             "Porcelain|Glass|High-Carbon Steel", "Dishwasher safe|Heat resistant|Ergonomic handle|"
             "Stackable|Non-slip base|Full tang construction|Lead-free", "Heavy-Duty|Ergonomic|Professional|"
             "Classic|Modern|Stackable", "home cooks|everyday meals|entertaining|gifting|holiday dinners"),
    _profile("bedding", "home", 0.85, 0.9, _HOME, "Size: Twin|Twin XL|Full|Queen|King|California King",
             "{v} size", "100% Cotton|Microfiber|Egyptian Cotton|Bamboo Viscose|Linen|Down Alternative|"
             "Flannel", "Machine washable|Hypoallergenic|Deep pockets fit mattresses up to 16 inches|"
             "Breathable and cooling|Wrinkle resistant|All-season warmth|OEKO-TEX certified", "Soft|Luxury|"
             "Lightweight|Cooling|Cozy|Breathable|Quilted", "all seasons|hot sleepers|guest rooms|kids "
             "rooms|a restful night"),
    _profile("bath", "home", 0.8, 0.85, _HOME, "Set: Single|2-Piece|4-Piece|6-Piece|8-Piece", "{v}",
             "100% Cotton|Turkish Cotton|Microfiber|Bamboo|Polyester|Stainless Steel", "Highly absorbent|"
             "Quick dry|Machine washable|Rust-proof|Non-slip backing|Fade resistant", "Plush|Quick-Dry|"
             "Luxury|Soft|Absorbent|Hotel-Quality", "daily use|guest bathrooms|the gym|the beach|spa days"),
    _profile("furniture", "home", 0.85, 0.7, "Brown Black White Gray Blue Green", "Size: Small|Medium|Large|"
             "Oversized", "{v}", "Solid Wood|Engineered Wood|Metal|Velvet|Faux Leather|Linen Fabric|Rattan",
             "Easy assembly|Sturdy frame|Scratch-resistant finish|Storage shelf|Adjustable height|Padded "
             "seat", "Modern|Rustic|Mid-Century|Industrial|Farmhouse|Minimalist", "living rooms|small "
             "apartments|home offices|bedrooms|dorm rooms"),
    _profile("decor", "home", 0.7, 0.85, _HOME, "Size: Small|Medium|Large|Set of 2|Set of 4", "{v}",
             "Polyester|Cotton|Glass|Ceramic|Metal|Wood|Soy Wax|Jute", "Fade resistant|Easy to hang|Machine "
             "washable|Energy-efficient LED|Long-lasting|Hand-crafted", "Modern|Boho|Farmhouse|Vintage|"
             "Elegant|Minimalist", "living rooms|bedrooms|patios|holiday decor|housewarming gifts"),
    _profile("storage", "home", 0.75, 0.6, "White Gray Black Brown Blue", "Pack: 1 Count|2 Pack|4 Pack|6 "
             "Pack", "{v}", "Plastic|Fabric|Bamboo|Steel|Wire|Canvas", "Stackable|Collapsible|Space-saving|"
             "Clear view|Reinforced handles|BPA-free", "Stackable|Foldable|Heavy-Duty|Clear|Slim",
             "closets|pantries|garages|kids rooms|small spaces"),
    _profile("computer", "model", 0.98, 0.55, _TECH, "Memory: 8GB RAM|16GB RAM|32GB RAM|64GB RAM", "{v}",
             "Aluminum Chassis|Polycarbonate|Magnesium Alloy", "Full HD display|Backlit keyboard|Fast "
             "charging|Wi-Fi 6|Fingerprint reader|Long battery life|Windows 11", "Thin|Lightweight|Powerful|"
             "Business|Gaming|Touchscreen", "work and school|gaming|students|creators|travel"),
    _profile("peripheral", "model", 0.9, 0.5, _TECH, "Connectivity: Wireless|Wired|Bluetooth|USB-C",
             "{v}", "ABS Plastic|Aluminum|Nylon|Rubberized Plastic", "Plug and play|Long battery life|"
             "Ergonomic design|Quiet keys|Adjustable DPI|Dual-band Wi-Fi|Automatic two-sided printing",
             "Ergonomic|Slim|Compact|Ultra-Fast|Quiet|Portable", "home offices|gaming|students|everyday "
             "computing|travel"),
    _profile("data_storage", "model", 0.97, 0.3, _TECH, "Capacity: 64GB|128GB|256GB|1TB|2TB|4TB", "{v}",
             "Aluminum Housing|Plastic Housing|Metal Casing", "Fast transfer speeds|Password protection|"
             "Shock resistant|USB 3.2|Backup software included|PCIe NVMe", "Portable|Ultra-Fast|Rugged|"
             "Compact|High-Speed", "backups|gaming|photographers|students|everyday storage"),
    _profile("audio", "model", 0.95, 0.75, _TECH + " Red Pink Green", "Connectivity: Wireless|Wired|"
             "Bluetooth|Noise Cancelling", "{v}", "Protein Leather|Aluminum|Silicone|ABS Plastic",
             "Active noise cancellation|30-hour battery life|Built-in microphone|Deep bass|Water resistant|"
             "Voice assistant", "Wireless|Portable|Premium|Waterproof|Lightweight|Studio", "commuting|"
             "workouts|travel|home theater|gaming"),
    _profile("tv", "model", 0.97, 0.2, "Black Gray Metallic White", "Size: 32-Inch|43-Inch|50-Inch|55-Inch|"
             "65-Inch|75-Inch", "{v}", "Aluminum|Plastic|Steel", "4K Ultra HD|HDR10|Built-in streaming apps|"
             "Voice remote|Dolby Atmos|Wall-mountable", "Smart|4K|Slim|Ultra HD|Universal", "living rooms|"
             "bedrooms|game nights|movie nights|sports fans"),
    _profile("camera", "model", 0.97, 0.3, "Black Metallic White Gray", "Kit: Body Only|with 18-55mm Lens|"
             "Bundle|Travel Kit", "{v}", "Magnesium Alloy|Aluminum|Carbon Fiber|Polycarbonate",
             "24MP sensor|4K video|Image stabilization|Weather sealed|Wi-Fi and Bluetooth|Fast autofocus",
             "Compact|Professional|Lightweight|Waterproof|Versatile", "travel|vlogging|portraits|wildlife|"
             "home security"),
    _profile("phone_accessory", "model", 0.85, 0.65, _TECH + " Pink Purple Green Red", "Compatible Model: "
             "iPhone 15|iPhone 14|Galaxy S24|Pixel 8|Universal", "{v}", "TPU|Polycarbonate|Tempered Glass|"
             "Silicone|Braided Nylon|Aluminum", "Fast charging|Drop protection|Scratch resistant|MagSafe "
             "compatible|Raised edges|Foldable design", "Slim|Rugged|Clear|Fast|Magnetic|Shockproof",
             "everyday carry|travel|car rides|work desks|outdoor adventures"),
    _profile("wearable", "model", 0.97, 0.7, _TECH + " Pink Green", "Case Size: 40mm|41mm|44mm|45mm",
             "{v}", "Aluminum|Stainless Steel|Silicone|Nylon", "Heart rate monitoring|Sleep tracking|"
             "Built-in GPS|Water resistant to 50m|7-day battery life", "Smart|Fitness|Sport|Slim|Rugged",
             "runners|everyday wear|swimmers|sleep tracking|workouts"),
    _profile("apparel", "apparel", 0.85, 0.95, _ALL, "Size: Small|Medium|Large|X-Large|XX-Large", "size {v}",
             "100% Cotton|Cotton Blend|Polyester|Merino Wool|Nylon Spandex|Fleece|Denim|Rayon",
             "Moisture-wicking|Tag-free comfort|Machine washable|Four-way stretch|Breathable fabric|Relaxed "
             "fit|Reinforced seams", "Everyday|Classic|Lightweight|Performance|Soft|Slim Fit|Relaxed Fit",
             "everyday wear|workouts|lounging|travel|the office"),
    _profile("footwear", "apparel", 0.92, 0.9, _ALL, "Size: Size 6|Size 7|Size 8|Size 9|Size 10|Size 11|"
             "Size 12", "{v}", "Mesh Upper|Leather|Suede|Rubber Sole|Knit Upper|Canvas", "Cushioned midsole|"
             "Slip-resistant outsole|Breathable mesh|Arch support|Waterproof construction|Lightweight foam",
             "Lightweight|Cushioned|Waterproof|Classic|Comfortable|Slip-On", "running|walking|everyday "
             "wear|hiking|work"),
    _profile("sports_gear", "home", 0.9, 0.6, "Black White Red Blue Orange Yellow Green", "Size: Youth|"
             "Junior|Adult|Official Size", "{v}", "Synthetic Leather|Rubber|Aluminum|Graphite|Nylon|"
             "Composite", "Durable construction|Official weight|Enhanced grip|Weather resistant|Shock "
             "absorbing", "Official|Pro|Training|Tournament|Recreational", "practice|games|backyard play|"
             "training|teams"),
    _profile("fitness", "home", 0.85, 0.7, "Black Purple Blue Pink Gray Green", "Type: Standard|Extra Thick|"
             "Heavy-Duty|Travel Size", "{v}", "TPE|Natural Rubber|Cast Iron|Neoprene|Steel|Foam", "Non-slip "
             "surface|Carrying strap included|Anti-tear|Compact storage|Adjustable resistance", "Non-Slip|"
             "Adjustable|Heavy-Duty|Eco-Friendly|Compact", "home workouts|yoga|pilates|the gym|strength "
             "training"),
    _profile("outdoor", "home", 0.88, 0.65, "Green Blue Orange Gray Black Red", "Capacity: 1-Person|"
             "2-Person|4-Person|6-Person|Family Size", "{v}", "Ripstop Nylon|Polyester|Aluminum|Steel|"
             "Insulated Foam", "Waterproof|Lightweight|Quick setup|UV protection|Compact carry bag|Insulated",
             "Lightweight|Waterproof|Portable|Rugged|Insulated", "camping|hiking|backpacking|fishing trips|"
             "the beach"),
    _profile("cookbook", "book", 0.95, 0.0, "", "Format: Paperback|Hardcover|Kindle Edition|Spiral-bound",
             "{v}", "Paperback binding|Hardcover binding|Spiral binding", "Full-color photos|Step-by-step "
             "instructions|Nutrition facts for every recipe|Shopping lists|Beginner-friendly", "Complete|"
             "Easy|Essential|Ultimate|Everyday|Healthy", "beginners|busy families|healthy eating|gifting",
             brand_title_rate=0.05),
    _profile("book", "book", 0.95, 0.0, "", "Format: Paperback|Hardcover|Kindle Edition|Audiobook",
             "{v}", "Paperback binding|Hardcover binding", "Illustrated|Step-by-step guides|Updated edition|"
             "Includes exercises|Bestselling author", "Complete|Practical|Essential|Illustrated|Beginner's",
             "beginners|students|curious readers|gifting", brand_title_rate=0.05),
    _profile("beauty", "home", 0.95, 0.4, "Pink Red Purple Brown Black Orange", "Size: 1 Fl Oz|1.7 Fl Oz|"
             "3.4 Fl Oz|8 Fl Oz|Pack of 2", "{v}", "Hyaluronic Acid|Vitamin C|Ceramides|Shea Butter|Argan "
             "Oil|Ceramic|Tourmaline", "Dermatologist tested|Fragrance-free|Cruelty-free|Long-lasting|Fast "
             "drying|Ionic technology", "Gentle|Long-Lasting|Hydrating|Professional|Lightweight|Daily",
             "sensitive skin|daily routines|travel|salon results|gifting"),
    _profile("toy", "home", 0.92, 0.5, "Red Blue Yellow Green Pink Purple Multicolor", "Age: Ages 3+|Ages "
             "5+|Ages 8+|Ages 12+", "for {v}", "ABS Plastic|Wood|Plush Fabric|Cardboard|Foam",
             "STEM learning|Non-toxic materials|Batteries included|Easy to clean|Storage box included",
             "Creative|Educational|Classic|Interactive|Colorful", "birthday gifts|family game night|"
             "toddlers|classrooms|travel"),
    _profile("pet", "home", 0.85, 0.55, "Black Brown Gray Blue Pink Red Green", "Size: Small|Medium|Large|"
             "X-Large", "{v}", "Orthopedic Foam|Nylon|Natural Rubber|Real Chicken|Plush Fabric|Steel",
             "Machine washable cover|Chew resistant|No artificial preservatives|Reflective stitching|Easy "
             "to clean", "Durable|Orthopedic|Natural|Reflective|Washable", "dogs|cats|puppies|senior pets|"
             "travel"),
    _profile("office", "home", 0.9, 0.45, "Black Blue Red Multicolor Yellow Pink", "Pack: Single|Pack of 12|"
             "Pack of 24|Pack of 50", "{v}", "Plastic|Paper|Metal|Recycled Paper|Ink", "Quick drying ink|"
             "Acid-free paper|Smudge proof|Jam-free|Refillable", "Smooth|Bold|Fine Point|Heavy-Duty|Recycled",
             "offices|classrooms|home offices|students|journaling"),
    _profile("tools", "model", 0.95, 0.4, "Yellow Red Black Blue Orange Green", "Voltage: 12V|18V|20V MAX|"
             "Corded", "{v}", "Steel|Chrome Vanadium|Aluminum|Fiberglass|Rubber Grip", "Brushless motor|LED "
             "work light|Battery and charger included|Variable speed trigger|Lifetime warranty", "Cordless|"
             "Compact|Heavy-Duty|Professional|Brushless", "DIY projects|contractors|home repairs|"
             "woodworking|garages"),
    _profile("lighting", "model", 0.85, 0.4, "White Black Metallic Brown", "Pack: 1 Count|2 Pack|4 Pack|12 "
             "Pack", "{v}", "Aluminum|Glass|Plastic|Steel", "Energy-efficient LED|Dimmable|Remote control|"
             "Long lasting|Warm white light", "Dimmable|Bright|Energy-Saving|Modern|Rechargeable",
             "living rooms|bedrooms|emergencies|garages|patios"),
)}
