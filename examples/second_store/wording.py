"""How the second store writes: titles, HTML bodies and tags per language, and how its shoppers search.

Kept apart from `vocabulary.py` (what is sold) because these are the parts a reviewer reads for tone: a
Swiss shop writes "Velo" and "Grösse" where a German one writes "Fahrrad" and "Größe", uses Swiss number
formats (1'240 g) and guillemets, and its shoppers type German-German words, French and English.
"""

from __future__ import annotations

# Gender code -> word in a title, per language; "u" (unisex) is mostly left out of titles.
GENDER_TITLE: dict[str, dict[str, str]] = {
    "de": {"m": "Herren", "w": "Damen", "k": "Kinder", "u": "Unisex"},
    "fr": {"m": "homme", "w": "femme", "k": "enfant", "u": "mixte"},
    "en": {"m": "Men's", "w": "Women's", "k": "Kids'", "u": "Unisex"},
}
# How shoppers name a gender in a query (several ways, some never in a title: "männer", "frauen").
GENDER_QUERY: dict[str, dict[str, tuple[str, ...]]] = {
    "de": {"m": ("herren", "herren", "männer"), "w": ("damen", "damen", "frauen"), "k": ("kinder", "kids")},
    "fr": {"m": ("homme", "hommes"), "w": ("femme", "femmes"), "k": ("enfant", "junior")},
    "en": {"m": ("mens", "men's", "men"), "w": ("womens", "women's", "ladies"), "k": ("kids", "junior")},
}
GOOGLE_GENDER: dict[str, str] = {"m": "male", "w": "female", "k": "unisex", "u": "unisex"}

# Shopify option names as the listing's language writes them.
OPTION_NAMES: dict[str, tuple[str, str]] = {
    "de": ("Farbe", "Grösse"),
    "fr": ("Couleur", "Taille"),
    "en": ("Colour", "Size"),
}

# Title patterns. Fields: brand, line, noun (singular), gender (may be empty), size (may be empty).
TITLE_PATTERNS: dict[str, tuple[str, ...]] = {
    "de": (
        "{brand} {line} {noun} {gender} {size}",
        "{noun} {brand} {line} {gender} {size}",
        "{gender} {noun} {line} {size} von {brand}",
        "{brand} {gender}-{noun} {line} {size}",
    ),
    "fr": (
        "{noun} {line} {gender} {size} {brand}",
        "{brand} {line} – {noun} {gender} {size}",
        "{noun} {brand} {line} {size} {gender}",
    ),
    "en": (
        "{brand} {line} {gender} {noun} {size}",
        "{line} {noun} {size} by {brand} {gender}",
        "{brand} {gender} {line} {noun} {size}",
    ),
}
COLOUR_SUFFIX: dict[str, str] = {"de": " – {colour}", "fr": " - {colour}", "en": ", {colour}"}
# Ways a re-listed (duplicate) product's title differs from the first listing's.
RELIST_MARKS: dict[str, tuple[str, ...]] = {
    "de": ("NEU: {title}", "{title} (Modell 2024/25)", "{title} – Auslaufmodell", "{title} | Sale"),
    "fr": ("NOUVEAU : {title}", "{title} (modèle 2024/25)", "{title} – fin de série", "{title} | Soldes"),
    "en": ("NEW: {title}", "{title} (2024/25 model)", "{title} - last season", "{title} | Sale"),
}

