"""The claims of docs/RESULTS.md's "What the figures say", each sentence quoted word for word with the
checks that make it true, recomputed from the main table's run archive (`bench.archive_runs`): the table's
cells and marks (`Quote`, `Marked`, `Ahead`, ...) on the table the archive renders, and the figures a
sentence quotes that the table does not print (`Paired`: a difference of two rows and its p-value;
`SeedMeans`; `SeedMinutes`: a seed's archived stage minutes). `bench.results_claims` runs them.
"""

from __future__ import annotations

from bench.claim_checks import (
    HELD_OUT,
    MADRAL_FAMILY,
    RANKING,
    RETRIEVAL,
    ZERO_SHOT,
    Ahead,
    AtLeast,
    Claim,
    Collapsed,
    EveryRow,
    Marked,
    NotMarked,
    Paired,
    Quote,
    SeedMeans,
    SeedMinutes,
    aspect_quotes,
    held_out,
    quoted_range,
)

R100, R500, R10K, NDCG10 = "recall@100", "recall@500", "recall@10000", "ndcg@10"

# The dense trained rows level with zero-shot at R@100 in the main table; UHD-BERT, sparse, is the fourth.
DENSE_LEVEL_WITH_ZERO_SHOT = ("mural-concat", "mtbert", "bibert-concat")
LEVEL_WITH_ZERO_SHOT = (*DENSE_LEVEL_WITH_ZERO_SHOT, "uhd")
# The rows not marked against zero-shot at R@500.
R500_LEVEL = ("uhd", "mural-concat", "bibert-concat")

