"""What the second store sells: its category tree, brands, product lines, features, colours and sizes.

The shop is a Swiss sports retailer on Shopify ("Bergfink Sport", invented) that lists in German, French
and English. Everything here is hand-written and language-tagged so that `make_export.py` can derive
titles, HTML bodies, queries and *rule-based* judgments from the same attributes. The leaf table is a
pipe-separated text block on purpose: one leaf per line reads like the shop's own category sheet and keeps
~95 leaves reviewable on one screen. Every brand is invented; none is in `examples/store_export` or in
`product_data/synthetic`.
"""

from __future__ import annotations

from dataclasses import dataclass

LANGUAGES: tuple[str, ...] = ("de", "fr", "en")


@dataclass(frozen=True)
class Leaf:
    """One leaf of the shop's tree and how products of it vary.

    ``nouns`` maps a language to (singular, plural). ``genders`` holds codes m/w/k/u (men, women, kids,
    unisex). ``option_size`` names the size that is a Shopify variant (Option2, not in the title);
    ``title_size`` the size that is part of the title and so a listing of its own (skis' length, a
    backpack's litres). ``grams`` is the weight range of one item; None where the title's size says it.
    """

    path: tuple[str, ...]
    nouns: dict[str, tuple[str, str]]
    genders: str
    option_size: str | None
    title_size: str | None
    features: tuple[str, ...]
    domain: str
    price: tuple[int, int]
    coloured: bool
    grams: tuple[int, int] | None

    @property
    def name(self) -> str:
        return self.path[-1]

    @property
    def department(self) -> str:
        return self.path[0]

    @property
    def parent(self) -> tuple[str, ...]:
        return self.path[:-1]


