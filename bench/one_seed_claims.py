"""The claims of docs/RESULTS.md's one-seed run at 20,000 products (issue 10, 2026-11-26).

That run's table and its "What the one-seed run showed" no longer change: they are kept, checked
against their own table, so that a later edit of the section cannot make them say what the table does
not. `bench.results_claims` checks them with the main table's claims.
"""

from __future__ import annotations

from bench.claim_checks import (
    ASPECT_VARIANTS,
    HELD_OUT,
    MADRAL_FAMILY,
    QUERY_ACCURACY,
    RANKING,
    Ahead,
    AtLeast,
    Claim,
    Marked,
    NotMarked,
    Quote,
    aspect_quotes,
    held_out,
)

ONE_SEED_CLAIMS: tuple[Claim, ...] = (
    Claim(
        "met by madral-en-v2 (0.942 / 0.933 / 0.921) and MtBERT (0.937 / 0.912 / 0.899)",
        (
            *aspect_quotes("madral-en-v2", HELD_OUT, ("0.942", "0.933", "0.921")),
            *aspect_quotes("mtbert", HELD_OUT, ("0.937", "0.912", "0.899")),
            AtLeast(("madral-en-v2", "mtbert"), held_out("category"), 0.90),
            AtLeast(("madral-en-v2", "mtbert"), held_out("brand"), 0.90),
            AtLeast(("madral-en-v2", "mtbert"), held_out("color"), 0.75),
        ),
    ),
    Claim(
        "MADRAL, en-v1 and no-fusion (5 layers, §7.2) miss category by 2-4.5 points (0.855-0.881) and meet "
        "brand and color",
        (
            AtLeast(("madral", "madral-en-v1", "no-fusion"), held_out("category"), 0.855),
            AtLeast(("madral", "madral-en-v1", "no-fusion"), held_out("category"), 0.8815, below=True),
            AtLeast(("madral", "madral-en-v1", "no-fusion"), held_out("brand"), 0.90),
            AtLeast(("madral", "madral-en-v1", "no-fusion"), held_out("color"), 0.75),
        ),
    ),
    Claim(
        "Query category Acc@1 ≥ 0.80: every MADRAL-family variant and MtBERT (0.826-0.917); MURAL 0.785",
        (
            AtLeast((*MADRAL_FAMILY, "mtbert"), f"{QUERY_ACCURACY}:category", 0.80),
            Quote("mtbert", f"{QUERY_ACCURACY}:category", "0.917"),
            Quote("madral-en-v1", f"{QUERY_ACCURACY}:category", "0.826"),
            Quote("mural", f"{QUERY_ACCURACY}:category", "0.785"),
        ),
    ),
    Claim(
        "MURAL learns category and brand weakly and color not at all at this budget** (0.733 / 0.567 / 0.035",
        aspect_quotes("mural", HELD_OUT, ("0.733", "0.567", "0.035")),
    ),
    Claim(
        "MtBERT (NDCG@5/10/50, AUC ↑), bibert-concat (NDCG ↑, AUC ↑) and madral-en-v2 (NDCG@5/10/50 ↑",
        (
            Marked(("mtbert", "bibert-concat"), RANKING, "↑"),
            Marked(("madral-en-v2",), RANKING[:3], "↑"),
        ),
    ),
    Claim(
        "On R@100 no aspect-aware variant is significantly ahead",
        (NotMarked(ASPECT_VARIANTS, ("R@100",), "↑"),),
    ),
    Claim(
        "MtBERT +3.3 points (p = 0.077), en-v2 -1.4",
        (Quote("mtbert", "R@100 Δ points", "+3.3"), Quote("madral-en-v2", "R@100 Δ points", "-1.4")),
    ),
    Claim(
        "MtBERT (CLS plus aspect heads) has the highest R@100, R@500 and ranking metrics of the aspect-aware "
        "variants (one seed, not tested against each other)",
        (Ahead("mtbert", tuple(v for v in ASPECT_VARIANTS if v != "mtbert"), ("R@100", "R@500", *RANKING)),),
    ),
    Claim(
        "brand / color: MADRAL 0.947 / 0.938 against 0.912 / 0.899; category: en-v2 0.942 against 0.937",
        (
            Ahead("madral", ("mtbert",), (held_out("brand"), held_out("color"))),
            Ahead("madral-en-v2", ("mtbert",), (held_out("category"),)),
            Quote("madral", held_out("brand"), "0.947"),
            Quote("madral", held_out("color"), "0.938"),
        ),
    ),
    Claim(
        "the one variant significantly ahead on R@100 is UHD-BERT (+6.7 points",
        (
            Marked(("uhd",), ("R@100",), "↑"),
            Marked(("uhd",), ("NDCG@5",), "↓"),
            Quote("uhd", "R@100 Δ points", "+6.7"),
        ),
    ),
    Claim(
        "MADRAL-ori is below BiBERT (R@100 0.684 ↓), and first-k (en-v2) recovers to BiBERT's level (0.805",
        (
            Marked(("madral",), ("R@100",), "↓"),
            Quote("madral", "R@100", "0.684"),
            NotMarked(("madral-en-v2",), ("R@100",), "↓"),
            Quote("madral-en-v2", "R@100", "0.805"),
        ),
    ),
    Claim(
        "no-fusion, which embeds CLS alone, collapses (R@100 0.030)",
        (Quote("no-fusion", "R@100", "0.030"), Marked(("no-fusion",), ("R@100",), "↓")),
    ),
    Claim(
        "MURAL is ahead of MUR on R@100 (0.697 vs 0.633) and on every ranking metric",
        (Ahead("mural", ("mur",), ("R@100", *RANKING)), Quote("mural", "R@100", "0.697")),
    ),
    Claim(
        "but behind at the deeper cut-offs (R@500 0.892 vs 0.897, R@10k 0.990 vs 0.993",
        (Ahead("mural", ("mur",), ("R@500", "R@10k"), lower=True), Quote("mur", "R@500", "0.897")),
    ),
    Claim(
        "both are below BiBERT on R@100",
        (Ahead("bibert", ("mural", "mur"), ("R@100",)),),
    ),
    Claim(
        "**DSSM and MADR** are far behind (R@100 0.124 and 0.336)",
        (
            Quote("dssm", "R@100", "0.124"),
            Quote("madr", "R@100", "0.336"),
            Marked(("dssm", "madr"), ("R@100",), "↓"),
        ),
    ),
)