# Department -> per-language phrases of use ("for ..."), joined to a type noun in bodies.
USES: dict[str, dict[str, tuple[str, ...]]] = {
    "Wintersport": {
        "de": ("für lange Tage im Schnee", "für Pisten und Tiefschnee", "für kalte Morgen am Lift"),
        "fr": ("pour de longues journées sur la neige", "pour la piste et la poudreuse", "pour le froid"),
        "en": ("for long days in the snow", "for groomers and powder", "for cold mornings on the lift"),
    },
    "Bergsport": {
        "de": ("für Touren in Fels und Eis", "für lange Wandertage", "für Hütte und Gipfel"),
        "fr": ("pour les courses en montagne", "pour les longues randonnées", "de la cabane au sommet"),
        "en": ("for rock and ice", "for long days on the trail", "from hut to summit"),
    },
    "Radsport": {
        "de": ("für Pässe und Singletrails", "für den Arbeitsweg und die Ausfahrt", "für lange Velotouren"),
        "fr": (
            "pour les cols et les singles",
            "pour le trajet quotidien et la sortie",
            "pour les longues sorties",
        ),
        "en": (
            "for mountain passes and singletrack",
            "for the commute and the weekend ride",
            "for long rides",
        ),
    },
    "Laufsport": {
        "de": ("für Training und Wettkampf", "für schnelle Kilometer", "für Trails und Strasse"),
        "fr": ("pour l'entraînement et la compétition", "pour les kilomètres rapides", "pour route et trail"),
        "en": ("for training and racing", "for fast miles", "for road and trail"),
    },
    "Wassersport": {
        "de": ("für See und Schwimmbad", "für Sommertage am Wasser", "für kühles Wasser"),
        "fr": ("pour le lac et la piscine", "pour l'été au bord de l'eau", "pour l'eau fraîche"),
        "en": ("for lake and pool", "for summer days on the water", "for cool water"),
    },
    "Fitness": {
        "de": ("für das Training zu Hause", "für Kraft und Beweglichkeit", "für die Erholung nach dem Sport"),
        "fr": ("pour l'entraînement à la maison", "pour la force et la mobilité", "pour la récupération"),
        "en": ("for training at home", "for strength and mobility", "for recovery after sport"),
    },
}

# HTML body pieces. {strong} is "<strong>brand line</strong>"; {noun}; {use}; {gender_note}.
INTROS: dict[str, tuple[str, ...]] = {
    "de": (
        "<p>{strong} &ndash; {noun} {use}.</p>",
        "<p>Mit dem Modell {strong} bekommst du {noun_article} {use}.</p>",
        "<p>{noun} {use}: {strong} überzeugt auch anspruchsvolle Kundinnen und Kunden.</p>",
    ),
    "fr": (
        "<p>{strong} &ndash; {noun} {use}.</p>",
        "<p>Le modèle {strong} est {noun_article} pensé {use}.</p>",
        "<p>{noun} {use} : {strong} convainc même les plus exigeants.</p>",
    ),
    "en": (
        "<p>{strong} &ndash; {noun} {use}.</p>",
        "<p>The {strong} is {noun_article} built {use}.</p>",
        "<p>{noun} {use}: the {strong} keeps up with demanding riders, runners and climbers.</p>",
    ),
}
ARTICLES: dict[str, str] = {"de": "einen vielseitigen Begleiter", "fr": "un produit", "en": "a"}
SPEC_LABELS: dict[str, dict[str, str]] = {
    "de": {"weight": "Gewicht", "size": "Grösse", "colour": "Farbe", "gender": "Für"},
    "fr": {"weight": "Poids", "size": "Taille", "colour": "Couleur", "gender": "Pour"},
    "en": {"weight": "Weight", "size": "Size", "colour": "Colour", "gender": "For"},
}
BOILERPLATE: dict[str, tuple[str, ...]] = {
    "de": (
        "<p>Versand ab unserem Lager in Chur innert 1&ndash;2 Werktagen.</p>",
        "<p><em>Gratis Rückversand in der ganzen Schweiz.</em></p>",
        "",
    ),
    "fr": (
        "<p>Expédition depuis notre entrepôt de Coire en 1 à 2 jours ouvrables.</p>",
        "<p><em>Retour gratuit dans toute la Suisse.</em></p>",
        "",
    ),
    "en": (
        "<p>Ships from our warehouse in Chur within 1&ndash;2 working days.</p>",
        "<p><em>Free returns anywhere in Switzerland.</em></p>",
        "",
    ),
}
DEPARTMENT_TAGS: dict[str, str] = {
    "Wintersport": "winter",
    "Bergsport": "berg",
    "Radsport": "velo",
    "Laufsport": "running",
    "Wassersport": "wasser",
    "Fitness": "fitness",
}

