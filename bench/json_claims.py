"""Figures README.md and docs/ quote from a committed benchmark result (bench/results/<name>.json),
recomputed from that file: each `JsonFigure` is a fragment of a sentence (quoted word for word), the figure
it quotes, and how to compute that figure from the result. The distractor table of docs/RESULTS.md is
rendered again from its result and compared row by row. `bench.results_claims` runs both.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from bench.results_table import table_body
from bench.store_claims import NOT_IN_DOCUMENT

RESULTS = Path("bench/results")


@cache
def _result(folder: Path, name: str) -> dict[str, Any]:
    return json.loads((folder / f"{name}.json").read_text())


@dataclass(frozen=True)
class JsonFigure:
    """`text`, quoted in `says` of `document`, is `render(figures of bench/results/<result>.json)`."""

    document: str
    says: str
    result: str
    text: str
    render: Callable[[dict[str, Any]], str]

    def failure(self, markdown: str, folder: Path = RESULTS) -> str | None:
        if " ".join(self.says.split()) not in " ".join(markdown.split()):
            return NOT_IN_DOCUMENT
        if self.text not in self.says:
            return f"{self.text!r} is not in the quoted sentence"
        found = self.render(_result(folder, self.result)["figures"])
        return None if found == self.text else f"quotes {self.text}; {self.result}.json gives {found}"


def _p(value: float) -> str:
    return f"{value:.2g}"


def _range(values: list[float]) -> tuple[float, float]:
    return min(values), max(values)


# The fused systems of `bench.fusion_ablation`, against the BM25 + zero-shot hybrid, on NDCG@10.
def _fused(figures: dict[str, Any]) -> list[dict[str, Any]]:
    return [row for name, row in figures["systems"].items() if name.startswith("bm25+model")]


def _fusion_range(figures: dict[str, Any]) -> str:
    rows = _fused(figures)
    points = sorted(row["ndcg@10 vs hybrid"] for row in rows)
    pvalues = sorted(row["ndcg@10 p"] for row in rows)
    return (
        f"+{points[0]:.1f} to +{points[-1]:.1f} points over the hybrid "
        f"(p {_p(pvalues[-1])} to {_p(pvalues[0])})"
    )


FUSION_RANGE = (
    "the RRF constant from 10 to 100 and each ranking cut at 100, 1,000 or all before fusing give NDCG@10 "
    "+2.4 to +3.1 points over the hybrid (p 0.0071 to 0.00095)"
)
SHIPPED_FUSION = "bm25+model (k 60, 100)"


def _serving(k: str, key: str, fmt: str) -> Callable[[dict[str, Any]], str]:
    return lambda figures: fmt.format(figures["summary"][f"k={k}"][key])


SERVING = (
    "the artifact `madr build-index` tunes per depth answered k = 10 at recall 0.956 with 28,486 queries/s "
    "(medians of its timed rounds: 82.83x exact scoring, 0.99x the best FAISS setting, 1.03x the best "
    "hand-swept setting of the same ScaNN tree) and k = 100 at 0.9613 with 11,182 (36.15x, 1.19x, 0.89x)"
)


JSON_FIGURES: tuple[JsonFigure, ...] = (
    JsonFigure(
        "docs/RESULTS.md", FUSION_RANGE, "fusion_ablation", FUSION_RANGE.split("NDCG@10 ")[1], _fusion_range
    ),
    JsonFigure(
        "docs/RESULTS.md",
        "the shipped setting (k 60, 100 deep, as `ScannIndex.search_hybrid` fuses) is +2.6 (p 0.0031)",
        "fusion_ablation",
        "+2.6 (p 0.0031)",
        lambda f: (
            f"+{f['systems'][SHIPPED_FUSION]['ndcg@10 vs hybrid']:.1f} "
            f"(p {_p(f['systems'][SHIPPED_FUSION]['ndcg@10 p'])})"
        ),
    ),
    *(
        JsonFigure("README.md", SERVING, "serving_finals", text, _serving(k, key, fmt))
        for k, key, fmt, text in (
            ("10", "madr_recall", "{:.3f}", "0.956"),
            ("10", "madr_qps", "{:,.0f}", "28,486"),
            ("10", "over_exact", "{}x", "82.83x"),
            ("10", "over_best_faiss", "{}x", "0.99x"),
            ("10", "over_best_scann_sweep", "{}x", "1.03x"),
            ("100", "madr_recall", "{}", "0.9613"),
            ("100", "madr_qps", "{:,.0f}", "11,182"),
            ("100", "over_exact", "{}x", "36.15x"),
            ("100", "over_best_faiss", "{}x", "1.19x"),
            ("100", "over_best_scann_sweep", "{}x", "0.89x"),
        )
    ),
)


def _benchmark_delta(metric: str) -> Callable[[dict[str, Any]], str]:
    def render(figures: dict[str, Any]) -> str:
        rows = figures["rows"]["benchmark"]
        pvalues = sorted(row[f"p_{metric}"] for row in rows)
        points = 100 * statistics.mean(row[f"delta_{metric}"] for row in rows)
        return f"{points:+.1f} points (p {_p(pvalues[0])} to {_p(pvalues[-1])})"

    return render


def _benchmark_mean(metric: str, decimals: int) -> Callable[[dict[str, Any]], str]:
    def render(figures: dict[str, Any]) -> str:
        values = [row[metric] for row in figures["rows"]["benchmark"]]
        return f"{statistics.mean(values):.{decimals}f} ± {statistics.stdev(values):.{decimals}f}"

    return render


def _refit_category(figures: dict[str, Any]) -> str:
    return " / ".join(f"{seed['after']['accuracy']['category']:.3f}" for seed in figures.values())


ZERO_SHOT_SEEDS = (
    "Recall@100 +1.5 points (p 0.0024 to 0.0054), NDCG@10 +8.5 points (p < 1e-19), with held-out Accuracy@1 "
    "category 0.921 / 0.931 / 0.918"
)
README_ZERO_SHOT = (
    "the shipped model has Recall@100 0.952 ± 0.000 against zero-shot's 0.937 (p 0.002-0.005 per seed) and "
    "NDCG@10 0.359 ± 0.002 against 0.274 (p < 1e-19), held-out Accuracy@1 0.921 / 0.931 / 0.918 category"
)
JSON_FIGURES += (
    JsonFigure(
        "docs/RESULTS.md",
        ZERO_SHOT_SEEDS,
        "zero_shot",
        "+1.5 points (p 0.0024 to 0.0054)",
        _benchmark_delta("recall@100"),
    ),
    JsonFigure(
        "docs/RESULTS.md",
        ZERO_SHOT_SEEDS,
        "zero_shot",
        "+8.5 points",
        lambda f: _benchmark_delta("ndcg@10")(f).split(" (")[0],
    ),
    JsonFigure(
        "docs/RESULTS.md",
        ZERO_SHOT_SEEDS,
        "zero_shot",
        "p < 1e-19",
        lambda f: "p < 1e-19" if max(r["p_ndcg@10"] for r in f["rows"]["benchmark"]) < 1e-19 else "p ≥ 1e-19",
    ),
    JsonFigure("docs/RESULTS.md", ZERO_SHOT_SEEDS, "head_refit", "0.921 / 0.931 / 0.918", _refit_category),
    JsonFigure("README.md", README_ZERO_SHOT, "zero_shot", "0.952 ± 0.000", _benchmark_mean("recall@100", 3)),
    JsonFigure("README.md", README_ZERO_SHOT, "zero_shot", "0.359 ± 0.002", _benchmark_mean("ndcg@10", 3)),
    JsonFigure(
        "README.md",
        README_ZERO_SHOT,
        "zero_shot",
        "0.937",
        lambda f: f"{f['rows']['benchmark'][0]['zero_shot_recall@100']:.3f}",
    ),
    JsonFigure(
        "README.md",
        README_ZERO_SHOT,
        "zero_shot",
        "0.274",
        lambda f: f"{f['rows']['benchmark'][0]['zero_shot_ndcg@10']:.3f}",
    ),
    JsonFigure(
        "README.md",
        README_ZERO_SHOT,
        "zero_shot",
        "p 0.002-0.005",
        lambda f: "p {:.1g}-{:.1g}".format(*_range([r["p_recall@100"] for r in f["rows"]["benchmark"]])),
    ),
    JsonFigure("README.md", README_ZERO_SHOT, "head_refit", "0.921 / 0.931 / 0.918", _refit_category),
)


README_STORE = (
    "shipped model is level with zero-shot (Recall@100 0.958 vs 0.967, NDCG@10 0.785 vs 0.802, p ≥ 0.18 in "
    "each seed) and after `madr adapt` (no judgments) higher on both (0.993 and 0.830), not significantly (p "
    "0.017-0.27 per seed)"
)


def _store_pvalues(figures: dict[str, Any], name: str) -> list[float]:
    """Every seed's p-value of Recall@100 and NDCG@10 against zero-shot on the store export, sorted."""
    return sorted(row[f"p_{m}"] for row in figures["rows"][name] for m in ("recall@100", "ndcg@10"))