MAIN_CLAIMS: tuple[Claim, ...] = (
    Claim(
        "zero-shot is ahead (▼ against it) of every trained variant but the four level ones below at R@100, "
        "of every one but UHD-BERT, MURAL-CONCAT and BiBERT-CONCAT at R@500, and of every one at R@10k, and "
        "behind (▲) every trained variant but DSSM on the ranking task (NDCG@10 0.7707 against 0.86-0.95)",
        (
            Marked(EveryRow((ZERO_SHOT, *LEVEL_WITH_ZERO_SHOT)), ("R@100",), "▼"),
            Marked(EveryRow((ZERO_SHOT, *R500_LEVEL)), ("R@500",), "▼"),
            NotMarked(R500_LEVEL, ("R@500",), "▼"),
            Marked(EveryRow((ZERO_SHOT,)), ("R@10k",), "▼"),
            Marked(EveryRow((ZERO_SHOT, "dssm")), RANKING, "▲"),
            Marked(("dssm",), RANKING, "▼"),
            Quote(ZERO_SHOT, "NDCG@10", "0.7707"),
            *quoted_range(
                EveryRow((ZERO_SHOT, "dssm")),
                "NDCG@10",
                Quote("uhd", "NDCG@10", "0.86"),
                Quote("mural-concat", "NDCG@10", "0.95"),
            ),
        ),
    ),
    Claim(
        "BiBERT, the papers' baseline, is ▼ at every cut-off (R@100 0.5666 against 0.6508)",
        (
            Marked(("bibert",), RETRIEVAL, "▼"),
            Quote("bibert", "R@100", "0.5666"),
            Quote(ZERO_SHOT, "R@100", "0.6508"),
        ),
    ),
    Claim(
        "Four trained rows are level with zero-shot at R@100, none marked against it: MURAL-CONCAT (0.6691), "
        "UHD-BERT (0.6653), MtBERT (0.6452) and BiBERT-CONCAT (0.6432); every other trained row is ▼ there",
        (
            Quote("mural-concat", "R@100", "0.6691"),
            Quote("uhd", "R@100", "0.6653"),
            Quote("mtbert", "R@100", "0.6452"),
            Quote("bibert-concat", "R@100", "0.6432"),
            NotMarked(LEVEL_WITH_ZERO_SHOT, ("R@100",), "▼"),
            NotMarked(LEVEL_WITH_ZERO_SHOT, ("R@100",), "▲"),
            Marked(EveryRow((ZERO_SHOT, *LEVEL_WITH_ZERO_SHOT)), ("R@100",), "▼"),
        ),
    ),
    Claim(
        "The three dense ones are ↑ against BiBERT at R@100 and on every ranking metric (+10.3, +7.9 and "
        "+7.7 points of R@100)",
        (
            Marked(DENSE_LEVEL_WITH_ZERO_SHOT, ("R@100", *RANKING), "↑"),
            Quote("mural-concat", "R@100 Δ points", "+10.3"),
            Quote("mtbert", "R@100 Δ points", "+7.9"),
            Quote("bibert-concat", "R@100 Δ points", "+7.7"),
        ),
    ),
    Claim(
        "MtBERT is ▼ at R@500 (0.9014) where BiBERT-CONCAT (0.9199) and MURAL-CONCAT (0.9204) are not",
        (
            Marked(("mtbert",), ("R@500",), "▼"),
            NotMarked(("bibert-concat", "mural-concat"), ("R@500",), "▼"),
            Quote("mtbert", "R@500", "0.9014"),
            Quote("bibert-concat", "R@500", "0.9199"),
            Quote("mural-concat", "R@500", "0.9204"),
        ),
    ),
    Claim(
        "Condenser is below BiBERT (R@100 0.5467 ↓",
        (Quote("condenser", "R@100", "0.5467"), Marked(("condenser",), ("R@100",), "↓")),
    ),
    Claim(
        "MADR and MpBERT are far below BiBERT (R@100 0.4016 and 0.4275, both ↓)",
        (
            Quote("madr", "R@100", "0.4016"),
            Quote("mpbert", "R@100", "0.4275"),
            Marked(("madr", "mpbert"), ("R@100",), "↓"),
        ),
    ),
    Claim(
        "MpBERT varies most between seeds (sd 0.1034",
        (
            Quote("mpbert", "R@100 sd", "0.1034"),
            Ahead("mpbert", EveryRow((ZERO_SHOT,)), ("R@100 sd",)),  # zero-shot: one run, no sd
        ),
    ),
    Claim(
        "DSSM collapses (†, R@100 0.0548 ↓)",
        (Collapsed(("dssm",)), Quote("dssm", "R@100", "0.0548"), Marked(("dssm",), ("R@100",), "↓")),
    ),
    Claim(
        "MADRAL-ori is level with BiBERT at R@100 (0.5598) and below it at R@500 (0.8474 ↓)",
        (
            Quote("madral", "R@100", "0.5598"),
            Quote("madral", "R@500", "0.8474"),
            NotMarked(("madral",), ("R@100",), "↓"),
            NotMarked(("madral",), ("R@100",), "↑"),
            Marked(("madral",), ("R@500",), "↓"),
        ),
    ),
    Claim(
        "en-v1 (CLS in place of OTHER) is ahead of MADRAL-ori and ↑ against BiBERT at R@100 (0.5898)",
        (
            Ahead("madral-en-v1", ("madral", "bibert"), ("R@100",)),
            Marked(("madral-en-v1",), ("R@100",), "↑"),
            Quote("madral-en-v1", "R@100", "0.5898"),
        ),
    ),
    Claim(
        "en-v2 (the first k tokens) is behind BiBERT at R@100 and R@500 (0.5458; 0.8086 ↓)",
        (
            Ahead("madral-en-v2", ("bibert",), ("R@100", "R@500"), lower=True),
            Marked(("madral-en-v2",), ("R@500",), "↓"),
            Quote("madral-en-v2", "R@100", "0.5458"),
            Quote("madral-en-v2", "R@500", "0.8086"),
        ),
    ),
    Claim(
        "no-fusion (CLS alone) is the best MADRAL-family row at R@100 (0.6237 ↑)",
        (
            Ahead("no-fusion", ("madral", "madral-en-v1", "madral-en-v2"), ("R@100",)),
            Marked(("no-fusion",), ("R@100",), "↑"),
            Quote("no-fusion", "R@100", "0.6237"),
        ),
    ),
    Claim(
        "Every MADRAL-family row is ↑ against BiBERT at NDCG@5, NDCG@10 and NDCG@50 and ▼ against zero-shot "
        "at R@100",
        (Marked(MADRAL_FAMILY, RANKING[:3], "↑"), Marked(MADRAL_FAMILY, ("R@100",), "▼")),
    ),
    Claim(
        "MURAL (mural-wsdm24) is below BiBERT at every retrieval cut-off (R@100 0.4995 ↓)",
        (Marked(("mural",), RETRIEVAL, "↓"), Quote("mural", "R@100", "0.4995")),
    ),
    Claim(
        "ahead of it only at NDCG@5 (↑",
        (Marked(("mural",), ("NDCG@5",), "↑"), NotMarked(("mural",), RANKING[1:], "↑")),
    ),
    Claim(
        "Its held-out accuracy misses the targets (0.645 / 0.402 / 0.023)",
        (
            *aspect_quotes("mural", HELD_OUT, ("0.645", "0.402", "0.023")),
            AtLeast(("mural",), held_out("category"), 0.90, below=True),
            AtLeast(("mural",), held_out("brand"), 0.90, below=True),
            AtLeast(("mural",), held_out("color"), 0.75, below=True),
        ),
    ),
    Claim(
        "MURAL is ahead of MUR at R@100 and R@500 (0.4995 against 0.3675; 0.8002 against 0.7750) and at "
        "NDCG@5, NDCG@10 and NDCG@50 (p 0.0003, 0.0002 and 3e-7), level at AUC (p 0.6), and lower at R@10k "
        "(0.9762 against 0.9800, not significant)",
        (
            Ahead("mural", ("mur",), ("R@100", "R@500", *RANKING[:3])),
            Paired("mural", "mur", "recall@500", "+2.5", "1e-8"),
            Paired("mural", "mur", "ndcg@5", None, "0.0003"),
            Paired("mural", "mur", "ndcg@10", None, "0.0002"),
            Paired("mural", "mur", "ndcg@50", None, "3e-7"),
            Paired("mural", "mur", "auc", None, "0.6"),
            Ahead("mural", ("mur",), ("R@10k",), lower=True, tested=False),
            Quote("mur", "R@100", "0.3675"),
            Quote("mur", "R@500", "0.7750"),
            Quote("mural", "R@500", "0.8002"),
            Quote("mural", "R@10k", "0.9762"),
            Quote("mur", "R@10k", "0.9800"),
        ),
    ),
    Claim(
        "UHD-BERT (uhd-bert) recalls best of the trained rows at R@500 and ranks worst but DSSM at NDCG@5, "
        "NDCG@10 and NDCG@50",
        (
            Ahead("uhd", EveryRow((ZERO_SHOT,)), ("R@500",)),
            Ahead("uhd", EveryRow((ZERO_SHOT, "dssm")), RANKING[:3], lower=True),
        ),
    ),
    Claim(
        "R@100 0.6653 and R@500 0.9344, both ↑ against BiBERT (+9.9 and +6.2 points, p 3e-43 and 3e-34) and "
        "not marked against zero-shot",
        (
            Quote("uhd", "R@100", "0.6653"),
            Quote("uhd", "R@500", "0.9344"),
            Marked(("uhd",), ("R@100", "R@500"), "↑"),
            Quote("uhd", "R@100 Δ points", "+9.9"),
            Quote("uhd", "R@500 Δ points", "+6.2"),
            NotMarked(("uhd",), ("R@100", "R@500"), "▼"),
            NotMarked(("uhd",), ("R@100", "R@500"), "▲"),
        ),
    ),
    Claim(
        "↓ against BiBERT on every ranking metric (NDCG@10 0.8620 ↓, −4.9 points)",
        (
            Marked(("uhd",), RANKING, "↓"),
            Quote("uhd", "NDCG@10", "0.8620"),
            Quote("uhd", "NDCG@10 Δ points", "-4.9"),
        ),
    ),
    Claim(
        "every MADRAL-family row and MtBERT meets them: category 0.905-0.938, brand 0.934-0.951, color "
        "0.945-0.971",
        (
            *quoted_range(
                (*MADRAL_FAMILY, "mtbert"),
                held_out("category"),
                Quote("madral-en-v2", held_out("category"), "0.905"),
                Quote("madral", held_out("category"), "0.938"),
            ),
            *quoted_range(
                (*MADRAL_FAMILY, "mtbert"),
                held_out("brand"),
                Quote("mtbert", held_out("brand"), "0.934"),
                Quote("madral-en-v1", held_out("brand"), "0.951"),
            ),
            *quoted_range(
                (*MADRAL_FAMILY, "mtbert"),
                held_out("color"),
                Quote("madral-en-v2", held_out("color"), "0.945"),
                Quote("no-fusion", held_out("color"), "0.971"),
            ),
        ),
    ),
)