# One leaf a line, as the shop's category sheet has it (longer than the line limit on purpose):
# path | de sg/pl | fr sg/pl | en sg/pl | genders | option size | title size | features | brand domain | CHF
# | coloured | grams ("-": the title's size says the weight, e.g. 16 kg, 12er-Pack)
_LEAF_TABLE = """
Wintersport > Ski Alpin > Ski > Pistenski | Pistenski/Pistenski | ski de piste/skis de piste | piste ski/piste skis | mwk | - | ski | rocker carbon easy | ski | 399-949 | y | 2800-4200
Wintersport > Ski Alpin > Ski > Freeride-Ski | Freeride-Ski/Freeride-Ski | ski freeride/skis freeride | freeride ski/freeride skis | mw | - | ski | rocker carbon lightweight | ski | 549-1099 | y | 2800-4000
Wintersport > Ski Alpin > Ausrüstung > Skischuhe | Skischuh/Skischuhe | chaussure de ski/chaussures de ski | ski boot/ski boots | mwk | mondo | - | walkmode heatmould lightweight | ski | 249-749 | y | 1400-2200
Wintersport > Ski Alpin > Ausrüstung > Skistöcke | Skistock/Skistöcke | bâton de ski/bâtons de ski | ski pole/ski poles | uk | - | pole | aluminium carbon adjustable | ski | 39-149 | y | 350-600
Wintersport > Ski Alpin > Ausrüstung > Skitaschen | Skitasche/Skitaschen | housse à skis/housses à skis | ski bag/ski bags | u | - | - | padded wheels | ski | 59-189 | y | 1200-3500
Wintersport > Ski Alpin > Schutz > Skihelme | Skihelm/Skihelme | casque de ski/casques de ski | ski helmet/ski helmets | mwk | helmet | - | mips visor lightweight | protect | 89-329 | y | 350-650
Wintersport > Ski Alpin > Schutz > Rückenprotektoren | Rückenprotektor/Rückenprotektoren | protection dorsale/protections dorsales | back protector/back protectors | mwk | apparel | - | lightweight breathable | protect | 79-229 | y | 400-900
Wintersport > Ski Alpin > Brillen > Skibrillen | Skibrille/Skibrillen | masque de ski/masques de ski | ski goggle/ski goggles | mwk | - | - | photochromic magnetic antifog | protect | 59-269 | y | 150-250
Wintersport > Ski Alpin > Brillen > Wechselscheiben | Wechselscheibe/Wechselscheiben | écran de rechange/écrans de rechange | replacement lens/replacement lenses | u | - | - | photochromic antifog | protect | 29-99 | y | 40-90
Wintersport > Skitouren > Ausrüstung > Tourenski | Tourenski/Tourenski | ski de randonnée/skis de randonnée | touring ski/touring skis | mw | - | ski | lightweight carbon rocker | ski | 549-1199 | y | 2000-3000
Wintersport > Skitouren > Ausrüstung > Tourenbindungen | Tourenbindung/Tourenbindungen | fixation de randonnée/fixations de randonnée | touring binding/touring bindings | u | - | - | lightweight brakes | ski | 349-699 | n | 250-900
Wintersport > Skitouren > Ausrüstung > Steigfelle | Steigfell/Steigfelle | peau de phoque/peaux de phoque | climbing skin/climbing skins | u | - | skin | mohair | ski | 129-229 | n | 300-600
Wintersport > Skitouren > Sicherheit > LVS-Geräte | LVS-Gerät/LVS-Geräte | DVA/DVA | avalanche transceiver/avalanche transceivers | u | - | - | threeantenna bluetooth | avalanche | 249-499 | n | 200-260
Wintersport > Skitouren > Sicherheit > Lawinenschaufeln | Lawinenschaufel/Lawinenschaufeln | pelle à neige/pelles à neige | avalanche shovel/avalanche shovels | u | - | - | aluminium telescopic lightweight | avalanche | 49-119 | y | 400-800
Wintersport > Skitouren > Sicherheit > Lawinensonden | Lawinensonde/Lawinensonden | sonde d'avalanche/sondes d'avalanche | avalanche probe/avalanche probes | u | - | probe | carbon aluminium | avalanche | 49-129 | n | 200-400
Wintersport > Snowboard > Boards > Snowboards | Snowboard/Snowboards | snowboard/snowboards | snowboard/snowboards | mwk | - | board | rocker camber | board | 349-799 | y | 2500-3500
Wintersport > Snowboard > Boards > Snowboardbindungen | Snowboardbindung/Snowboardbindungen | fixation de snowboard/fixations de snowboard | snowboard binding/snowboard bindings | mw | helmet | - | rearentry lightweight | board | 179-399 | y | 700-1100
Wintersport > Snowboard > Boots > Snowboardboots | Snowboardboot/Snowboardboots | boots de snowboard/boots de snowboard | snowboard boot/snowboard boots | mwk | shoe | - | boa heatmould | board | 199-499 | y | 1500-2500
Wintersport > Langlauf > Ski > Skating-Ski | Skating-Ski/Skating-Ski | ski de skating/skis de skating | skate ski/skate skis | u | - | xc | carbon lightweight | nordic | 299-799 | y | 900-1200
Wintersport > Langlauf > Ski > Klassikski | Klassikski/Klassikski | ski classique/skis classiques | classic ski/classic skis | u | - | xc | skin waxless | nordic | 249-699 | y | 1000-1300
Wintersport > Langlauf > Schuhe > Langlaufschuhe | Langlaufschuh/Langlaufschuhe | chaussure de ski de fond/chaussures de ski de fond | cross-country boot/cross-country boots | mw | shoe | - | insulated lightweight | nordic | 149-449 | y | 600-1100
Wintersport > Bekleidung > Jacken > Skijacken | Skijacke/Skijacken | veste de ski/vestes de ski | ski jacket/ski jackets | mwk | apparel | - | waterproof insulated hood recycled | winterwear | 199-699 | y | 700-1300
Wintersport > Bekleidung > Hosen > Skihosen | Skihose/Skihosen | pantalon de ski/pantalons de ski | ski trousers/ski trousers | mwk | apparel | - | waterproof insulated bib | winterwear | 149-499 | y | 600-1100
Wintersport > Bekleidung > Accessoires > Skihandschuhe | Skihandschuh/Skihandschuhe | gant de ski/gants de ski | ski glove/ski gloves | mwk | apparel | - | waterproof insulated mitten | winterwear | 49-189 | y | 120-300
Wintersport > Bekleidung > Accessoires > Skisocken | Skisocke/Skisocken | chaussette de ski/chaussettes de ski | ski sock/ski socks | mwk | sock | - | merino thermal | winterwear | 19-49 | y | 60-110
Wintersport > Pflege > Wachs > Skiwachs | Skiwachs/Skiwachse | fart/farts | ski wax/ski waxes | u | - | wax | pfcfree universal | wax | 14-59 | n | -
Wintersport > Winterwandern > Ausrüstung > Schneeschuhe | Schneeschuh/Schneeschuhe | raquette à neige/raquettes à neige | snowshoe/snowshoes | mw | - | - | aluminium heellift | hike | 149-329 | y | 1500-2400
Bergsport > Klettern > Sicherung > Kletterseile | Kletterseil/Kletterseile | corde d'escalade/cordes d'escalade | climbing rope/climbing ropes | u | - | rope | drytreated halfrope | climb | 129-329 | y | 2600-4400
Bergsport > Klettern > Sicherung > Sicherungsgeräte | Sicherungsgerät/Sicherungsgeräte | système d'assurage/systèmes d'assurage | belay device/belay devices | u | - | - | autoblock lightweight | climb | 29-129 | y | 60-220
Bergsport > Klettern > Sicherung > Karabiner | Karabiner/Karabiner | mousqueton/mousquetons | carabiner/carabiners | u | - | - | screwgate lightweight | climb | 9-39 | y | 30-80
Bergsport > Klettern > Sicherung > Expressschlingen | Expressschlinge/Expressschlingen | dégaine/dégaines | quickdraw/quickdraws | u | - | set | lightweight | climb | 19-139 | y | 60-110
Bergsport > Klettern > Ausrüstung > Klettergurte | Klettergurt/Klettergurte | baudrier/baudriers | climbing harness/climbing harnesses | mwk | helmet | - | lightweight adjustable | climb | 59-159 | y | 250-450
Bergsport > Klettern > Ausrüstung > Kletterschuhe | Kletterschuh/Kletterschuhe | chausson d'escalade/chaussons d'escalade | climbing shoe/climbing shoes | mwk | shoe | - | velcro vegan | climb | 89-189 | y | 380-600
Bergsport > Klettern > Ausrüstung > Kletterhelme | Kletterhelm/Kletterhelme | casque d'escalade/casques d'escalade | climbing helmet/climbing helmets | uk | helmet | - | lightweight | climb | 59-149 | y | 200-400
Bergsport > Klettern > Ausrüstung > Chalkbags | Chalkbag/Chalkbags | sac à magnésie/sacs à magnésie | chalk bag/chalk bags | u | - | - | recycled | climb | 19-49 | y | 60-150
Bergsport > Klettern > Bouldern > Crashpads | Crashpad/Crashpads | crashpad/crashpads | crash pad/crash pads | u | - | - | foldable | climb | 149-349 | y | 3500-7000
Bergsport > Hochtouren > Eisausrüstung > Steigeisen | Steigeisen/Steigeisen | crampon/crampons | crampon/crampons | u | - | - | stepin lightweight aluminium | climb | 119-259 | n | 500-1000
Bergsport > Hochtouren > Eisausrüstung > Eispickel | Eispickel/Eispickel | piolet/piolets | ice axe/ice axes | u | - | axe | lightweight aluminium | climb | 79-249 | n | 280-550
Bergsport > Wandern > Schuhe > Wanderschuhe | Wanderschuh/Wanderschuhe | chaussure de randonnée/chaussures de randonnée | hiking shoe/hiking shoes | mwk | shoe | - | waterproof goretex lightweight vegan | hike | 119-259 | y | 700-1100
Bergsport > Wandern > Schuhe > Bergschuhe | Bergschuh/Bergschuhe | chaussure d'alpinisme/chaussures d'alpinisme | mountaineering boot/mountaineering boots | mw | shoe | - | goretex cramponable insulated | hike | 229-499 | y | 1300-2000
Bergsport > Wandern > Zubehör > Wanderstöcke | Wanderstock/Wanderstöcke | bâton de randonnée/bâtons de randonnée | trekking pole/trekking poles | u | - | - | foldable carbon aluminium | hike | 49-169 | y | 350-600
Bergsport > Wandern > Zubehör > Gamaschen | Gamasche/Gamaschen | guêtre/guêtres | gaiter/gaiters | u | helmet | - | waterproof | hike | 29-79 | y | 180-350
Bergsport > Wandern > Rucksäcke > Tourenrucksäcke | Tourenrucksack/Tourenrucksäcke | sac à dos de randonnée/sacs à dos de randonnée | trekking backpack/trekking backpacks | mw | - | tourpack | raincover lightweight | hike | 129-279 | y | 1200-2000
Bergsport > Wandern > Rucksäcke > Tagesrucksäcke | Tagesrucksack/Tagesrucksäcke | sac à dos journée/sacs à dos journée | daypack/daypacks | uk | - | daypack | raincover hydration | hike | 59-149 | y | 500-1000
Bergsport > Bekleidung > Jacken > Softshelljacken | Softshelljacke/Softshelljacken | veste softshell/vestes softshell | softshell jacket/softshell jackets | mw | apparel | - | windproof stretch hood | mountainwear | 129-329 | y | 350-600
Bergsport > Bekleidung > Jacken > Fleecejacken | Fleecejacke/Fleecejacken | veste polaire/vestes polaires | fleece jacket/fleece jackets | mwk | apparel | - | recycled hood | mountainwear | 69-199 | y | 250-500
Bergsport > Bekleidung > Jacken > Daunenjacken | Daunenjacke/Daunenjacken | doudoune/doudounes | down jacket/down jackets | mwk | apparel | - | hood lightweight recycled | mountainwear | 179-449 | y | 300-700
Bergsport > Bekleidung > Hosen > Trekkinghosen | Trekkinghose/Trekkinghosen | pantalon de trekking/pantalons de trekking | trekking trousers/trekking trousers | mw | apparel | - | zipoff stretch | mountainwear | 89-199 | y | 300-550
Bergsport > Bekleidung > Unterwäsche > Funktionsshirts | Funktionsshirt/Funktionsshirts | t-shirt technique/t-shirts techniques | base layer/base layers | mw | apparel | - | merino longsleeve | mountainwear | 39-119 | y | 120-250
Bergsport > Ausrüstung > Licht > Stirnlampen | Stirnlampe/Stirnlampen | lampe frontale/lampes frontales | headlamp/headlamps | u | - | lumen | rechargeable waterproof | light | 29-149 | y | 60-180
Radsport > Velos > Mountainbikes > Hardtails | Hardtail/Hardtails | VTT semi-rigide/VTT semi-rigides | hardtail mountain bike/hardtail mountain bikes | u | frame | - | carbon dropper hydraulic | bike | 899-2999 | y | 11000-14000
Radsport > Velos > Mountainbikes > Fullys | Fully/Fullys | VTT tout-suspendu/VTT tout-suspendus | full-suspension bike/full-suspension bikes | u | frame | - | carbon dropper | bike | 1999-6999 | y | 13000-16000
Radsport > Velos > Strasse > Rennvelos | Rennvelo/Rennvelos | vélo de route/vélos de route | road bike/road bikes | mw | frame | - | carbon discbrakes electronic | bike | 1499-6999 | y | 7000-9500
Radsport > Velos > Strasse > Gravelbikes | Gravelbike/Gravelbikes | vélo gravel/vélos gravel | gravel bike/gravel bikes | u | frame | - | carbon discbrakes | bike | 1299-4999 | y | 8500-10500
Radsport > Velos > E-Bikes > E-Mountainbikes | E-Mountainbike/E-Mountainbikes | VTT électrique/VTT électriques | electric mountain bike/electric mountain bikes | u | frame | battery | carbon | bike | 3999-8999 | y | 22000-26000
Radsport > Komponenten > Antrieb > Verschleissteile > Ketten | Kette/Ketten | chaîne/chaînes | chain/chains | u | - | speed | quicklink | parts | 19-69 | n | 240-290
Radsport > Komponenten > Antrieb > Verschleissteile > Kassetten | Kassette/Kassetten | cassette/cassettes | cassette/cassettes | u | - | speed | lightweight | parts | 49-349 | n | 280-500
Radsport > Komponenten > Bremsen > Bremsbeläge | Bremsbelag/Bremsbeläge | plaquette de frein/plaquettes de frein | brake pad/brake pads | u | - | - | organic sintered | parts | 15-39 | n | 20-40
Radsport > Komponenten > Laufräder > Reifen | Reifen/Reifen | pneu/pneus | tyre/tyres | u | - | tyre | tubeless foldable | tyre | 39-89 | n | 600-1100
Radsport > Komponenten > Laufräder > Schläuche | Schlauch/Schläuche | chambre à air/chambres à air | inner tube/inner tubes | u | - | tube | lightweight | tyre | 8-29 | n | 70-200
Radsport > Komponenten > Cockpit > Pedale | Pedal/Pedale | pédale/pédales | pedal/pedals | u | - | - | clipless flat | parts | 39-199 | y | 250-450
Radsport > Komponenten > Cockpit > Sättel | Sattel/Sättel | selle/selles | saddle/saddles | mw | - | saddle | cutout carbon | parts | 49-229 | y | 150-300
Radsport > Zubehör > Beleuchtung > Velolampen | Velolampe/Velolampen | éclairage vélo/éclairages vélo | bike light/bike lights | u | - | lumen | rechargeable | light | 19-149 | n | 50-200
Radsport > Zubehör > Sicherheit > Veloschlösser | Veloschloss/Veloschlösser | antivol vélo/antivols vélo | bike lock/bike locks | u | - | - | foldable | bikeacc | 29-129 | y | 900-2200
Radsport > Zubehör > Werkzeug > Minitools | Minitool/Minitools | multi-outil/multi-outils | multi-tool/multi-tools | u | - | - | chaintool | bikeacc | 19-69 | n | 100-250
Radsport > Zubehör > Werkzeug > Standpumpen | Standpumpe/Standpumpen | pompe à pied/pompes à pied | floor pump/floor pumps | u | - | - | tubeless gauge | bikeacc | 39-149 | n | 1200-2200
Radsport > Zubehör > Elektronik > Velocomputer | Velocomputer/Velocomputer | compteur vélo/compteurs vélo | bike computer/bike computers | u | - | - | gps wireless | bikeacc | 49-449 | n | 60-120
Radsport > Bekleidung > Schutz > Velohelme | Velohelm/Velohelme | casque de vélo/casques de vélo | bike helmet/bike helmets | mwk | helmet | - | mips lightweight | bikewear | 69-279 | y | 220-350
Radsport > Bekleidung > Oberteile > Trikots | Trikot/Trikots | maillot/maillots | jersey/jerseys | mw | apparel | - | shortsleeve longsleeve | bikewear | 59-169 | y | 100-200
Radsport > Bekleidung > Hosen > Trägerhosen | Trägerhose/Trägerhosen | cuissard à bretelles/cuissards à bretelles | bib shorts/bib shorts | mw | apparel | - | pad | bikewear | 79-229 | y | 150-250
Radsport > Bekleidung > Schuhe > Veloschuhe | Veloschuh/Veloschuhe | chaussure de vélo/chaussures de vélo | cycling shoe/cycling shoes | mw | shoe | - | boa carbon | bikewear | 119-399 | y | 450-700
Radsport > Bekleidung > Accessoires > Velohandschuhe | Velohandschuh/Velohandschuhe | gant de vélo/gants de vélo | cycling glove/cycling gloves | mwk | apparel | - | fingerless | bikewear | 24-69 | y | 40-90
Laufsport > Schuhe > Strasse > Strassenlaufschuhe | Strassenlaufschuh/Strassenlaufschuhe | chaussure de running route/chaussures de running route | road running shoe/road running shoes | mw | shoe | - | cushioned carbonplate lightweight | runshoe | 129-279 | y | 200-320
Laufsport > Schuhe > Trail > Trailrunningschuhe | Trailrunningschuh/Trailrunningschuhe | chaussure de trail/chaussures de trail | trail running shoe/trail running shoes | mw | shoe | - | goretex cushioned | runshoe | 139-229 | y | 280-380
Laufsport > Schuhe > Wettkampf > Spikes | Spike/Spikes | pointe d'athlétisme/pointes d'athlétisme | track spike/track spikes | u | shoe | - | lightweight | runshoe | 89-199 | y | 120-200
Laufsport > Bekleidung > Oberteile > Laufshirts | Laufshirt/Laufshirts | t-shirt de running/t-shirts de running | running shirt/running shirts | mw | apparel | - | reflective merino longsleeve | runwear | 29-89 | y | 90-160
Laufsport > Bekleidung > Oberteile > Laufjacken | Laufjacke/Laufjacken | veste de running/vestes de running | running jacket/running jackets | mw | apparel | - | reflective windproof waterproof | runwear | 79-229 | y | 150-300
Laufsport > Bekleidung > Hosen > Lauftights | Lauftight/Lauftights | collant de running/collants de running | running tights/running tights | mw | apparel | - | thermal reflective | runwear | 49-119 | y | 150-250
Laufsport > Bekleidung > Hosen > Laufshorts | Laufshort/Laufshorts | short de running/shorts de running | running shorts/running shorts | mw | apparel | - | lightweight | runwear | 34-79 | y | 80-150
Laufsport > Bekleidung > Accessoires > Laufsocken | Laufsocke/Laufsocken | chaussette de running/chaussettes de running | running sock/running socks | u | sock | - | merino compression | runwear | 14-39 | y | 30-60
Laufsport > Ausrüstung > Trinksysteme > Laufwesten | Laufweste/Laufwesten | gilet d'hydratation/gilets d'hydratation | running vest/running vests | mw | - | vest | lightweight | runwear | 89-179 | y | 150-350
Laufsport > Ausrüstung > Trinksysteme > Softflasks | Softflask/Softflasks | flasque souple/flasques souples | soft flask/soft flasks | u | - | flask | - | runwear | 14-29 | n | 25-50
Laufsport > Ausrüstung > Elektronik > GPS-Laufuhren | GPS-Laufuhr/GPS-Laufuhren | montre GPS/montres GPS | GPS running watch/GPS running watches | u | - | - | solar music | runtech | 199-799 | y | 40-80
Laufsport > Ausrüstung > Elektronik > Pulsgurte | Pulsgurt/Pulsgurte | ceinture cardio/ceintures cardio | heart rate strap/heart rate straps | u | - | - | bluetooth | runtech | 49-129 | n | 40-70
Laufsport > Ernährung > Energie > Energiegels | Energiegel/Energiegels | gel énergétique/gels énergétiques | energy gel/energy gels | u | - | pack | caffeine vegan | fuel | 2-59 | n | -
Laufsport > Ernährung > Energie > Energieriegel | Energieriegel/Energieriegel | barre énergétique/barres énergétiques | energy bar/energy bars | u | - | pack | vegan glutenfree | fuel | 2-49 | n | -
Laufsport > Ernährung > Getränke > Elektrolytpulver | Elektrolytpulver/Elektrolytpulver | poudre d'électrolytes/poudres d'électrolytes | electrolyte powder/electrolyte powders | u | - | tin | caffeine vegan | fuel | 19-49 | n | -
Wassersport > Schwimmen > Bekleidung > Badeanzüge | Badeanzug/Badeanzüge | maillot de bain une pièce/maillots de bain une pièce | swimsuit/swimsuits | wk | apparel | - | chlorine | swim | 39-119 | y | 100-200
Wassersport > Schwimmen > Bekleidung > Badehosen | Badehose/Badehosen | boxer de bain/boxers de bain | swim trunks/swim trunks | mk | apparel | - | chlorine | swim | 29-79 | y | 80-150
Wassersport > Schwimmen > Ausrüstung > Schwimmbrillen | Schwimmbrille/Schwimmbrillen | lunettes de natation/lunettes de natation | swim goggles/swim goggles | uk | - | - | antifog mirrored | swim | 15-49 | y | 25-60
Wassersport > Schwimmen > Ausrüstung > Badekappen | Badekappe/Badekappen | bonnet de bain/bonnets de bain | swim cap/swim caps | uk | - | - | silicone | swim | 9-24 | y | 30-60
Wassersport > Schwimmen > Training > Schwimmflossen | Schwimmflosse/Schwimmflossen | palme de natation/palmes de natation | swim fin/swim fins | uk | shoe | - | shortblade | swim | 29-69 | y | 300-700
Wassersport > Paddeln > SUP > SUP-Boards | SUP-Board/SUP-Boards | planche de SUP/planches de SUP | SUP board/SUP boards | u | - | sup | inflatable | paddle | 399-1299 | y | 8000-11000
Wassersport > Paddeln > SUP > SUP-Paddel | SUP-Paddel/SUP-Paddel | pagaie SUP/pagaies SUP | SUP paddle/SUP paddles | u | - | - | carbon adjustable | paddle | 59-299 | y | 650-1100
Wassersport > Paddeln > Sicherheit > Schwimmwesten | Schwimmweste/Schwimmwesten | gilet de sauvetage/gilets de sauvetage | buoyancy aid/buoyancy aids | uk | apparel | - | lightweight | paddle | 59-169 | y | 500-900
Wassersport > Neopren > Anzüge > Neoprenanzüge | Neoprenanzug/Neoprenanzüge | combinaison néoprène/combinaisons néoprène | wetsuit/wetsuits | mwk | apparel | wetsuit | chestzip | neoprene | 149-449 | y | 1800-3500
Wassersport > Neopren > Zubehör > Neoprenschuhe | Neoprenschuh/Neoprenschuhe | chausson néoprène/chaussons néoprène | neoprene boot/neoprene boots | u | shoe | - | nonslip | neoprene | 29-69 | y | 250-450
Fitness > Krafttraining > Gewichte > Kurzhanteln | Kurzhantel/Kurzhanteln | haltère court/haltères courts | dumbbell/dumbbells | u | - | dumbbell | hex neoprene | strength | 19-149 | y | -
Fitness > Krafttraining > Gewichte > Kettlebells | Kettlebell/Kettlebells | kettlebell/kettlebells | kettlebell/kettlebells | u | - | kettlebell | competition | strength | 39-149 | n | -
Fitness > Krafttraining > Zubehör > Widerstandsbänder | Widerstandsband/Widerstandsbänder | bande de résistance/bandes de résistance | resistance band/resistance bands | u | - | set | latexfree | strength | 14-49 | y | 100-300
Fitness > Yoga > Matten > Yogamatten | Yogamatte/Yogamatten | tapis de yoga/tapis de yoga | yoga mat/yoga mats | u | - | mat | nonslip cork vegan | yoga | 29-129 | y | 900-2500
Fitness > Yoga > Zubehör > Yogablöcke | Yogablock/Yogablöcke | brique de yoga/briques de yoga | yoga block/yoga blocks | u | - | - | cork | yoga | 12-39 | y | 200-350
Fitness > Ausdauer > Geräte > Springseile | Springseil/Springseile | corde à sauter/cordes à sauter | jump rope/jump ropes | u | - | - | ballbearing adjustable | strength | 12-59 | y | 150-300
Fitness > Regeneration > Massage > Faszienrollen | Faszienrolle/Faszienrollen | rouleau de massage/rouleaux de massage | foam roller/foam rollers | u | - | - | vibration | recovery | 29-149 | y | 300-900
Fitness > Regeneration > Massage > Massagepistolen | Massagepistole/Massagepistolen | pistolet de massage/pistolets de massage | massage gun/massage guns | u | - | - | rechargeable | recovery | 79-349 | y | 600-1200
"""  # noqa: E501