# Leaf -> how shoppers ask for it without the shop's word: (language, phrase). Swiss "Velo" is
# "Fahrrad" in Germany; "ski de fond" is what the French say for cross-country.
NEEDS: dict[str, tuple[tuple[str, str], ...]] = {
    "Pistenski": (
        ("de", "ski für präparierte pisten"),
        ("en", "skis for groomed runs"),
        ("fr", "ski piste damée"),
    ),
    "Freeride-Ski": (("de", "ski für tiefschnee"), ("en", "powder skis"), ("fr", "ski poudreuse")),
    "Skischuhe": (("de", "schuhe zum skifahren"), ("en", "boots for downhill skiing")),
    "Skistöcke": (("de", "stöcke zum skifahren"), ("fr", "batons ski")),
    "Skitaschen": (("de", "tasche für skis"), ("en", "bag to carry skis")),
    "Skihelme": (("de", "helm zum skifahren"), ("en", "helmet for skiing"), ("fr", "casque pour skier")),
    "Rückenprotektoren": (("de", "rückenschutz ski"), ("en", "spine protection for skiing")),
    "Skibrillen": (("de", "schneebrille"), ("en", "snow goggles"), ("fr", "lunettes de ski")),
    "Wechselscheiben": (("de", "ersatzglas skibrille"), ("en", "spare lens for goggles")),
    "Tourenski": (("de", "ski für skitouren"), ("en", "backcountry skis"), ("fr", "ski de rando")),
    "Tourenbindungen": (("de", "pin bindung"), ("en", "tech binding")),
    "Steigfelle": (("de", "felle für tourenski"), ("en", "skins for ski touring")),
    "LVS-Geräte": (
        ("de", "lawinenverschüttetensuchgerät"),
        ("en", "avalanche beacon"),
        ("fr", "détecteur avalanche"),
    ),
    "Lawinenschaufeln": (("de", "schaufel für skitouren"), ("en", "snow shovel backcountry")),
    "Lawinensonden": (("de", "sonde lawine"), ("en", "probe for avalanche rescue")),
    "Snowboards": (("de", "brett zum snowboarden"), ("fr", "planche de snowboard")),
    "Snowboardboots": (("de", "snowboard schuhe"), ("fr", "chaussures snowboard")),
    "Skating-Ski": (("de", "langlaufski skating"), ("fr", "ski de fond skating")),
    "Klassikski": (
        ("de", "langlaufski klassisch"),
        ("fr", "ski de fond classique"),
        ("en", "cross country skis"),
    ),
    "Langlaufschuhe": (("de", "schuhe für langlauf"), ("fr", "chaussures ski de fond")),
    "Skijacken": (("de", "winterjacke zum skifahren"), ("en", "snow jacket"), ("fr", "blouson de ski")),
    "Skihosen": (("de", "schneehose"), ("en", "snow pants"), ("fr", "pantalon neige")),
    "Skihandschuhe": (("de", "warme handschuhe für den schnee"), ("en", "winter gloves for skiing")),
    "Skisocken": (("de", "warme socken für skischuhe"), ("en", "socks for ski boots")),
    "Skiwachs": (("de", "wachs für ski"), ("en", "wax for skis")),
    "Schneeschuhe": (("de", "schneeschuhwandern"), ("en", "snow shoes")),
    "Kletterseile": (("de", "seil zum klettern"), ("en", "rope for climbing"), ("fr", "corde escalade")),
    "Sicherungsgeräte": (("de", "sicherungsgerät klettern halle"), ("en", "belay device for the gym")),
    "Expressschlingen": (("de", "exen"), ("en", "quick draws")),
    "Klettergurte": (
        ("de", "gurt zum klettern"),
        ("en", "harness for climbing"),
        ("fr", "baudrier escalade"),
    ),
    "Kletterschuhe": (("de", "schuhe zum klettern"), ("en", "rock shoes"), ("fr", "chaussons escalade")),
    "Kletterhelme": (("de", "helm klettern"), ("en", "helmet for climbing")),
    "Chalkbags": (("de", "magnesiabeutel"), ("fr", "sac a magnesie")),
    "Crashpads": (("de", "bouldermatte"), ("en", "bouldering mat")),
    "Steigeisen": (("de", "eisen für gletscher"), ("en", "crampons for glacier travel")),
    "Wanderschuhe": (("de", "trekkingschuhe"), ("en", "hiking boots"), ("fr", "chaussures de rando")),
    "Bergschuhe": (("de", "hochtourenschuhe"), ("en", "alpine boots")),
    "Wanderstöcke": (("de", "trekkingstöcke"), ("en", "hiking poles"), ("fr", "batons de marche")),
    "Tourenrucksäcke": (("de", "wanderrucksack gross"), ("en", "hiking backpack")),
    "Tagesrucksäcke": (
        ("de", "kleiner wanderrucksack"),
        ("en", "day pack for hiking"),
        ("fr", "petit sac à dos"),
    ),
    "Softshelljacken": (("de", "winddichte jacke zum wandern"), ("fr", "veste coupe vent rando")),
    "Fleecejacken": (("de", "fleece pullover"), ("en", "fleece")),
    "Daunenjacken": (("de", "daunen jacke warm"), ("en", "puffer jacket"), ("fr", "veste en duvet")),
    "Trekkinghosen": (("de", "wanderhose"), ("en", "hiking pants"), ("fr", "pantalon rando")),
    "Funktionsshirts": (
        ("de", "funktionsunterwäsche oberteil"),
        ("en", "thermal top"),
        ("fr", "sous-vêtement technique"),
    ),
    "Stirnlampen": (("de", "kopflampe"), ("en", "head torch"), ("fr", "lampe frontale rechargeable")),
    "Hardtails": (("de", "mountainbike ohne hinterbaufederung"), ("en", "hardtail mtb")),
    "Fullys": (("de", "vollgefedertes mountainbike"), ("en", "full suspension mtb")),
    "Rennvelos": (("de", "rennrad"), ("en", "racing bike"), ("fr", "velo de course")),
    "Gravelbikes": (("de", "gravel fahrrad"), ("en", "gravel bicycle")),
    "E-Mountainbikes": (("de", "e-mtb"), ("en", "emtb"), ("fr", "vtt assistance électrique")),
    "Ketten": (("de", "fahrradkette"), ("en", "bike chain")),
    "Kassetten": (("de", "ritzelpaket"), ("en", "sprocket cassette")),
    "Bremsbeläge": (("de", "scheibenbremsbeläge fahrrad"), ("en", "disc brake pads")),
    "Reifen": (("de", "fahrradreifen"), ("en", "bike tire"), ("fr", "pneu vélo")),
    "Schläuche": (("de", "fahrradschlauch"), ("en", "bike tube")),
    "Pedale": (("de", "klickpedale fahrrad"), ("en", "bike pedals")),
    "Sättel": (("de", "fahrradsattel"), ("en", "bike seat"), ("fr", "selle vélo")),
    "Velolampen": (("de", "fahrradlicht"), ("en", "bicycle lights"), ("fr", "lampe vélo")),
    "Veloschlösser": (("de", "fahrradschloss"), ("en", "bicycle lock")),
    "Minitools": (("de", "fahrrad werkzeug"), ("en", "bike tool")),
    "Standpumpen": (("de", "fahrradpumpe"), ("en", "track pump")),
    "Velocomputer": (("de", "fahrradcomputer"), ("en", "cycling computer"), ("fr", "gps vélo")),
    "Velohelme": (("de", "fahrradhelm"), ("en", "cycling helmet"), ("fr", "casque velo")),
    "Trikots": (("de", "radtrikot"), ("en", "cycling jersey")),
    "Trägerhosen": (("de", "radhose"), ("en", "cycling shorts"), ("fr", "cuissard")),
    "Veloschuhe": (("de", "radschuhe"), ("en", "bike shoes")),
    "Velohandschuhe": (("de", "fahrradhandschuhe"), ("en", "bike gloves")),
    "Strassenlaufschuhe": (
        ("de", "joggingschuhe"),
        ("en", "running shoes for the road"),
        ("fr", "basket running"),
    ),
    "Trailrunningschuhe": (("de", "laufschuhe gelände"), ("en", "trail shoes")),
    "Laufshirts": (("de", "sportshirt joggen"), ("en", "running top")),
    "Laufjacken": (("de", "jacke zum joggen"), ("en", "jacket for running")),
    "Lauftights": (("de", "lange laufhose"), ("en", "running leggings"), ("fr", "legging running")),
    "Laufshorts": (("de", "kurze laufhose"), ("en", "shorts for running")),
    "Laufwesten": (("de", "trinkrucksack laufen"), ("en", "hydration vest"), ("fr", "sac trail")),
    "GPS-Laufuhren": (("de", "sportuhr"), ("en", "running watch"), ("fr", "montre cardio")),
    "Pulsgurte": (("de", "herzfrequenz brustgurt"), ("en", "heart rate monitor")),
    "Energiegels": (("de", "gel für den marathon"), ("en", "gels for marathon")),
    "Energieriegel": (("de", "riegel für unterwegs"), ("en", "snack bar for cycling")),
    "Elektrolytpulver": (("de", "isotonisches getränk"), ("en", "hydration drink mix")),
    "Badeanzüge": (("de", "badeanzug sport"), ("en", "swimming costume"), ("fr", "maillot de bain femme")),
    "Badehosen": (("de", "schwimmhose"), ("en", "swim shorts")),
    "Schwimmbrillen": (("de", "brille zum schwimmen"), ("en", "goggles for swimming")),
    "Badekappen": (("de", "schwimmkappe"), ("en", "swimming hat")),
    "Schwimmflossen": (("de", "flossen schwimmtraining"), ("en", "fins for swimming")),
    "SUP-Boards": (("de", "stand up paddle"), ("en", "paddle board"), ("fr", "paddle gonflable")),
    "Schwimmwesten": (("de", "rettungsweste"), ("en", "life jacket")),
    "Neoprenanzüge": (("de", "neoprenanzug triathlon"), ("en", "wet suit"), ("fr", "combi neoprene")),
    "Kurzhanteln": (("de", "hanteln"), ("en", "hand weights"), ("fr", "haltères")),
    "Kettlebells": (("de", "kugelhantel"), ("en", "kettle bell")),
    "Widerstandsbänder": (("de", "fitnessband"), ("en", "exercise bands"), ("fr", "élastique fitness")),
    "Yogamatten": (("de", "matte für yoga"), ("en", "exercise mat"), ("fr", "tapis yoga")),
    "Springseile": (("de", "seilspringen"), ("en", "skipping rope")),
    "Faszienrollen": (("de", "massagerolle"), ("en", "roller for sore muscles"), ("fr", "rouleau fascia")),
    "Massagepistolen": (("de", "massagegerät muskeln"), ("en", "percussion massager")),
}