JSON_FIGURES += (
    JsonFigure(
        "README.md",
        README_STORE,
        "zero_shot",
        "p ≥ 0.18",
        # A lower bound is rounded down: the smallest p, 0.186, is not "≥ 0.19".
        lambda f: f"p ≥ {math.floor(100 * min(_store_pvalues(f, 'store, shipped model'))) / 100}",
    ),
    JsonFigure(
        "README.md",
        README_STORE,
        "zero_shot",
        "0.017-0.27",
        lambda f: "-".join(_p(p) for p in _range(_store_pvalues(f, "store, adapted"))),
    ),
)


def compare_rows(
    markdown: str, header: str, expected: dict[tuple[str, ...], list[str]], source: str
) -> list[str]:
    """Each row of the document's table under `header` (keyed by its first len(key) cells) whose other
    cells differ from `expected`, or that one of them lacks or adds."""
    body = table_body(markdown, header)
    if body is None:
        return [f"the table `{header}` is not in the document"]
    width = len(next(iter(expected)))
    written = {tuple(row[:width]): row[width:] for row in body}
    problems = [f"{' / '.join(key)}: not in {source}" for key in written.keys() - expected.keys()]
    for key, cells in expected.items():
        mine = written.get(key)
        if mine != cells:
            problems.append(f"{' / '.join(key)}: written {mine}, {source} gives {cells}")
    return problems