def _parse_leaves(table: str) -> tuple[Leaf, ...]:
    leaves = []
    for line in table.strip().splitlines():
        path, de, fr, en, genders, option, title, features, domain, price, coloured, grams = (
            cell.strip() for cell in line.split("|")
        )
        nouns = {lang: tuple(pair.split("/")) for lang, pair in zip(LANGUAGES, (de, fr, en), strict=True)}
        low, high = (int(value) for value in price.split("-"))
        leaves.append(
            Leaf(
                path=tuple(level.strip() for level in path.split(">")),
                nouns=nouns,  # type: ignore[arg-type]
                genders=genders,
                option_size=None if option == "-" else option,
                title_size=None if title == "-" else title,
                features=tuple(features.split()) if features != "-" else (),
                domain=domain,
                price=(low, high),
                coloured=coloured == "y",
                grams=None if grams == "-" else tuple(int(v) for v in grams.split("-")),  # type: ignore[arg-type]
            )
        )
    return tuple(leaves)


LEAVES: tuple[Leaf, ...] = _parse_leaves(_LEAF_TABLE)

# Feature id -> (de, fr, en) as titles, tags and shoppers write it.
FEATURES: dict[str, tuple[str, str, str]] = {
    "rocker": ("Rocker", "rocker", "rocker"),
    "camber": ("Camber", "cambre", "camber"),
    "carbon": ("Carbon", "carbone", "carbon"),
    "easy": ("Einsteiger", "débutant", "beginner"),
    "lightweight": ("leicht", "léger", "lightweight"),
    "walkmode": ("Walk-Modus", "mode marche", "walk mode"),
    "heatmould": ("thermoformbar", "thermoformable", "heat-mouldable"),
    "aluminium": ("Aluminium", "aluminium", "aluminium"),
    "adjustable": ("verstellbar", "réglable", "adjustable"),
    "padded": ("gepolstert", "rembourré", "padded"),
    "wheels": ("mit Rollen", "à roulettes", "wheeled"),
    "mips": ("MIPS", "MIPS", "MIPS"),
    "visor": ("mit Visier", "à visière", "visor"),
    "breathable": ("atmungsaktiv", "respirant", "breathable"),
    "photochromic": ("photochrom", "photochromique", "photochromic"),
    "magnetic": ("Magnetscheibe", "écran magnétique", "magnetic lens"),
    "antifog": ("Antifog", "antibuée", "anti-fog"),
    "brakes": ("mit Stopper", "avec stoppeurs", "with brakes"),
    "mohair": ("Mohair", "mohair", "mohair"),
    "threeantenna": ("3 Antennen", "3 antennes", "3 antennas"),
    "bluetooth": ("Bluetooth", "Bluetooth", "Bluetooth"),
    "telescopic": ("teleskopierbar", "télescopique", "telescopic"),
    "rearentry": ("Rear-Entry", "rear-entry", "rear-entry"),
    "boa": ("BOA", "BOA", "BOA"),
    "skin": ("Skin", "peau", "skin"),
    "waxless": ("Nowax", "sans fartage", "waxless"),
    "insulated": ("gefüttert", "isolé", "insulated"),
    "waterproof": ("wasserdicht", "imperméable", "waterproof"),
    "hood": ("mit Kapuze", "à capuche", "hooded"),
    "recycled": ("recycelt", "recyclé", "recycled"),
    "bib": ("Latzhose", "salopette", "bib"),
    "mitten": ("Fäustling", "moufle", "mitten"),
    "merino": ("Merino", "mérinos", "merino"),
    "thermal": ("Thermo", "thermique", "thermal"),
    "pfcfree": ("PFC-frei", "sans PFC", "PFC-free"),
    "universal": ("Universal", "universel", "all-temperature"),
    "heellift": ("Steighilfe", "cale de montée", "heel lift"),
    "drytreated": ("Dry", "traitement dry", "dry-treated"),
    "halfrope": ("Halbseil", "corde à double", "half rope"),
    "autoblock": ("Bremsunterstützung", "freinage assisté", "assisted braking"),
    "screwgate": ("Schraubverschluss", "à vis", "screwgate"),
    "velcro": ("Klettverschluss", "velcro", "velcro"),
    "vegan": ("vegan", "vegan", "vegan"),
    "foldable": ("faltbar", "pliable", "folding"),
    "stepin": ("Automatik", "automatique", "step-in"),
    "goretex": ("GORE-TEX", "GORE-TEX", "GORE-TEX"),
    "cramponable": ("steigeisenfest", "compatible crampons", "crampon-compatible"),
    "raincover": ("mit Regenhülle", "avec housse de pluie", "rain cover"),
    "hydration": ("trinksystemkompatibel", "compatible poche à eau", "hydration-compatible"),
    "windproof": ("winddicht", "coupe-vent", "windproof"),
    "stretch": ("Stretch", "stretch", "stretch"),
    "zipoff": ("Zip-Off", "zip-off", "zip-off"),
    "longsleeve": ("Langarm", "manches longues", "long sleeve"),
    "shortsleeve": ("Kurzarm", "manches courtes", "short sleeve"),
    "rechargeable": ("aufladbar", "rechargeable", "rechargeable"),
    "dropper": ("Teleskopstütze", "tige télescopique", "dropper post"),
    "hydraulic": ("hydraulische Bremsen", "freins hydrauliques", "hydraulic brakes"),
    "discbrakes": ("Scheibenbremsen", "freins à disque", "disc brakes"),
    "electronic": ("elektronische Schaltung", "transmission électronique", "electronic shifting"),
    "quicklink": ("mit Kettenschloss", "avec maillon rapide", "with quick link"),
    "organic": ("organisch", "organiques", "organic"),
    "sintered": ("gesintert", "frittées", "sintered"),
    "tubeless": ("Tubeless", "tubeless", "tubeless"),
    "clipless": ("Klickpedal", "automatiques", "clipless"),
    "flat": ("Flatpedal", "plates", "flat"),
    "cutout": ("mit Aussparung", "avec découpe", "cut-out"),
    "chaintool": ("mit Kettennieter", "avec dérive-chaîne", "with chain tool"),
    "gauge": ("mit Manometer", "avec manomètre", "with gauge"),
    "gps": ("GPS", "GPS", "GPS"),
    "wireless": ("kabellos", "sans fil", "wireless"),
    "pad": ("Sitzpolster", "peau de chamois", "chamois pad"),
    "fingerless": ("Kurzfinger", "mitaines", "fingerless"),
    "cushioned": ("gedämpft", "amorti", "cushioned"),
    "carbonplate": ("Carbonplatte", "plaque carbone", "carbon plate"),
    "reflective": ("reflektierend", "réfléchissant", "reflective"),
    "compression": ("Kompression", "compression", "compression"),
    "solar": ("Solar", "solaire", "solar"),
    "music": ("Musikspeicher", "musique", "music storage"),
    "caffeine": ("mit Koffein", "avec caféine", "with caffeine"),
    "glutenfree": ("glutenfrei", "sans gluten", "gluten-free"),
    "chlorine": ("chlorresistent", "résistant au chlore", "chlorine-resistant"),
    "mirrored": ("verspiegelt", "miroir", "mirrored"),
    "silicone": ("Silikon", "silicone", "silicone"),
    "shortblade": ("kurzes Blatt", "voilure courte", "short blade"),
    "inflatable": ("aufblasbar", "gonflable", "inflatable"),
    "chestzip": ("Brustreissverschluss", "zip poitrine", "chest zip"),
    "nonslip": ("rutschfest", "antidérapant", "non-slip"),
    "hex": ("Hex", "hexagonal", "hex"),
    "neoprene": ("Neopren", "néoprène", "neoprene"),
    "competition": ("Wettkampf", "compétition", "competition"),
    "latexfree": ("latexfrei", "sans latex", "latex-free"),
    "cork": ("Kork", "liège", "cork"),
    "ballbearing": ("kugelgelagert", "à roulements", "ball-bearing"),
    "vibration": ("mit Vibration", "vibrant", "vibrating"),
}

