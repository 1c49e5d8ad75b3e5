"""Hand-written category tables: groups of leaf categories with their listing kind and brands.

Each group is ``(path, profile, brand domain, leaves)``. ``path`` names the levels above the
leaves ("Home & Kitchen > Kitchen Appliances" gives 3-level leaves, one more "> ..." gives
4-level ones). ``leaves`` is a compact list, entries separated by ";":

    Name (Title Noun): query synonym, query synonym

"(Title Noun)" is only written when the singular is irregular ("Mice (Mouse)"); otherwise it
is the singular of the first part of the name. Apparel and sports leaves are generated from
smaller tables in `taxonomy.py`.
"""

from __future__ import annotations

HAND_WRITTEN: tuple[tuple[str, str, str, str], ...] = (
    ("Home & Kitchen > Kitchen Appliances", "appliance", "kitchen_appliances",
     "Juicers: juice extractor, juicing machine; Blenders: smoothie blender; Toasters: bread toaster;"
     "Coffee Makers: coffee machine, drip coffee maker; Espresso Machines: espresso maker, cappuccino "
     "machine;"
     "Air Fryers: airfryer; Slow Cookers: crock pot, crockpot; Pressure Cookers: multi cooker;"
     "Stand Mixers: kitchen mixer; Hand Mixers: electric hand mixer; Food Processors: food chopper;"
     "Electric Kettles: water boiler; Rice Cookers: rice steamer; Bread Machines: bread maker;"
     "Waffle Makers: waffle iron; Toaster Ovens: countertop oven; Microwave Ovens: microwave;"
     "Ice Cream Makers: frozen yogurt maker; Coffee Grinders: burr grinder; Sandwich Makers: panini press;"
     "Electric Griddles: pancake griddle; Food Dehydrators: dehydrator; Immersion Blenders: stick blender"),
    ("Home & Kitchen > Small Appliance Parts & Accessories", "appliance_part", "kitchen_appliances",
     "Juicer Parts & Accessories (Juicer Replacement Part): juicer parts, juicer filter;"
     "Blender Replacement Parts (Blender Replacement Jar): blender jar, blender blade;"
     "Coffee Filters: paper coffee filters; Air Fryer Liners: air fryer paper;"
     "Mixer Attachments: pasta roller attachment; Espresso Machine Accessories (Espresso Tamper): milk "
     "frothing pitcher"),
    ("Home & Kitchen > Cookware", "cookware", "cookware",
     "Frying Pans: skillet, fry pan; Saucepans: sauce pan; Dutch Ovens: casserole pot; Stock Pots: soup pot;"
     "Woks & Stir-Fry Pans: stir fry pan; Cookware Sets: pots and pans set; Grill Pans: griddle pan;"
     "Saute Pans: deep skillet; Roasting Pans: roaster pan; Pressure Canners: canning pot"),
    ("Home & Kitchen > Bakeware", "cookware", "cookware",
     "Baking Sheets: cookie sheet, sheet pan; Cake Pans: round cake pan; Muffin Pans: cupcake pan, muffin "
     "tin;"
     "Loaf Pans: bread pan; Pie Pans: pie dish; Baking Mats: silicone baking mat; Cooling Racks: wire rack;"
     "Bundt Pans: fluted cake pan"),
    ("Home & Kitchen > Kitchen Utensils & Gadgets", "kitchen_tools", "kitchen_tools",
     "Spatulas: turner; Whisks: balloon whisk; Measuring Cups: measuring cups and spoons;"
     "Mixing Bowls: nesting bowls; Cutting Boards: chopping board; Can Openers: tin opener;"
     "Garlic Presses: garlic crusher; Kitchen Scales: food scale; Colanders: pasta strainer;"
     "Vegetable Peelers: potato peeler; Salad Spinners: lettuce spinner"),
    ("Home & Kitchen > Kitchen & Dining > Cutlery & Knives", "kitchen_tools", "cutlery",
     "Chef's Knives (Chef's Knife): chef knife, cooks knife; Knife Block Sets: knife set;"
     "Steak Knives (Steak Knife Set): steak knife set; Paring Knives (Paring Knife): small kitchen knife;"
     "Knife Sharpeners: sharpening stone, honing rod; Kitchen Shears (Kitchen Shears): kitchen scissors"),
    ("Home & Kitchen > Kitchen & Dining > Dinnerware", "kitchen_tools", "dinnerware",
     "Dinnerware Sets: dish set, plates and bowls set; Dinner Plates: plates; Cereal Bowls: soup bowls;"
     "Coffee Mugs: mug; Drinking Glasses (Drinking Glass Set): glassware; Wine Glasses: stemware;"
     "Flatware Sets: silverware set, cutlery set; Serving Platters: serving tray"),
    ("Home & Kitchen > Kitchen & Dining > Travel & To-Go Drinkware", "kitchen_tools", "drinkware",
     "Water Bottles: reusable water bottle; Travel Mugs: insulated coffee mug; Tumblers: insulated tumbler;"
     "Lunch Boxes: lunch bag, bento box; Vacuum Flasks: thermos"),
    ("Home & Kitchen > Bedding", "bedding", "bedding",
     "Comforters: down comforter, duvet insert; Bedding Sets: bed in a bag; Quilts & Bedspreads: bedspread, "
     "coverlet; Sheets & Pillowcases (Sheet Set): bed sheets, sheets; Duvet Covers: comforter cover;"
     "Bed Pillows: pillow, sleeping pillow; Mattress Toppers: memory foam topper;"
     "Mattress Pads: mattress protector; Blankets: bed blanket; Throw Blankets: sofa throw;"
     "Weighted Blankets: heavy blanket; Electric Blankets: heated blanket; Bed Skirts: dust ruffle;"
     "Pillow Shams: decorative sham"),
    ("Home & Kitchen > Bath", "bath", "bath",
     "Bath Towels: towel; Towel Sets: bath towel set; Hand Towels: guest towel; Beach Towels: pool towel;"
     "Bath Rugs: bath mat; Shower Curtains: bathroom curtain; Shower Curtain Liners: shower liner;"
     "Bathrobes: robe, spa robe; Toothbrush Holders: toothbrush stand; Soap Dispensers: lotion dispenser;"
     "Shower Caddies (Shower Caddy): shower organizer"),
    ("Home & Kitchen > Furniture > Living Room Furniture", "furniture", "furniture",
     "Sofas & Couches (Sofa): couch; Coffee Tables: cocktail table; TV Stands: entertainment center, media "
     "console; End Tables: side table; Accent Chairs: armchair; Recliners: recliner chair;"
     "Ottomans: footstool; Bookcases: bookshelf"),
    ("Home & Kitchen > Furniture > Bedroom Furniture", "furniture", "furniture",
     "Bed Frames: platform bed; Headboards: bed headboard; Dressers: chest of drawers;"
     "Nightstands: bedside table; Mattresses: memory foam mattress; Vanity Tables: makeup vanity"),
    ("Home & Kitchen > Furniture > Home Office Furniture", "furniture", "furniture",
     "Office Chairs: desk chair; Computer Desks: desk; Standing Desks: sit stand desk;"
     "Filing Cabinets: file cabinet"),
    ("Home & Kitchen > Furniture > Dining Room Furniture", "furniture", "furniture",
     "Dining Tables: kitchen table; Dining Chairs: kitchen chairs; Bar Stools: counter stool;"
     "Kitchen Islands: kitchen cart"),
    ("Home & Kitchen > Home Decor", "decor", "decor",
     "Area Rugs: rug; Runner Rugs: hallway runner; Curtains (Curtain Panel): drapes, window curtains;"
     "Blackout Curtains: room darkening curtains; Table Lamps: bedside lamp; Floor Lamps: standing lamp;"
     "Wall Clocks: clock; Wall Mirrors: mirror; Picture Frames: photo frame;"
     "Throw Pillows: decorative pillow, accent pillow; Pillow Covers: cushion cover;"
     "Candles (Scented Candle): jar candle; Artificial Plants: fake plant; Vases: flower vase;"
     "Wall Art (Canvas Wall Art): canvas print; String Lights: fairy lights"),
    ("Home & Kitchen > Storage & Organization", "storage", "storage",
     "Storage Bins: storage basket, storage box; Closet Organizers: closet system; Shoe Racks: shoe "
     "organizer;"
     "Clothes Hangers: velvet hangers; Under Bed Storage (Under Bed Storage Bag): underbed storage;"
     "Food Storage Containers: meal prep containers; Drawer Organizers: drawer dividers;"
     "Laundry Hampers: laundry basket"),
    ("Home & Kitchen > Vacuums & Floor Care", "appliance", "floor_care",
     "Upright Vacuums: vacuum cleaner; Stick Vacuums: cordless vacuum; Robot Vacuums: robotic vacuum;"
     "Handheld Vacuums: hand vacuum; Carpet Cleaners: carpet shampooer; Steam Mops: floor steamer;"
     "Vacuum Filters: hepa filter"),
    ("Home & Kitchen > Heating, Cooling & Air Quality", "appliance", "air_quality",
     "Space Heaters: electric heater; Air Purifiers: hepa air purifier; Humidifiers: cool mist humidifier;"
     "Dehumidifiers: basement dehumidifier; Tower Fans: oscillating fan"),
    ("Electronics > Computers & Accessories > Computers", "computer", "computers",
     "Laptops: notebook computer, laptop computer; Gaming Laptops: gaming notebook;"
     "2-in-1 Laptops: convertible laptop; Chromebooks: chrome laptop; Desktop Computers: desktop pc, tower "
     "pc;"
     "All-in-One Computers: all in one pc; Tablets: android tablet; Mini PCs: small form factor pc"),
    ("Electronics > Computers & Accessories > Computer Accessories", "peripheral", "computer_accessories",
     "Keyboards: computer keyboard; Mice (Mouse): computer mouse; Keyboard & Mouse Combos (Keyboard and "
     "Mouse Combo): keyboard mouse set; Webcams: web camera; Laptop Bags: laptop backpack, laptop case;"
     "Laptop Sleeves: laptop cover; Laptop Stands: laptop riser; Docking Stations: laptop dock;"
     "Mouse Pads: mousepad; USB Hubs: usb c hub; Monitor Mounts: monitor arm"),
    ("Electronics > Computers & Accessories > Monitors", "peripheral", "displays",
     "Computer Monitors: monitor, pc monitor; Gaming Monitors: curved gaming monitor;"
     "Portable Monitors: travel monitor"),
    ("Electronics > Computers & Accessories > Printers & Scanners", "peripheral", "printers",
     "Inkjet Printers: printer, color printer; Laser Printers: black and white printer;"
     "All-in-One Printers: printer scanner copier; Photo Printers: picture printer;"
     "Document Scanners: scanner; Ink Cartridges: printer ink; Toner Cartridges: toner"),
    ("Electronics > Computers & Accessories > Data Storage", "data_storage", "storage_networking",
     "External Hard Drives: portable hard drive; Internal SSDs (Internal SSD): solid state drive;"
     "USB Flash Drives: thumb drive, flash drive; Memory Cards: sd card, micro sd card"),
    ("Electronics > Computers & Accessories > Networking", "peripheral", "storage_networking",
     "Wi-Fi Routers: wifi router, router; Mesh Wi-Fi Systems: mesh router; Wi-Fi Extenders: range extender;"
     "Network Switches: ethernet switch; Ethernet Cables: cat6 cable"),
    ("Electronics > Computers & Accessories > Computer Components", "data_storage", "components",
     "Graphics Cards: gpu, video card; Processors (CPU Processor): cpu; Desktop Memory (RAM Memory): ram;"
     "Motherboards: mainboard; Power Supplies (PC Power Supply): psu; Computer Cases: pc case"),
    ("Electronics > Headphones & Audio", "audio", "audio",
     "Over-Ear Headphones (Over-Ear Headphones): headphones; Earbuds (Earbuds): wireless earbuds, earphones;"
     "Noise Cancelling Headphones (Noise Cancelling Headphones): anc headphones;"
     "Bluetooth Speakers: portable speaker, wireless speaker; Smart Speakers: voice assistant speaker;"
     "Soundbars: sound bar; Home Theater Systems: surround sound system; Turntables: record player;"
     "Gaming Headsets: headset with mic"),
    ("Electronics > Television & Video", "tv", "tv_video",
     "Televisions (TV): tv, smart tv, television; Streaming Media Players: streaming stick;"
     "Projectors: movie projector; TV Mounts (TV Wall Mount): tv mount; Blu-ray Players: dvd player;"
     "TV Antennas: hd antenna; Remote Controls: universal remote"),
    ("Electronics > Camera & Photo", "camera", "camera",
     "Digital Cameras: camera, point and shoot camera; Mirrorless Cameras: mirrorless;"
     "DSLR Cameras: dslr; Action Cameras: sports camera; Camera Lenses (Camera Lens): lens, camera lens;"
     "Tripods: camera tripod; Camera Bags: camera backpack; Instant Cameras: polaroid camera;"
     "Security Cameras: home security camera"),
    ("Electronics > Cell Phones & Accessories", "phone_accessory", "phone_accessories",
     "Phone Cases: cell phone case; Screen Protectors: tempered glass screen protector;"
     "Phone Chargers: charger, usb c charger; Wireless Chargers: charging pad; Power Banks: portable charger;"
     "Charging Cables: usb cable, lightning cable; Phone Mounts: car phone holder;"
     "Smartphones: cell phone, unlocked phone"),
    ("Electronics > Wearable Technology", "wearable", "wearables",
     "Smartwatches (Smartwatch): smart watch; Fitness Trackers: activity tracker;"
     "Smartwatch Bands: watch band"),
    ("Electronics > Video Games", "peripheral", "gaming",
     "Game Consoles: gaming console; Game Controllers: gamepad, controller; Gaming Chairs: gamer chair"),
    ("Books > Cookbooks, Food & Wine", "cookbook", "publishers",
     "Juicing Cookbooks: juicing book, juice recipes book; Smoothie Cookbooks: smoothie recipe book;"
     "Air Fryer Cookbooks: air fryer recipe book; Slow Cooker Cookbooks: crock pot cookbook;"
     "Pressure Cooker Cookbooks: instant pot cookbook; Baking Cookbooks: baking book;"
     "Bread Baking Cookbooks: bread book; Grilling Cookbooks: bbq cookbook; Vegan Cookbooks: plant based "
     "cookbook; Keto Cookbooks: low carb cookbook; Dessert Cookbooks: ice cream recipe book;"
     "Quick & Easy Cookbooks (Quick and Easy Cookbook): easy recipes book"),
    ("Books > Computers & Technology", "book", "publishers",
     "Python Programming Books: python book; JavaScript Books: javascript programming book;"
     "Machine Learning Books: ai book; Computer Networking Books: networking book;"
     "PC Building Guides: computer hardware book; Photography Books: digital photography guide"),
    ("Books > Crafts, Hobbies & Home", "book", "publishers",
     "Sewing Books: sewing patterns book; Knitting & Crochet Books (Knitting Book): crochet book;"
     "Interior Design Books: home decorating book; Home Improvement Books: diy home repair book;"
     "Gardening Books: gardening guide; Woodworking Books: woodworking plans; Fashion & Style Books "
     "(Fashion Book): style guide"),
    ("Books > Sports & Outdoors", "book", "publishers",
     "Running Books: marathon training book; Yoga Books: yoga guide; Fitness & Exercise Books (Fitness "
     "Book): "
     "workout book; Golf Books: golf instruction book; Camping & Survival Guides (Survival Guide): "
     "wilderness survival book; Cycling Books: bike training book"),
    ("Books > Children's Books", "book", "publishers",
     "Picture Books: childrens picture book; Early Readers: beginning reader book; Activity Books: kids "
     "activity book; Coloring Books: coloring book for kids"),
    ("Books > Literature & Fiction", "book", "publishers",
     "Mystery Novels: mystery book; Science Fiction Novels: sci fi book; Romance Novels: romance book;"
     "Fantasy Novels: fantasy book; Historical Fiction (Historical Novel): historical fiction book"),
    ("Beauty & Personal Care > Skin Care", "beauty", "beauty",
     "Face Moisturizers: face cream; Facial Cleansers: face wash; Sunscreens: spf 50 sunscreen;"
     "Face Serums: vitamin c serum; Eye Creams: under eye cream; Face Masks (Face Mask): sheet mask"),
    ("Beauty & Personal Care > Makeup", "beauty", "beauty",
     "Lipsticks: lip color; Foundations: liquid foundation; Mascaras: lengthening mascara;"
     "Eyeshadow Palettes: eyeshadow; Nail Polishes (Nail Polish): nail lacquer; Makeup Brushes (Makeup Brush "
     "Set): brush set"),
    ("Beauty & Personal Care > Hair Care", "beauty", "hair_tools",
     "Shampoos: hair shampoo; Conditioners: hair conditioner; Hair Dryers: blow dryer;"
     "Flat Irons: hair straightener; Curling Irons: curling wand; Hair Brushes: detangling brush"),
    ("Beauty & Personal Care > Shaving & Hair Removal", "beauty", "grooming",
     "Electric Shavers: electric razor; Beard Trimmers: hair clippers; Razors: mens razor;"
     "Shaving Creams: shave gel"),
    ("Beauty & Personal Care > Oral Care", "beauty", "oral_care",
     "Electric Toothbrushes: rechargeable toothbrush; Toothpastes: whitening toothpaste;"
     "Water Flossers: oral irrigator"),
    ("Toys & Games > Building Toys", "toy", "toys",
     "Building Sets: building blocks; Magnetic Tiles: magnet blocks; Marble Runs: marble maze"),
    ("Toys & Games > Dolls & Accessories", "toy", "toys",
     "Fashion Dolls: doll; Baby Dolls: baby doll set; Dollhouses: doll house"),
    ("Toys & Games > Games & Puzzles", "toy", "toys",
     "Board Games: family board game; Card Games: party card game; Jigsaw Puzzles: 1000 piece puzzle"),
    ("Toys & Games > Vehicles & Remote Control", "toy", "toys",
     "Toy Cars: die cast cars; RC Cars (RC Car): remote control car; Train Sets: toy train"),
    ("Toys & Games > Arts & Crafts", "toy", "toys",
     "Crayons: crayon set; Modeling Dough: play dough; Craft Kits: kids craft kit"),
    ("Toys & Games > Outdoor Play", "toy", "toys",
     "Foam Blasters: dart blaster, toy gun; Bubble Machines: bubble maker; Kites: kite for kids"),
    ("Toys & Games > Stuffed Animals & Plush Toys", "toy", "toys",
     "Stuffed Animals: plush toy, stuffed animal; Teddy Bears: teddy; Plush Pillows: animal pillow"),
    ("Pet Supplies > Dogs", "pet", "pet",
     "Dog Beds: orthopedic dog bed; Dog Toys: chew toy; Dog Collars: collar; Dog Leashes (Dog Leash): leash;"
     "Dry Dog Food: dog food, kibble; Dog Treats: training treats; Dog Crates: kennel;"
     "Dog Harnesses: no pull harness"),
    ("Pet Supplies > Cats", "pet", "pet",
     "Cat Trees: cat tower; Cat Litter: clumping litter; Cat Toys: interactive cat toy;"
     "Dry Cat Food: cat food; Litter Boxes (Litter Box): cat litter box"),
    ("Pet Supplies > Fish & Aquatic Pets", "pet", "pet",
     "Aquariums: fish tank; Aquarium Filters: fish tank filter"),
    ("Office Products > Writing Supplies", "office", "office",
     "Ballpoint Pens: pens; Gel Pens: gel ink pens; Permanent Markers: sharpie markers;"
     "Highlighters: highlighter pens; Pencils: no 2 pencils"),
    ("Office Products > Paper Products", "office", "office",
     "Spiral Notebooks: notebook; Sticky Notes: post it notes; Printer Paper: copy paper;"
     "Index Cards: note cards"),
    ("Office Products > Desk Accessories", "office", "office",
     "Staplers: desk stapler; Tape Dispensers: tape holder; Desk Organizers: desk caddy"),
    ("Office Products > Office Electronics", "office", "office_electronics",
     "Calculators: scientific calculator; Paper Shredders: shredder; Laminators: laminating machine;"
     "Label Makers: label printer"),
    ("Tools & Home Improvement > Power Tools", "tools", "tools",
     "Cordless Drills: drill, drill driver; Impact Drivers: impact driver kit; Circular Saws: skil saw;"
     "Jigsaws: jig saw; Orbital Sanders: palm sander; Angle Grinders: grinder;"
     "Oscillating Tools: multi tool"),
    ("Tools & Home Improvement > Hand Tools", "tools", "tools",
     "Hammers: claw hammer; Screwdriver Sets: screwdrivers; Wrench Sets: wrenches; Pliers (Pliers Set): "
     "needle nose pliers; Tape Measures: measuring tape; Utility Knives (Utility Knife): box cutter"),
    ("Tools & Home Improvement > Lighting & Ceiling Fans", "lighting", "lighting",
     "Ceiling Fans: ceiling fan with light; LED Light Bulbs: led bulbs; Flashlights: led flashlight"),
    ("Tools & Home Improvement > Tool Storage", "tools", "tools",
     "Tool Boxes: toolbox; Tool Bags: tool tote"),
)