# The figures the sentences quote that the table does not print, recomputed from the archive.
PAIRED_CLAIMS: tuple[Claim, ...] = (
    Claim(
        "MURAL-CONCAT is higher than zero-shot on each seed (0.6771 / 0.6735 / 0.6566: +1.8 points pooled, p "
        "0.02, not significant after Holm), UHD-BERT +1.4 (p 0.05), MtBERT −0.6 (p 0.39), BiBERT-CONCAT "
        "−0.8 (p 0.30)",
        (
            SeedMeans("mural-concat", R100, "0.6771 / 0.6735 / 0.6566"),
            Quote(ZERO_SHOT, "R@100", "0.6508"),
            Paired("mural-concat", ZERO_SHOT, R100, "+1.8", "0.02"),
            NotMarked(("mural-concat",), ("R@100",), "▲"),
            Paired("uhd", ZERO_SHOT, R100, "+1.4", "0.05"),
            Paired("mtbert", ZERO_SHOT, R100, "−0.6", "0.39"),
            Paired("bibert-concat", ZERO_SHOT, R100, "−0.8", "0.30"),
        ),
    ),
    Claim(
        "keeps the R@500 that MtBERT loses (−2.4 against zero-shot, p 3e-9). MURAL-CONCAT is +2.6 points on "
        "BiBERT-CONCAT (p 2e-6) and +17.0 on MURAL",
        (
            Paired("mtbert", ZERO_SHOT, R500, "−2.4", "3e-9"),
            Paired("mural-concat", "bibert-concat", R100, "+2.6", "2e-6"),
            Paired("mural-concat", "mural", R100, "+17.0"),
        ),
    ),
    Claim(
        "(R@100 0.5467 ↓, −2.0 points; NDCG@10 −0.4 ↓)",
        (
            Quote("condenser", "R@100 Δ points", "-2.0"),
            Quote("condenser", "NDCG@10 Δ points", "-0.4"),
            Marked(("condenser",), ("NDCG@10",), "↓"),
        ),
    ),
    Claim("(sd 0.1034: 0.4292 / 0.5300 / 0.3233)", (SeedMeans("mpbert", R100, "0.4292 / 0.5300 / 0.3233"),)),
    Claim(
        "the study's central finding holds at R@500 (−2.5 points, p 4e-7) and not at R@100 (−0.7, p 0.29). "
        "Its seeds disagree in sign against BiBERT's (R@100 0.4856 / 0.6233 / 0.5706 against 0.5917 / "
        "0.5634 / 0.5447)",
        (
            Paired("madral", "bibert", R500, "−2.5", "4e-7"),
            Paired("madral", "bibert", R100, "−0.7", "0.29"),
            SeedMeans("madral", R100, "0.4856 / 0.6233 / 0.5706"),
            SeedMeans("bibert", R100, "0.5917 / 0.5634 / 0.5447"),
        ),
    ),
    Claim(
        "+3.0 points on MADRAL-ori (p 3e-37, ahead on each seed: 0.5301 / 0.6426 / 0.5965) and +2.3 on "
        "BiBERT",
        (
            Paired("madral-en-v1", "madral", R100, "+3.0", "3e-37"),
            SeedMeans("madral-en-v1", R100, "0.5301 / 0.6426 / 0.5965"),
            Paired("madral-en-v1", "bibert", R100, "+2.3"),
        ),
    ),
    Claim(
        "−2.1 points (p 0.003 before Holm, not marked after) and −6.3",
        (
            Paired("madral-en-v2", "bibert", R100, "−2.1", "0.003"),
            NotMarked(("madral-en-v2",), ("R@100",), "↓"),
            Paired("madral-en-v2", "bibert", R500, "−6.3"),
        ),
    ),
    Claim(
        "+5.7 points on BiBERT (p 6e-25), +6.4 on MADRAL-ori, +3.4 on en-v1 (p 3.5e-12)",
        (
            Paired("no-fusion", "bibert", R100, "+5.7", "6e-25"),
            Paired("no-fusion", "madral", R100, "+6.4"),
            Paired("no-fusion", "madral-en-v1", R100, "+3.4", "3.5e-12"),
        ),
    ),
    Claim(
        "−6.7 points (p 1e-29), R@500 −7.2, each seed below BiBERT's (0.5288 / 0.4793 / 0.4903); ahead of it "
        "only at NDCG@5 (↑, +1.1 points)",
        (
            Paired("mural", "bibert", R100, "−6.7", "1e-29"),
            Paired("mural", "bibert", R500, "−7.2"),
            SeedMeans("mural", R100, "0.5288 / 0.4793 / 0.4903"),
            Paired("mural", "bibert", "ndcg@5", "+1.1"),
        ),
    ),
    Claim(
        "+13.2 points of R@100 pooled (p 6e-107), −0.4 at R@10k (p 0.07)",
        (Paired("mural", "mur", R100, "+13.2", "6e-107"), Paired("mural", "mur", R10K, "−0.4", "0.07")),
    ),
    Claim("(R@100 0.2707 / 0.3761 / 0.4556)", (SeedMeans("mur", R100, "0.2707 / 0.3761 / 0.4556"),)),
    Claim(
        "(+9.9 and +6.2 points, p 3e-43 and 3e-34) and not marked against zero-shot (+1.4, p 0.05; +0.9, p "
        "0.085; its seeds 0.6406 / 0.6900 / 0.6653 at R@100)",
        (
            Paired("uhd", "bibert", R100, "+9.9", "3e-43"),
            Paired("uhd", "bibert", R500, "+6.2", "3e-34"),
            Paired("uhd", ZERO_SHOT, R100, "+1.4", "0.05"),
            Paired("uhd", ZERO_SHOT, R500, "+0.9", "0.085"),
            SeedMeans("uhd", R100, "0.6406 / 0.6900 / 0.6653"),
        ),
    ),
    Claim(
        "Against MURAL-CONCAT: level at R@100 (−0.4, p 0.58), +1.4 at R@500 (p 0.003), −9.2 at NDCG@10",
        (
            Paired("uhd", "mural-concat", R100, "−0.4", "0.58"),
            Paired("uhd", "mural-concat", R500, "+1.4", "0.003"),
            Paired("uhd", "mural-concat", NDCG10, "−9.2"),
        ),
    ),
)