# Colour id -> (family, de, fr, en). The family decides grade 2 ("another shade of the colour asked").
COLOURS: dict[str, tuple[str, str, str, str]] = {
    "schwarz": ("black", "Schwarz", "noir", "Black"),
    "weiss": ("white", "Weiss", "blanc", "White"),
    "grau": ("grey", "Grau", "gris", "Grey"),
    "anthrazit": ("grey", "Anthrazit", "anthracite", "Charcoal"),
    "rot": ("red", "Rot", "rouge", "Red"),
    "bordeaux": ("red", "Bordeaux", "bordeaux", "Burgundy"),
    "blau": ("blue", "Blau", "bleu", "Blue"),
    "marine": ("blue", "Marine", "marine", "Navy"),
    "petrol": ("blue", "Petrol", "pétrole", "Petrol"),
    "gruen": ("green", "Grün", "vert", "Green"),
    "oliv": ("green", "Oliv", "olive", "Olive"),
    "gelb": ("yellow", "Gelb", "jaune", "Yellow"),
    "orange": ("orange", "Orange", "orange", "Orange"),
    "pink": ("pink", "Pink", "rose", "Pink"),
    "violett": ("purple", "Violett", "violet", "Purple"),
    "sand": ("brown", "Sand", "sable", "Sand"),
    "braun": ("brown", "Braun", "marron", "Brown"),
}

