"""The results table of `madr experiment`, as Markdown."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from evaluation.collapse import COLLAPSED_COSINE, is_collapsed
from evaluation.significance import SIGNIFICANCE
from schemas import ECOMMERCE_ASPECTS

COLUMNS = (
    ("recall@100", "R@100"),
    ("recall@500", "R@500"),
    ("recall@10000", "R@10k"),
    ("ndcg@5", "NDCG@5"),
    ("ndcg@10", "NDCG@10"),
    ("ndcg@50", "NDCG@50"),
    ("auc", "AUC"),
)
COLLAPSED = "†"  # after the variant's name: its embeddings collapsed (`evaluation.collapse`)


def _mark(value: float, pvalue: float, other: float | None, up: str, down: str) -> str:
    # `not p < α` rather than `p >= α`: a nan p-value (every per-query difference 0) marks nothing.
    if other is None or not pvalue < SIGNIFICANCE:
        return ""
    return up if value > other else down


def _cell(
    means: dict[str, float],
    pvalues: dict[str, float],
    baseline: dict[str, float],
    key: str,
    zero_shot: tuple[dict[str, float], dict[str, float]] | None = None,
    sd: dict[str, float] | None = None,
) -> str:
    """The mean (± its sd over training seeds, when there are several), marked ↑ or ↓ when it differs
    from the baseline's with p < 0.01, and ▲ or ▼ when it differs so from the zero-shot backbone's
    (`zero_shot`: its means, and this row's p-values against it)."""
    value = means.get(key)
    if value is None or math.isnan(value):
        return "–"
    spread = f" ± {sd[key]:.4f}" if sd and key in sd else ""
    mark = _mark(value, pvalues.get(key, 1.0), baseline.get(key), " ↑", " ↓")
    if zero_shot is not None:
        zero_means, zero_pvalues = zero_shot
        mark += _mark(value, zero_pvalues.get(key, 1.0), zero_means.get(key), " ▲", " ▼")
    return f"{value:.4f}{spread}{mark}"


def _accuracy(accuracy: dict[str, Any] | None, aspects: tuple[str, ...], key: str = "accuracy") -> str:
    if not accuracy or not accuracy.get(key):
        return "–"
    return " / ".join(f"{accuracy[key][a]:.3f}" if a in accuracy[key] else "–" for a in aspects)


def _sparse_table(summary: dict[str, Any]) -> list[str]:
    """Variants retrieved through inverted indexes (uhd-bert §3.7): recall beside index size and time."""
    rows = [
        (variant, name, index)
        for variant, result in summary.items()
        for name, index in (result.get("sparse_indexes") or {}).items()
    ]
    if not rows:
        return []
    keys = {key for _, _, index in rows for key in index["means"] if key.startswith("recall@")}
    recalls = sorted(keys, key=lambda key: int(key.split("@")[1]))
    header = ["variant", "inverted index", *(f"R@{key.split('@')[1]}" for key in recalls)]
    header += ["size (MiB)", "postings", "query ms (search)", "query ms (encode)"]
    lines = [
        "",
        "Inverted-index retrieval (uhd-bert §3.7): binary = binarized documents and queries, the score "
        "counts shared winners (§3.4); weighted = bucket values kept, the score is Eq. 7. The main "
        "table's R@k for these variants is the binary index's. Size: every file of the index on disk; "
        "search: one query per call; encode: per query, in batches.",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
    ]
    for variant, name, index in rows:
        cells = [_cell(index["means"], {}, {}, key) for key in recalls]
        costs = [
            f"{index['size_bytes'] / 2**20:.1f}",
            f"{index['postings']:,}",
            f"{index['query_ms']:.2f}",
            f"{index['encode_ms']:.2f}",
        ]
        lines.append("| " + " | ".join([variant, name, *cells, *costs]) + " |")
    return lines


def _collapsed_note(summary: dict[str, Any]) -> list[str]:
    """The footnote of the rows marked collapsed (`evaluation.collapse`), with each one's cosine."""
    collapsed = [
        f"{variant} {result['document_cosine']:.3f}"
        for variant, result in summary.items()
        if is_collapsed(result.get("document_cosine"))
    ]
    if not collapsed:
        return []
    return [
        "",
        f"{COLLAPSED} collapsed: the documents' embeddings have a mean pairwise cosine of at least "
        f"{COLLAPSED_COSINE} ({', '.join(collapsed)}): every product maps to nearly one vector, so the row "
        "measures the collapse of this backbone under the variant's settings, not the method.",
    ]


def write_report(report: dict[str, Any], path: Path) -> str:
    """Write the table (means; ↑ / ↓ = Holm-adjusted paired t-test p < 0.01 against the baseline)."""
    config, summary = report["config"], report["summary"]
    aspects = ECOMMERCE_ASPECTS  # the experiment's models are trained on the default aspects (EncoderJob)
    header = [
        "variant",
        *(label for _, label in COLUMNS),
        f"Acc@1 queries ({'/'.join(aspects)})",
        "Acc@1 held-out products",
        "Acc@3 held-out products",
    ]
    lines = [
        f"Retrieval (R@k through the ScaNN index, or the inverted index of a sparse variant; "
        f"{config['num_products']:,} products) and the ranking task "
        f"(NDCG, AUC: each test query re-ranks its judged products), on "
        + (
            f"{config['test_queries']:,} synthetic test queries"
            if config.get("test_queries")
            else f"the test split of {config['num_queries']} synthetic queries"
        )
        + (
            f"; mean ± sd over {config['seeds']} training seeds, tests on per-query means pooled over them"
            if config.get("seeds", 1) > 1
            else ""
        )
        + f". ↑ / ↓: better / worse than {config['baseline']} "
        f"with p < {SIGNIFICANCE} in a paired t-test over the test queries, Holm-adjusted over every "
        "comparison the table marks; ▲ / ▼: the same against zero-shot (the bundled MiniLM, mean "
        "pooling, untrained), adjusted over its own comparisons.",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
    ]
    for variant, result in summary.items():
        baseline = summary[config["baseline"]]["means"]
        zero = summary.get("zero-shot")
        # Holm-adjusted p-values; a results.json from before the adjustment has only the raw ones.
        pvalues = result.get("pvalues_holm", result["pvalues"])
        zero_pvalues = result.get("pvalues_zero_shot_holm", result.get("pvalues_zero_shot")) or {}
        against = (zero["means"], zero_pvalues) if zero and zero is not result else None
        sd = result.get("sd") if result.get("seeds", 1) > 1 else None
        cells = [_cell(result["means"], pvalues, baseline, key, against, sd) for key, _ in COLUMNS]
        accuracy = [
            _accuracy(result["query_accuracy"], aspects),
            _accuracy(result["product_accuracy"], aspects),
            _accuracy(result["product_accuracy"], aspects, "accuracy_at_3"),
        ]
        label = f"{variant} {COLLAPSED}" if is_collapsed(result.get("document_cosine")) else variant
        lines.append("| " + " | ".join([label, *cells, *accuracy]) + " |")
    lines += _collapsed_note(summary)
    lines += _sparse_table(summary)
    power = report.get("power")
    if power:
        lines += [
            "",
            f"Power: per-query differences from {config['baseline']} in {power['metric']} have a median sd "
            f"of {power['difference_sd']:.3f}; over {power['queries']} test queries a paired test detects "
            f"{100 * power['detectable']:.1f} points at 80 % power after Holm's correction over "
            f"{power['tests']} comparisons; {100 * power['target']:.0f} points would need "
            f"{power['queries_for_target']:,} test queries.",
        ]
        closest = power.get("closest")  # results.json files written before it have none
        if closest:
            lines[-1] += (
                f" The comparison of smallest sd ({closest['variant']}, {closest['difference_sd']:.3f}) "
                f"detects {100 * closest['detectable']:.1f} points."
            )
    lines += ["", f"Wall time: {report['wall_seconds'] / 60:.1f} minutes."]
    markdown = "\n".join(lines) + "\n"
    path.write_text(markdown)
    return markdown