def distractor_differences(markdown: str, folder: Path = RESULTS) -> list[str]:
    """The distractor section's two tables of docs/RESULTS.md, rendered again from distractor_recall.json:
    each model's recall with and without the distractors, and its difference from zero-shot (Holm p)."""
    figures = _result(folder, "distractor_recall")["figures"]
    cutoffs = ("recall@100", "recall@1000", "recall@10000")
    recall = {
        (variant, setting): [f"{row['products']:,}", *(f"{row[m]:.4f}" for m in cutoffs)]
        for variant, settings in figures.items()
        if variant != "vs zero-shot, with distractors"
        for setting, row in settings.items()
    }
    against = {
        (variant,): [f"{metrics[m]['delta']:+.4f} (p {_p(metrics[m]['p_holm'])})" for m in cutoffs]
        for variant, metrics in figures["vs zero-shot, with distractors"].items()
    }
    source = "distractor_recall.json"
    return compare_rows(markdown, "| variant | catalog | products |", recall, source) + compare_rows(
        markdown, "| variant − zero-shot, with distractors |", against, source
    )


def gap_fill_differences(markdown: str, folder: Path = RESULTS) -> list[str]:
    """The gap-filling table of docs/RESULTS.md ("The shipped model: annotations that fill the catalog's
    gaps"), rendered again from gap_fill.json: coverage and precision per aspect and threshold."""
    expected = {}
    for threshold, aspects in _result(folder, "gap_fill")["figures"]["fill"].items():
        label = f"{threshold} (default)" if threshold == "0.5" else threshold
        cells = [
            f"{aspects[a][k]:.3f}" for a in ("category", "brand", "color") for k in ("coverage", "precision")
        ]
        expected[(label,)] = cells
    return compare_rows(markdown, "| min_confidence | category coverage |", expected, "gap_fill.json")