# Query patterns per language. {noun} is a plural (or singular) the shop uses; {gender}/{size}/{feature}/
# {colour}/{brand}/{line} the shopper's words; {need} a phrase of NEEDS.
QUERY_PATTERNS: dict[str, dict[str, tuple[str, ...]]] = {
    "de": {
        "brand": ("{brand} {noun}", "{noun} {brand}", "{brand} {noun} {gender}"),
        "feature": ("{noun} {feature}", "{feature} {noun} {gender}", "{noun} {gender} {feature}"),
        "size": ("{noun} {size}", "{noun} {gender} {size}"),
        "gender": ("{noun} {gender}", "{gender} {noun}"),
        "need": ("{need}", "{need} {gender}", "{need} {feature}", "{need} {colour}"),
        "model": ("{brand} {line}", "{line} {noun}", "{brand} {line} {noun}"),
        "colour": ("{noun} {colour}", "{noun} {gender} {colour}", "{colour} {noun} {brand}"),
    },
    "fr": {
        "brand": ("{noun} {brand}", "{brand} {noun}", "{noun} {brand} {gender}"),
        "feature": ("{noun} {feature}", "{noun} {gender} {feature}"),
        "size": ("{noun} {size}", "{noun} {gender} {size}"),
        "gender": ("{noun} {gender}", "{noun} pour {gender}"),
        "need": ("{need}", "{need} {gender}", "{need} {feature}", "{need} {colour}"),
        "model": ("{brand} {line}", "{noun} {line}", "{noun} {brand} {line}"),
        "colour": ("{noun} {colour}", "{noun} {gender} {colour}", "{noun} {brand} {colour}"),
    },
    "en": {
        "brand": ("{brand} {noun}", "{gender} {brand} {noun}", "{noun} by {brand}"),
        "feature": ("{feature} {noun}", "{gender} {feature} {noun}", "{noun} {feature}"),
        "size": ("{noun} {size}", "{gender} {noun} {size}"),
        "gender": ("{gender} {noun}", "{noun} for {gender}"),
        "need": ("{need}", "{gender} {need}", "{feature} {need}", "{colour} {need}"),
        "model": ("{brand} {line}", "{line} {noun}", "{brand} {line} {noun}"),
        "colour": ("{colour} {noun}", "{colour} {gender} {noun}", "{colour} {brand} {noun}"),
    },
}
