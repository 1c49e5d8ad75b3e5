"""Write docs/PERFORMANCE.md from bench/results/*.json: one table per benchmark, its command, the targets.

Generated rather than hand-edited, so the document never shows a figure that no results file holds.
For each benchmark the full-size results file is used when there is one, else the quick one; the
table says which command produced it. What a profile found where a target is missed is not in any
results file, so it lives in `bench.performance_notes`, dated, next to the verdict computed from the figures.

    python -m bench.performance_doc
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.common import RESULTS, table
from bench.embed_peer_bench import embed_peer_section, embed_peer_verdicts
from bench.exact_search_bench import exact_search_section
from bench.index_stage_bench import index_stage_section
from bench.nightly_scale_doc import nightly_scale_section, nightly_scale_verdicts
from bench.performance_notes import FINDINGS, INTRO, NOTES
from bench.serving_doc import serving_section, serving_verdicts

DOC = Path(__file__).resolve().parent.parent / "docs" / "PERFORMANCE.md"
PLOT = "performance_recall_qps.png"


def load(name: str) -> dict[str, Any] | None:
    """The full-size results of a benchmark if saved, else its quick ones, else None."""
    for candidate in (name, f"{name}_quick"):
        path = RESULTS / f"{candidate}.json"
        if path.is_file():
            return json.loads(path.read_text())
    return None


def provenance(result: dict[str, Any]) -> str:
    config = result["config"]
    command = config.get("command") or f"python -m bench.{result['benchmark'].removesuffix('_quick')}"
    load_avg = config.get("load_average_1min_at_start")
    end = result["figures"].get("load_average_1min_at_end")
    shared = f"; 1-min load average {load_avg} at start" if load_avg is not None else ""
    shared += f", {end} at end" if end is not None else ""
    return f"`{command}` — {result['when']}, {result['machine']['cores']} cores{shared}."


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


SECTIONS: list[tuple[str, str, Callable[[dict[str, Any]], str]]] = [
    (
        "embed_peer",
        "Embedding: `madr embed` against sentence-transformers (fp32 and int8)",
        embed_peer_section,
    ),
    (
        "embed_peer_vnni",
        "Embedding against sentence-transformers on a CPU with AVX-512 VNNI (25 Nov)",
        embed_peer_section,
    ),
    (
        "embed_throughput",
        "Ablation (own baseline, not a peer): Beam pipeline against a plain torch loop",
        embed_section,
    ),
    (
        "bucketing",
        "Ablation (own baselines, not a peer): length bucketing and int8 inference",
        bucketing_section,
    ),
    ("index", "Index: ScaNN against FAISS and exact search (recall@10)", index_section),
    ("recall10k", "Recall@10k cost", recall10k_section),
    ("exact_search", "Exact search against FAISS IndexFlatIP", exact_search_section),
    ("scaling", "Scaling: embed → index → evaluate", scaling_section),
    ("eval_join", "Evaluation join", eval_join_section),
    (
        "nightly_scale",
        "The nightly job at catalog scale: a first night, then 5 % churn",
        nightly_scale_section,
    ),
    (
        "nightly_scale_seeded",
        "The nightly job at 1M products with today's index build: a seeded first night, then 5 % churn",
        nightly_scale_section,
    ),
    ("index_stage", "The nightly's index stage with and without last night's index", index_stage_section),
    (
        "serving_finals",
        "The serving index against exact scoring, plain ScaNN and FAISS (shipped-model vectors)",
        serving_section,
    ),
    (
        "serving_isotropic",
        "The serving index on isotropic vectors (where trees are weakest)",
        serving_section,
    ),
]


def verdicts(results: dict[str, dict[str, Any] | None]) -> list[list[str]]:
    """(target, measured, verdict) rows computed from whatever results exist."""
    rows: list[list[str]] = []

    def add(key: str, target: str, measured: str, met: bool | None, full: bool = True) -> None:
        if met is None:
            verdict = "not run this session"
        elif full:
            verdict = "met" if met else "missed"
        else:
            verdict = "full size not run this session; the smaller run " + (
                "passes" if met else "already misses"
            )
        finding = f" — {FINDINGS[key]}" if key in FINDINGS and (met is not True or not full) else ""
        rows.append([target, measured, verdict + finding])

    for key, target, measured, met in embed_peer_verdicts(results.get("embed_peer")):
        add(key, target, measured, met)
    # The seeded run is the later one, with the per-depth index build; the unseeded one is older.
    nightly = results.get("nightly_scale_seeded") or results.get("nightly_scale")
    for key, target, measured, met, full in nightly_scale_verdicts(nightly):
        add(key, target, measured, met, full)
    b = results.get("bucketing")
    if b:
        mixes = b["figures"]["bucketing"]
        mix = next(m for m in mixes if m.startswith("title_only"))
        ratio = mixes[mix]["bucketed_vs_naive"]
        add(
            "bucketing",
            "ablation: length bucketing ≥ 1.6× naive padding (own baseline)",
            f"{ratio}× ({mix})",
            ratio >= 1.6,
        )
    else:
        add("bucketing", "ablation: length bucketing ≥ 1.6× naive padding (own baseline)", "—", None)
    i = results.get("index")
    if i:
        s = i["figures"]["summary"]
        scann = max((v["qps_at_0.95"] or 0, n) for n, v in s.items() if not n.startswith("FAISS"))
        faiss = max((v["qps_at_0.95"] or 0, n) for n, v in s.items() if n.startswith("FAISS"))
        add(
            "scann_vs_faiss",
            "tuned ScaNN ahead of best FAISS in QPS at recall@10 = 0.95",
            f"{scann[0]:,.0f} ({scann[1]}) vs {faiss[0]:,.0f} ({faiss[1]}) at {i['config']['n']:,} vectors",
            scann[0] > faiss[0],
            i["config"]["n"] >= 1_000_000,
        )
        n = i["config"]["n"]
        build = min(v["build_s"] for name, v in s.items() if not name.startswith("FAISS") and v["build_s"])
        add(
            "build",
            "1M×128 ScaNN build ≤ 45 s",
            f"{build} s at {n:,} vectors",
            build <= 45,
            n >= 1_000_000,
        )
    r = results.get("recall10k")
    if r:
        recall = r["figures"]["index_recall_vs_exact"].get("recall@10000")
        size = f"{r['config']['queries']:,} × {r['config']['n']:,}"
        add(
            "recall10k",
            "Recall@10k through the index within 1% of exact",
            f"{recall} ({size})",
            None if recall is None else recall >= 0.99,
            r["config"]["n"] >= 1_000_000 and r["config"]["queries"] >= 10_000,
        )
    s = results.get("scaling")
    if s:
        spans = s["figures"]["growth"]
        last = list(spans)[-1] if spans else None
        x = spans[last]["embed"]["peak_rss_x"] if last else None
        sizes = [int(k) for k in s["figures"]["per_size"]]
        add(
            "embed_rss",
            "embed peak RSS flat ±15% from 10k to 1M products",
            f"{x}× over {last}",
            None if x is None else 0.85 <= x <= 1.15,
            min(sizes) <= 10_000 and max(sizes) >= 1_000_000,
        )
    j = results.get("eval_join")
    if j:
        c, f = j["config"], j["figures"]
        full = c["queries"] * c["depth"] >= 100_000_000
        extrapolated = f["extrapolated_10k_x_10k_beam_s"]
        measured = f"{f['beam_s']} s at {c['queries']:,} × {c['depth']:,}; {extrapolated:,.0f} s extrapolated"
        add(
            "eval_join",
            "10k × 10k evaluation join ≤ 2 minutes",
            measured,
            f["beam_s"] <= 120 if full else extrapolated <= 120,
            full,
        )
    rows += serving_verdicts(results.get("serving_finals"))
    return rows


def render(intro: str = "") -> str:
    results = {name: load(name) for name, _, _ in SECTIONS}
    parts = [
        "# Performance",
        "",
        "Generated by `python -m bench.performance_doc` from `bench/results/*.json` (`make bench` and "
        "`make bench-quick` regenerate it). Every figure is a ratio against a baseline measured in the "
        "same run; absolute times on a shared machine vary.",
        "",
        intro,
        "## Targets",
        "",
        table(["target", "measured", "verdict"], verdicts(results)),
        "",
        NOTES,
    ]
    for name, title, section in SECTIONS:
        parts += ["", f"## {title}", ""]
        result = results[name]
        if result is None:
            parts.append("Not run this session.")
            continue
        parts += [provenance(result), "", section(result)]
    return "\n".join(parts) + "\n"


def main(argv: list[str] | None = None) -> Path:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", default=str(DOC), help="Document to write (default: docs/PERFORMANCE.md)")
    args = parser.parse_args(argv)
    path = Path(args.out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render(INTRO))
    return path


if __name__ == "__main__":
    print(main())