# Variant sizes (Shopify Option2): adult values, then kids' values.
OPTION_SIZES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "apparel": (("XS", "S", "M", "L", "XL", "XXL"), ("116", "128", "140", "152", "164")),
    "shoe": (("37", "38", "39", "40", "41", "42", "43", "44", "45", "46"), ("28", "30", "32", "34", "35")),
    "mondo": (("23.5", "24.5", "25.5", "26.5", "27.5", "28.5", "29.5"), ("19.5", "20.5", "21.5", "22.5")),
    "helmet": (("S", "M", "L"), ("XS", "S")),
    "sock": (("35-38", "39-42", "43-46"), ("27-30", "31-34")),
    "frame": (("S", "M", "L", "XL"), ("XS",)),
}

# Title sizes: values in the order "adjacent" means, and the format per language.
TITLE_SIZES: dict[str, tuple[tuple[str, ...], dict[str, str]]] = {
    "ski": (("149", "156", "163", "170", "177", "184"), dict.fromkeys(LANGUAGES, "{v} cm")),
    "pole": (("105", "110", "115", "120", "125", "130"), dict.fromkeys(LANGUAGES, "{v} cm")),
    "skin": (("100", "110", "120", "130"), dict.fromkeys(LANGUAGES, "{v} mm")),
    "probe": (("240", "260", "280", "300", "320"), dict.fromkeys(LANGUAGES, "{v} cm")),
    "board": (("146", "150", "154", "158", "162"), dict.fromkeys(LANGUAGES, "{v} cm")),
    "xc": (("176", "181", "186", "191", "196"), dict.fromkeys(LANGUAGES, "{v} cm")),
    "wax": (("60", "120", "180"), dict.fromkeys(LANGUAGES, "{v} g")),
    "rope": (("40", "50", "60", "70", "80"), dict.fromkeys(LANGUAGES, "{v} m")),
    "axe": (("50", "55", "60", "65"), dict.fromkeys(LANGUAGES, "{v} cm")),
    "tourpack": (("30", "35", "40", "45", "50"), {"de": "{v} L", "fr": "{v} L", "en": "{v} L"}),
    "daypack": (("15", "18", "22", "25", "28"), {"de": "{v} Liter", "fr": "{v} litres", "en": "{v}L"}),
    "lumen": (("200", "400", "600", "900", "1200"), dict.fromkeys(LANGUAGES, "{v} lm")),
    "battery": (("500", "625", "750", "800"), dict.fromkeys(LANGUAGES, "{v} Wh")),
    "speed": (("10", "11", "12"), {"de": "{v}-fach", "fr": "{v} vitesses", "en": "{v}-speed"}),
    "tyre": (
        ("29x2.25", "29x2.4", "29x2.6", "700x28c", "700x32c", "700x40c"),
        dict.fromkeys(LANGUAGES, "{v}"),
    ),
    "tube": (("27.5", "29", "700c"), {"de": '{v}"', "fr": '{v}"', "en": '{v}"'}),
    "saddle": (("135", "145", "155"), dict.fromkeys(LANGUAGES, "{v} mm")),
    "vest": (("5", "8", "12"), dict.fromkeys(LANGUAGES, "{v} L")),
    "flask": (("250", "500"), dict.fromkeys(LANGUAGES, "{v} ml")),
    "pack": (("1", "6", "12", "24"), {"de": "{v}er-Pack", "fr": "lot de {v}", "en": "pack of {v}"}),
    "tin": (("300", "500", "1000"), dict.fromkeys(LANGUAGES, "{v} g")),
    "set": (("3", "5", "10"), {"de": "{v}er-Set", "fr": "set de {v}", "en": "set of {v}"}),
    "sup": (("10'6", "11'0", "11'6", "12'6"), dict.fromkeys(LANGUAGES, "{v}")),
    "wetsuit": (("3/2", "4/3", "5/4"), dict.fromkeys(LANGUAGES, "{v} mm")),
    "dumbbell": (("2", "4", "6", "8", "10", "12"), dict.fromkeys(LANGUAGES, "{v} kg")),
    "kettlebell": (("8", "12", "16", "20", "24"), dict.fromkeys(LANGUAGES, "{v} kg")),
    "mat": (("3", "4", "6"), dict.fromkeys(LANGUAGES, "{v} mm")),
}