# RESULTS.md's zero-shot table ("Three seeds, the benchmark and a catalog the generator never made"): its
# rows by (catalog, model) as the document writes them, and the zero_shot.json rows each rests on.
ZERO_SHOT_TABLE = "| catalog | model | Recall@100 |"
ZERO_SHOT = "zero-shot (MiniLM, mean pooling, untrained)"
ZERO_SHOT_ROWS = {
    ("synthetic benchmark (600 test queries)", "shipped recipe"): "benchmark",
    ("store export (40 queries)", "shipped model, not adapted"): "store, shipped model",
    ("store export (40 queries)", "after `madr adapt` (no judgments)"): "store, adapted",
}


def _mean_sd(values: list[float], sign: str = "") -> str:
    return f"{statistics.mean(values):{sign}.4f} ± {statistics.stdev(values):.4f}"


def _accuracy_cell(accuracies: list[dict[str, float]]) -> str:
    """Category / brand / color Acc@1 over the seeds, each mean ± sd."""
    return " / ".join(_mean_sd([a[aspect] for a in accuracies]) for aspect in ("category", "brand", "color"))


def zero_shot_cells(rows: list[dict[str, Any]], refit: dict[str, Any] | None = None) -> list[str]:
    """One model's cells over its seeds: each metric's mean ± sd, its difference from zero-shot with
    each seed's p, and Acc@1 category / brand / color (with `refit`: the refitted heads', then the heads'
    before the refit in brackets)."""
    cells = []
    for metric in ("recall@100", "ndcg@10"):
        cells.append(_mean_sd([row[metric] for row in rows]))
        pvalues = ", ".join(_p(row[f"p_{metric}"]) for row in rows)
        cells.append(f"{_mean_sd([row[f'delta_{metric}'] for row in rows], '+')} ({pvalues})")
    before = [row["accuracy@1"] for row in rows]
    if refit is None:
        return [*cells, _accuracy_cell(before)]
    after = _accuracy_cell([seed["after"]["accuracy"] for seed in refit.values()])
    before_cell = " / ".join(
        part.removesuffix(" ± 0.0000") if aspect == "color" else part
        for aspect, part in zip(
            ("category", "brand", "color"), _accuracy_cell(before).split(" / "), strict=True
        )
    )
    return [*cells, f"{after} (before the head refit: {before_cell})"]


def zero_shot_differences(markdown: str, folder: Path = RESULTS) -> list[str]:
    """Cells of the document's zero-shot table that zero_shot.json (and head_refit.json for the refitted
    heads' accuracy) renders otherwise."""
    rows = _result(folder, "zero_shot")["figures"]["rows"]
    refit = _result(folder, "head_refit")["figures"]
    expected = {
        key: zero_shot_cells(rows[name], refit if name == "benchmark" else None)
        for key, name in ZERO_SHOT_ROWS.items()
    }
    for catalog, name in (
        ("synthetic benchmark (600 test queries)", "benchmark"),
        ("store export (40 queries)", "store, shipped model"),
    ):
        first = rows[name][0]  # zero-shot is untrained: the same figures beside every seed
        recall, ndcg = f"{first['zero_shot_recall@100']:.4f}", f"{first['zero_shot_ndcg@10']:.4f}"
        expected[(catalog, ZERO_SHOT)] = [recall, "–", ndcg, "–", "–"]
    return compare_rows(markdown, ZERO_SHOT_TABLE, expected, "zero_shot.json and head_refit.json")


ADAPT_DEFAULTS = (
    "the whole command took 19.0 minutes on a later 2-core machine with bf16, its first steps on cores "
    "shared with other work, and over those products the adapted model's NDCG@10 was +7.9 points above "
    "zero-shot's (p 9.9e-12) and +4.6 above BM25 + zero-shot's (p 0.00012)"
)
ADAPT_TIMES = (
    "it took 6.2 minutes for 1,000 generator products, 18.0 for 10,000 and 24.8 for 100,000 on a 2-core "
    "AVX2 machine without bf16"
)
ADAPT_BUDGET = (
    "on 100,000 generator products it took 9,600 of 94,941 across 6,752 category/brand groups and finished "
    "in 18.7 minutes with `--evaluation none`, held-out Acc@1 0.965 / 0.940 / 0.843"
)
JSON_FIGURES += tuple(
    JsonFigure("README.md", ADAPT_BUDGET, "adapt_budget_100k", text, render)
    for text, render in (
        ("9,600 of 94,941", lambda f: f"{f['sampled_products']:,} of {f['training_products']:,}"),
        ("6,752", lambda f: f"{f['groups']:,}"),
        ("18.7 minutes", lambda f: f"{f['adapt_wall_s'] / 60:.1f} minutes"),
        (
            "0.965 / 0.940 / 0.843",
            lambda f: " / ".join(
                f"{f['held_out_accuracy@1'][a]:.3f}" for a in ("category", "brand", "color")
            ),
        ),
    )
)