# The cost bullet under the main table: each variant's per-seed minutes, from the archived stage times.
COST = (
    ("bibert", "13.1-14.6"),
    ("dssm", "1.0"),
    ("condenser", "13.8-16.6"),
    ("mpbert", "8.2-11.9"),
    ("mtbert", "13.2-28.8"),
    ("bibert-concat", "9.7-11.1"),
    ("madr", "10.6-12.2"),
    ("madral", "15.5-25.3"),
    ("madral-en-v1", "10.7-12.5"),
    ("madral-en-v2", "10.9-13.0"),
    ("no-fusion", "13.5-17.9"),
    ("mural", "13.6-15.6"),
    ("mural-concat", "15.5-15.9"),
    ("mur", "13.9-14.5"),
    ("uhd", "19.5-20.5"),
    (ZERO_SHOT, "11.2"),
)
COST_CLAIMS: tuple[Claim, ...] = (
    Claim(
        "BiBERT 13.1-14.6 minutes (embedding 60,000 in fp32 about 7.5 of them), DSSM 1.0, Condenser "
        "13.8-16.6, MpBERT 8.2-11.9, MtBERT 13.2-28.8",
        tuple(SeedMinutes(variant, text) for variant, text in COST[:5]),
    ),
    Claim(
        "BiBERT-CONCAT 9.7-11.1, MADR 10.6-12.2, MADRAL 15.5-25.3",
        tuple(SeedMinutes(variant, text) for variant, text in COST[5:8]),
    ),
    Claim(
        "en-v1 10.7-12.5, en-v2 10.9-13.0, no-fusion 13.5-17.9, MURAL 13.6-15.6, MURAL-CONCAT 15.5-15.9, MUR "
        "13.9-14.5, UHD-BERT 19.5-20.5",
        tuple(SeedMinutes(variant, text) for variant, text in COST[8:15]),
    ),
    Claim("zero-shot 11.2 (one run)", (SeedMinutes(ZERO_SHOT, "11.2"),)),
)
