"""Aspect vocabularies: colors grouped into families of related shades, and brands tied to domains.

Colors come in families so that relevance can tell "a different shade" from "a different
color": madral-kdd22 Table 9 finds Light Pink, Hot Pink and Rose nearest to Pink. Brands
belong to domains (kitchen appliances, printers, apparel ...), so a brand is sold in some
categories and not others; a few brands (Amazon Basics, Samsung, HP, Nike, Cuisinart ...)
appear in several domains and so span departments, as real ones do (Table 9: HP ~ Dell,
Intel, Canon, Brother).
"""

from __future__ import annotations

# Family name -> shades; the family name is itself a color value. 65 values in 13 families.
COLOR_FAMILIES: dict[str, tuple[str, ...]] = {
    "Black": ("Black", "Jet Black", "Matte Black", "Charcoal"),
    "White": ("White", "Off White", "Ivory", "Cream"),
    "Gray": ("Gray", "Light Gray", "Dark Gray", "Heather Gray", "Slate"),
    "Metallic": ("Silver", "Stainless Steel", "Gold", "Rose Gold", "Copper", "Chrome"),
    "Red": ("Red", "Dark Red", "Burgundy", "Wine", "Crimson"),
    "Pink": ("Pink", "Light Pink", "Hot Pink", "Rose", "Blush", "Fuchsia"),
    "Orange": ("Orange", "Coral", "Peach", "Burnt Orange"),
    "Yellow": ("Yellow", "Mustard", "Lemon", "Mustard Yellow"),
    "Green": ("Green", "Dark Green", "Olive", "Mint", "Sage", "Lime Green", "Forest Green"),
    "Blue": ("Blue", "Navy Blue", "Sky Blue", "Royal Blue", "Light Blue", "Teal", "Turquoise"),
    "Purple": ("Purple", "Lavender", "Lilac", "Plum", "Violet"),
    "Brown": ("Brown", "Tan", "Beige", "Khaki", "Chocolate", "Camel", "Taupe"),
    "Multicolor": ("Multicolor", "Rainbow"),
}

COLOR_FAMILY: dict[str, str] = {
    shade: family for family, shades in COLOR_FAMILIES.items() for shade in shades
}
ALL_COLORS: tuple[str, ...] = tuple(COLOR_FAMILY)