# Brand domain -> brands, most stocked first. All invented; a few sell in several domains.
BRANDS: dict[str, tuple[str, ...]] = {
    "ski": ("Valdor", "Fallstein", "Arvenholz", "Skalda", "Nordkamm", "Firnline"),
    "board": ("Driftwerk", "Poudreuse & Co", "Skalda", "Gnarlberg"),
    "avalanche": ("Lawinex", "Sentinel Alpine", "Nordkamm", "Firnline"),
    "protect": ("Optiq Alpin", "Visiera", "Helvetor", "Valdor", "Brisolin"),
    "winterwear": ("Gletscherfloh", "Aurelle", "Nordkamm", "Bergfink Basics", "Frostgarn", "Lunaria"),
    "nordic": ("Loipenwerk", "Trasea", "Fallstein", "Nordlys Sport"),
    "wax": ("Glisso", "Wachsküche", "Loipenwerk"),
    "climb": ("Grip & Granit", "Verticalis", "Seilwerk Glarus", "Crux Labs", "Ascenda", "Blocwerk"),
    "hike": ("Wegmacher", "Sentiero", "Trailhund", "Gipfelstück", "Randonnée Alpine", "Bergfink Basics"),
    "mountainwear": ("Gletscherfloh", "Aurelle", "Merinova", "Trailhund", "Bergfink Basics", "Nordkamm"),
    "light": ("Luxtal", "Lichtfuchs", "Beamline"),
    "bike": ("Velocita Svizzera", "Rennwerk", "Trailmacher", "Ciclo Ticino", "Hangzeit", "Voltberg"),
    "parts": ("Kettwerk", "Sprocketta", "Brakelab", "Sattelmann", "Rennwerk", "Pedalia"),
    "tyre": ("Gummiwerk", "Pneumaxx", "Rollbahn", "Trailmacher"),
    "bikeacc": ("Schlossberg", "Luxtal", "Pumpwerk", "Tooljet", "Veloteq"),
    "bikewear": ("Rennwerk", "Maglia Uno", "Helvetor", "Chamois & Co", "Trailmacher", "Aurelle"),
    "runshoe": ("Fersenflug", "Kadenz", "Trailhund", "Stride Nord", "Pasolibero"),
    "runwear": ("Kadenz", "Aurelle", "Merinova", "Pasolibero", "Laufwerk Zürich"),
    "runtech": ("Pulsar Alpin", "Chronotrail", "Kadenz", "Veloteq"),
    "fuel": ("Ravito", "Glukoz", "Bergbrot Nutrition", "Energiewerk"),
    "swim": ("Aquarel", "Lacustre", "Bahnwerk Swim", "Nageo"),
    "paddle": ("Lakeside Boards", "Pagaie Léman", "Aquarel", "Seegang"),
    "neoprene": ("Seegang", "Thermaline", "Lacustre"),
    "strength": ("Eisenwerk", "Gewichtsklasse", "Ferrum Gym"),
    "yoga": ("Asanaflow", "Lotusgarn", "Bergfink Basics"),
    "recovery": ("Faszio", "Rollkur", "Ferrum Gym", "Pulsar Alpin"),
}