# Leaves whose listings talk about another leaf's products: the cookbook that names a juicer,
# the case made for a laptop (madral-kdd22 Table 8: "breville juicer" vs a Breville juicing
# cookbook). Hard negatives that share a query's words but not its category come from here.
# Unlisted leaves fall back to their group's, then their department's entry, then siblings.
COMPANIONS: dict[str, tuple[str, ...]] = {
    "Juicers": ("Juicing Cookbooks", "Juicer Parts & Accessories"),
    "Blenders": ("Smoothie Cookbooks", "Blender Replacement Parts"),
    "Air Fryers": ("Air Fryer Cookbooks", "Air Fryer Liners"),
    "Slow Cookers": ("Slow Cooker Cookbooks",),
    "Pressure Cookers": ("Pressure Cooker Cookbooks",),
    "Bread Machines": ("Bread Baking Cookbooks",),
    "Ice Cream Makers": ("Dessert Cookbooks",),
    "Coffee Makers": ("Coffee Filters",),
    "Espresso Machines": ("Espresso Machine Accessories",),
    "Stand Mixers": ("Mixer Attachments", "Baking Cookbooks"),
    "Comforters": ("Duvet Covers",),
    "Bed Pillows": ("Pillow Shams",),
    "Mattresses": ("Mattress Toppers", "Mattress Pads"),
    "Laptops": ("Laptop Sleeves", "Laptop Bags"),
    "Gaming Laptops": ("Laptop Bags",),
    "Inkjet Printers": ("Ink Cartridges",),
    "All-in-One Printers": ("Ink Cartridges",),
    "Laser Printers": ("Toner Cartridges",),
    "Televisions": ("TV Mounts", "Remote Controls"),
    "Smartphones": ("Phone Cases", "Screen Protectors"),
    "Smartwatches": ("Smartwatch Bands",),
    "Digital Cameras": ("Camera Bags", "Photography Books"),
    "DSLR Cameras": ("Camera Lenses", "Photography Books"),
    "Mirrorless Cameras": ("Camera Lenses",),
    "Desktop Computers": ("PC Building Guides",),
    "Yoga Mats": ("Yoga Books",),
    "Tents": ("Camping & Survival Guides",),
    "Sports & Outdoors > Golf": ("Golf Books",),
    "Sports & Outdoors > Outdoor Recreation > Cycling": ("Cycling Books",),
    "Sports & Outdoors > Outdoor Recreation > Camping & Hiking": ("Camping & Survival Guides",),
    "Sports & Outdoors > Exercise & Fitness > Cardio Training": ("Running Books",),
    "Sports & Outdoors > Exercise & Fitness > Yoga": ("Yoga Books",),
    "Home & Kitchen > Kitchen Appliances": ("Quick & Easy Cookbooks",),
    "Home & Kitchen > Cookware": ("Quick & Easy Cookbooks",),
    "Home & Kitchen > Bakeware": ("Baking Cookbooks",),
    "Home & Kitchen > Vacuums & Floor Care": ("Vacuum Filters",),
    "Electronics > Computers & Accessories > Computers": ("Laptop Sleeves", "PC Building Guides"),
    "Electronics > Cell Phones & Accessories": ("Phone Cases",),
    "Electronics > Camera & Photo": ("Photography Books",),
    "Home & Kitchen": ("Interior Design Books", "Home Improvement Books"),
    "Electronics": ("PC Building Guides",),
    "Clothing, Shoes & Jewelry": ("Fashion & Style Books", "Sewing Books", "Clothes Hangers"),
    **{f"Clothing, Shoes & Jewelry > {who} > Shoes": ("Shoe Racks", "Fashion & Style Books")
       for who in ("Men", "Women", "Boys", "Girls")},
    "Sports & Outdoors": ("Fitness & Exercise Books",),
    "Tools & Home Improvement": ("Home Improvement Books", "Woodworking Books"),
}