README_EMBED_PEERS = (
    "on an AVX-512 bf16 CPU (2 Dec, the demo model) fp32 1.97× its torch `encode` and 1.22× its ONNX Runtime "
    "backend (1.27× its O3-optimised graph), auto's bf16 2.50× torch"
)
README_STAGE_COST = (
    "is now 69 µs a product with a negligible model, from 101 batched with each row validated as a dict "
    "(same machine, same day) and 179 before batching"
)


def _own_work(profile: dict[str, Any]) -> int:
    return profile["steady_us_per_product"] - profile["us_per_product"].get("encode", 0)


JSON_FIGURES += (
    *(
        JsonFigure("README.md", README_EMBED_PEERS, "embed_cpu_peers", text, render)
        for text, render in (
            ("fp32 1.97×", lambda f: f"fp32 {f['madr_fp32']['whole_vs_torch']:.2f}×"),
            ("1.22×", lambda f: f"{f['madr_fp32']['whole_vs_onnx']:.2f}×"),
            ("1.27×", lambda f: f"{f['madr_fp32']['whole_vs_onnx_O3']:.2f}×"),
            (
                "bf16 2.50×",
                lambda f: f"{f['auto_picks']['precision']} {f['madr_auto']['whole_vs_torch']:.2f}×",
            ),
        )
    ),
    JsonFigure(
        "README.md",
        README_STAGE_COST,
        "embed_stage_cost",
        "69 µs",
        lambda f: f"{_own_work(f['madr_profile'])} µs",
    ),
    JsonFigure(
        "README.md",
        README_STAGE_COST,
        "embed_stage_cost_columnar_before",
        "from 101",
        lambda f: f"from {_own_work(f['madr_profile'])}",
    ),
    JsonFigure(
        "README.md",
        README_STAGE_COST,
        "embed_stage_cost_before",
        "179 before",
        lambda f: f"{_own_work(f['madr_profile'])} before",
    ),
)

JSON_FIGURES += tuple(
    JsonFigure("README.md", ADAPT_DEFAULTS, "adapt_defaults_100k", text, render)
    for text, render in (
        ("19.0 minutes", lambda f: f"{f['command_wall_s'] / 60:.1f} minutes"),
        ("+7.9 points", lambda f: f"{100 * f['against_zero_shot']['ndcg@10']['delta']:+.1f} points"),
        ("p 9.9e-12", lambda f: f"p {f['against_zero_shot']['ndcg@10']['p']:.1e}".replace("e-0", "e-")),
        ("+4.6 above", lambda f: f"{100 * f['against_bm25_zero_shot']['ndcg@10']['delta']:+.1f} above"),
        ("p 0.00012", lambda f: f"p {f['against_bm25_zero_shot']['ndcg@10']['p']:.5f}"),
    )
)


def _adapt_minutes(size: str) -> Callable[[dict[str, Any]], str]:
    return lambda f: f"{f[size]['adapt_wall_s'] / 60:.1f}"


JSON_FIGURES += tuple(
    JsonFigure("README.md", ADAPT_TIMES, "adapt_catalog_times", text, render)
    for text, render in (
        ("6.2 minutes", lambda f: f"{_adapt_minutes('1000')(f)} minutes"),
        ("18.0 for 10,000", lambda f: f"{_adapt_minutes('10000')(f)} for 10,000"),
        ("24.8 for 100,000", lambda f: f"{_adapt_minutes('100000')(f)} for 100,000"),
    )
)