# Product-line names: a stem per department (passes, peaks, lakes, rivers, rocks) and a suffix.
LINE_STEMS: dict[str, tuple[str, ...]] = {
    "Wintersport": (
        "Corvatsch", "Lagalb", "Parsenn", "Jakobshorn", "Lauberhorn", "Diavolezza", "Mont Fort",
        "Chamossaire", "Weissfluh", "Piz Nair", "Flumserberg", "Stoos", "Brunni", "Fiesch",
    ),
    "Bergsport": (
        "Tödi", "Glärnisch", "Säntis", "Bietschhorn", "Grand Combin", "Dents du Midi", "Bernina",
        "Rigi", "Pilatus", "Titlis", "Dom", "Weisshorn", "Balmhorn", "Gspaltenhorn",
    ),
    "Radsport": (
        "Gotthard", "Furka", "Grimsel", "Susten", "Klausen", "Oberalp", "Lukmanier", "Julier",
        "Flüela", "Nufenen", "Simplon", "Albula", "Umbrail", "Pragel",
    ),
    "Laufsport": (
        "Limmat", "Aare", "Rhône", "Reuss", "Emme", "Sihl", "Töss", "Thur", "Saane", "Doubs", "Inn",
        "Maggia", "Verzasca", "Birs",
    ),
    "Wassersport": (
        "Léman", "Bodan", "Brienz", "Thun", "Zug", "Sarnen", "Hallwil", "Sempach", "Walen", "Ägeri",
        "Morat", "Lugano", "Sils", "Caumasee",
    ),
    "Fitness": (
        "Granit", "Basalt", "Gneis", "Marmor", "Quarz", "Schiefer", "Kalk", "Dolomit", "Tuff",
        "Obsidian", "Onyx", "Jaspis", "Achat", "Serpentin",
    ),
}  # fmt: skip
FUEL_STEMS: tuple[str, ...] = (
    "Zitrone", "Espresso", "Waldbeere", "Cola", "Salzkaramell", "Mango", "Apfel-Zimt", "Vanille",
    "Minze", "Blutorange", "Erdnuss", "Kirsche",
)  # fmt: skip
LINE_SUFFIXES: tuple[str, ...] = (
    "Pro", "Lite", "Evo", "GT", "Air", "XT", "Plus", "2", "3", "Tour", "Race", "Trail", "Flex", "Light",
    "88", "95", "102", "110", "120", "130",
)  # fmt: skip
