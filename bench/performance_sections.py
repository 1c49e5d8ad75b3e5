"""The docs/PERFORMANCE.md sections of the benchmarks whose own module does not render one
(`bench.performance_doc` lists every section and renders the document)."""

from __future__ import annotations

from typing import Any

from bench.common import table

PLOT = "performance_recall_qps.png"  # docs/, next to the document


def embed_section(r: dict[str, Any]) -> str:
    f, c = r["figures"], r["config"]
    rows = [
        ["plain torch loop (ceiling)", f["plain_torch_products_per_s"], 1.0],
        ["Beam embed, in-memory runner", f["beam_in_memory_products_per_s"], f["beam_in_memory_vs_plain"]],
        [
            "Beam embed, multi-processing ×2",
            f["beam_multi_processing_2_products_per_s"],
            f["beam_multi_processing_2_vs_plain"],
        ],
    ]
    note = f"{c['products']} products, batch {c['batch_size']}, max length {c['max_document_length']}."
    return table(["path", "products/s", "vs plain loop"], rows) + "\n\n" + note


def bucketing_section(r: dict[str, Any]) -> str:
    f, c = r["figures"], r["config"]
    rows = [
        [
            mix,
            m["texts"],
            m["mean_tokens"],
            m["naive_texts_per_s"],
            m["bucketed_texts_per_s"],
            m["bucketed_vs_naive"],
            m.get("globally_sorted_vs_naive"),
        ]
        for mix, m in f["bucketing"].items()
    ]
    head = ["mix", "texts", "mean tokens", "naive texts/s", "bucketed texts/s", "bucketed vs naive"]
    out = table([*head, "globally sorted vs naive"], rows)
    q_rows = [
        [
            name,
            q["products_per_s"],
            q["speed_vs_torch_fp32"],
            q["mean_cosine_vs_torch_fp32"],
            q["recall@100"],
            q["recall@100_change_points"],
        ]
        for name, q in f["quantization"].items()
    ]
    q_head = ["inference", "products/s", "vs torch fp32", "mean cosine vs fp32", "Recall@100", "Δ points"]
    return (
        out + f"\n\nModel: {c['model_dir']}; batch {c['batch_size']}, max length {c['max_document_length']}, "
        f"torch threads: {c['torch_threads']}.\n\n"
        + table(q_head, q_rows)
        + f"\n\n{c['products']} products, Recall@100 over {c['test_queries']} test queries, exact search."
    )


def index_section(r: dict[str, Any]) -> str:
    f, c = r["figures"], r["config"]

    def at(result: dict[str, Any], target: str) -> str | None:
        best = result[f"at_recall_{target}"]
        if not best:
            return None
        knobs = ", ".join(f"{k}={v}" for k, v in best.items() if k not in ("qps", "recall@10"))
        return f"{best['qps']:,.0f} ({knobs}; r={best['recall@10']})"

    rows = [
        ["exact (madr ExactSearcher)", None, None, None, f"{f['exact_qps']:,.0f}", f"{f['exact_qps']:,.0f}"]
    ]
    for name, result in f["indexes"].items():
        rows.append(
            [
                name,
                result["build_s"] or "(same build)",
                result["build_peak_rss_delta_mb"] or None,
                result["retained_rss_delta_mb"] or None,
                at(result, "0.90"),
                at(result, "0.95"),
            ]
        )
    head = ["index", "build s", "build peak RSS Δ MB", "retained RSS Δ MB", "QPS @ recall@10 ≥ 0.90"]
    return (
        table([*head, "QPS @ recall@10 ≥ 0.95"], rows)
        + f"\n\n{c['n']:,} × {c['dim']} vectors, {c['queries']} queries, k = 10. Data: {c['data']}."
        + (f"\n\n![recall@10 against queries/s per index]({PLOT})" if f.get("plot") else "")
    )