# Brand domain -> brands, most popular first (popularity decays with the position).
BRAND_DOMAINS: dict[str, tuple[str, ...]] = {
    "kitchen_appliances": (
        "Cuisinart", "Hamilton Beach", "Ninja", "Breville", "KitchenAid", "Oster", "Black+Decker",
        "Instant Pot", "Vitamix", "De'Longhi", "Keurig", "Philips", "Smeg", "Amazon Basics",
    ),
    "cookware": (
        "T-fal", "Calphalon", "Lodge", "Cuisinart", "All-Clad", "Le Creuset", "Rachael Ray", "OXO",
        "Pyrex", "Nordic Ware", "KitchenAid", "Amazon Basics",
    ),
    "kitchen_tools": (
        "OXO", "KitchenAid", "Cuisinart", "Joseph Joseph", "Zyliss", "Farberware", "Amazon Basics",
    ),
    "cutlery": (
        "Henckels", "Wusthof", "Victorinox", "Cuisinart", "Mercer Culinary", "Chicago Cutlery", "Global",
    ),
    "dinnerware": ("Corelle", "Pfaltzgraff", "Libbey", "Lenox", "Gibson", "Mikasa", "Amazon Basics"),
    "drinkware": (
        "Stanley", "YETI", "Hydro Flask", "Contigo", "Owala", "Thermos", "CamelBak", "Simple Modern",
    ),
    "bedding": (
        "Utopia Bedding", "Bedsure", "Mellanni", "Amazon Basics", "Brooklinen", "Pinzon", "Casper",
        "Nautica", "Tommy Hilfiger", "Ralph Lauren", "Linenspa",
    ),
    "bath": ("Utopia Towels", "Amazon Basics", "Chakir", "mDesign", "Nautica", "Pinzon", "Tommy Hilfiger"),
    "furniture": (
        "Zinus", "Sauder", "Walker Edison", "Nathan James", "Ashley", "Amazon Basics", "Christopher Knight",
    ),
    "decor": (
        "nuLOOM", "Safavieh", "Umbra", "Amazon Basics", "Better Homes & Gardens", "Yankee Candle",
        "Mainstays",
    ),
    "storage": ("Amazon Basics", "Sterilite", "mDesign", "Rubbermaid", "Honey-Can-Do", "SimpleHouseware"),
    "floor_care": ("Shark", "Bissell", "Dyson", "Hoover", "iRobot", "Eureka", "Black+Decker"),
    "air_quality": ("Honeywell", "Levoit", "Dyson", "Vornado", "Lasko", "Dreo", "Philips"),
    "computers": ("HP", "Dell", "Lenovo", "Apple", "ASUS", "Acer", "Microsoft", "MSI", "Samsung"),
    "computer_accessories": (
        "Logitech", "HP", "Dell", "Microsoft", "Amazon Basics", "Anker", "Razer", "Corsair", "Apple",
    ),
    "displays": ("Samsung", "LG", "Dell", "ASUS", "Acer", "HP", "BenQ", "ViewSonic"),
    "printers": ("HP", "Canon", "Brother", "Epson", "Xerox"),
    "storage_networking": (
        "SanDisk", "Western Digital", "Seagate", "Samsung", "TP-Link", "Netgear", "Kingston", "Intel",
    ),
    "components": ("Intel", "AMD", "ASUS", "MSI", "Corsair", "Gigabyte", "Crucial", "EVGA"),
    "audio": (
        "Sony", "Bose", "JBL", "Apple", "Beats", "Sennheiser", "Anker", "Samsung", "Skullcandy", "Philips",
    ),
    "tv_video": ("Samsung", "LG", "Sony", "TCL", "Hisense", "Vizio", "Roku", "Amazon Basics"),
    "camera": ("Canon", "Nikon", "Sony", "Fujifilm", "GoPro", "Panasonic", "Manfrotto"),
    "phone_accessories": (
        "Anker", "OtterBox", "Spigen", "Belkin", "Apple", "Samsung", "ESR", "Amazon Basics",
    ),
    "wearables": ("Apple", "Samsung", "Garmin", "Fitbit", "Amazfit", "Google"),
    "gaming": ("Sony", "Microsoft", "Nintendo", "Logitech", "Razer", "Turtle Beach", "PowerA"),
    "apparel": (
        "Amazon Essentials", "Hanes", "Nike", "Adidas", "Under Armour", "Champion", "Gildan", "Levi's",
        "Columbia", "The North Face", "Calvin Klein", "Tommy Hilfiger", "Carhartt", "Puma",
        "Fruit of the Loom", "Ralph Lauren", "Nautica",
    ),
    "footwear": (
        "Nike", "Adidas", "Skechers", "New Balance", "Brooks", "ASICS", "Converse", "Vans", "Reebok",
        "Clarks", "Crocs", "UGG", "Timberland",
    ),
    "team_sports": (
        "Wilson", "Spalding", "Franklin Sports", "Nike", "Adidas", "Rawlings", "Easton", "Molten",
    ),
    "racket_sports": ("Wilson", "Head", "Babolat", "Yonex", "Franklin Sports", "Selkirk"),
    "golf": ("Callaway", "Titleist", "TaylorMade", "Wilson", "Ping", "Cobra"),
    "fitness": (
        "Amazon Basics", "Gaiam", "Bowflex", "CAP Barbell", "Manduka", "BalanceFrom", "Nike", "Reebok",
    ),
    "outdoor": (
        "Coleman", "YETI", "The North Face", "Osprey", "Columbia", "CamelBak", "Black Diamond", "Kelty",
    ),
    "cycling": ("Schwinn", "Giro", "Bell", "Kryptonite", "Cannondale", "Huffy"),
    "water_sports": ("Intex", "Pelican", "O'Neill", "Stearns", "Body Glove"),
    "fishing": ("Shimano", "Penn", "Ugly Stik", "Berkley", "Rapala", "Plano"),
    "publishers": (
        "Independently Published", "Penguin Random House", "HarperCollins", "Simon & Schuster",
        "Rockridge Press", "Callisto", "Wiley", "O'Reilly Media", "No Starch Press", "DK",
        "America's Test Kitchen", "Simple Steps Press",
    ),
    "beauty": (
        "L'Oreal", "Maybelline", "Neutrogena", "CeraVe", "Olay", "Revlon", "e.l.f.", "NYX", "Clinique",
    ),
    "hair_tools": ("Conair", "Revlon", "Remington", "Dyson", "BaBylissPRO", "CHI", "Philips"),
    "grooming": ("Philips", "Braun", "Gillette", "Remington", "Panasonic", "Wahl"),
    "oral_care": ("Oral-B", "Philips", "Waterpik", "Colgate", "Crest"),
    "toys": (
        "LEGO", "Mattel", "Hasbro", "Fisher-Price", "Melissa & Doug", "Hot Wheels", "Nerf", "Crayola",
        "Play-Doh",
    ),
    "pet": ("Amazon Basics", "KONG", "Purina", "Blue Buffalo", "Frisco", "Petmate", "Nylabone", "Chuckit!"),
    "office": (
        "Amazon Basics", "Post-it", "Sharpie", "BIC", "Pilot", "Five Star", "Avery", "Swingline", "Scotch",
    ),
    "office_electronics": ("Brother", "HP", "Casio", "Texas Instruments", "Fellowes", "Amazon Basics"),
    "tools": ("DeWalt", "Black+Decker", "Milwaukee", "Makita", "Bosch", "Ryobi", "Craftsman", "Stanley"),
    "lighting": ("Philips", "GE", "Hunter", "Amazon Basics", "Sylvania", "Energizer"),
}

ALL_BRANDS: tuple[str, ...] = tuple(
    sorted({brand for brands in BRAND_DOMAINS.values() for brand in brands})
)