def recall10k_section(r: dict[str, Any]) -> str:
    f, c = r["figures"], r["config"]
    recalls = f["index_recall_vs_exact"]
    rows = [
        ["exact (ExactSearcher)", f["exact_search_s"], f["exact_search_peak_rss_delta_mb"], 1.0, "1.0"],
        [
            "index, for_corpus settings"
            + (" (brute force by the rule)" if f["index_is_brute_force"] else ""),
            f["index_search_s"],
            f["index_search_peak_rss_delta_mb"],
            f["index_vs_exact_speed"],
            ", ".join(f"{k}={v}" for k, v in recalls.items()),
        ],
    ]
    labels = {
        "previous_rule": "index, the rule before issue 5",
        "2x_leaves": "index, twice the leaves",
        "2x_reorder": "index, twice the re-ranking",
    }
    for name, label in labels.items():
        if name in f:
            v = f[name]
            recall = ", ".join(f"{k}={x}" for k, x in v.items() if k.startswith("recall"))
            depth = v.get("pre_reorder_num_neighbors")
            rows.append(
                [
                    f"{label} ({v.get('leaves_to_search')} leaves"
                    + (f", {depth:,} re-ranked)" if depth else ")"),
                    v["search_s"],
                    None,
                    v["vs_exact_speed"],
                    recall,
                ]
            )
    return (
        table(["search", "seconds", "peak RSS Δ MB", "speed vs exact", "recall vs exact"], rows)
        + f"\n\n{c['queries']:,} queries × {c['n']:,} vectors, k = 10,000; "
        f"index build {f['index_build_s']} s. "
        f"Leaves searched at k: {c['search_leaves_at_k']}, reorder {c['search_reorder_at_k']}."
    )


def scaling_section(r: dict[str, Any]) -> str:
    f, c = r["figures"], r["config"]
    rows = []
    for size, row in f["per_size"].items():
        rows.append(
            [
                int(size),
                *[
                    x
                    for s in ("embed", "index", "evaluate")
                    for x in (row[s]["seconds"], row[s]["peak_rss_mb"])
                ],
            ]
        )
    for row, size in zip(rows, f["per_size"], strict=True):
        measured = f["per_size"][size]["index"].get("recall") or {}
        row.insert(1, f["per_size"][size].get("products_per_s_embed"))
        row.insert(6, measured.get("recall_at_k"))
    head = ["products", "embed products/s", "embed s", "embed peak MB", "index s", "index peak MB"]
    head += ["index recall@max_k", "evaluate s", "eval peak MB"]
    growth = [
        [span, *[f"{g[s]['time_x']}× / {g[s]['peak_rss_x']}×" for s in ("embed", "index", "evaluate")]]
        for span, g in f["growth"].items()
    ]
    return (
        table(head, rows)
        + "\n\nGrowth (time / peak RSS):\n\n"
        + table(["sizes", "embed", "index", "evaluate"], growth)
        + f"\n\nModel: {c['model']}. {c['queries']} queries per catalog; {c['evaluate']}. Index recall: "
        "what the build measured against exact search on 1,000 held-out vectors at max_k (empty in runs "
        "before 25 Nov)."
        + ("\n\n![stages against catalog size](performance_scaling.png)" if c.get("plot") else "")
    )


def eval_join_section(r: dict[str, Any]) -> str:
    f, c = r["figures"], r["config"]
    rows = [
        [
            f"Beam: {c.get('stage', 'ScoreQueries (CoGroupByKey + score + run rows)')}",
            f["beam_s"],
            f["beam_peak_rss_delta_mb"],
        ],
        ["plain Python loop, same work", f["plain_loop_s"], f["plain_loop_peak_rss_delta_mb"]],
    ]
    if "beam_without_run_rows_s" in f:
        rows.insert(
            1,
            [
                "Beam, the same without writing run rows",
                f["beam_without_run_rows_s"],
                f["beam_without_run_rows_peak_mb"],
            ],
        )
    return (
        table(["path", "seconds", "peak RSS Δ MB"], rows)
        + f"\n\n{c['queries']:,} queries × top-{c['depth']:,}, {c['judged']} judgments per query: "
        f"Beam is {f['beam_vs_plain_time']}× the plain loop's time; "
        f"{f['beam_ranked_pairs_per_s']:,.0f} ranked pairs/s, which extrapolates linearly to "
        f"{f['extrapolated_10k_x_10k_beam_s']:,.0f} s for 10k × 10k."
    )
