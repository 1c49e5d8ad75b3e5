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

from bench.claim_words import timing_met
from bench.common import RESULTS, table
from bench.embed_cpu_peers import embed_cpu_peers_section, embed_cpu_peers_verdicts
from bench.embed_peer_bench import embed_peer_section, embed_peer_verdicts
from bench.embed_profile import embed_profile_section
from bench.embed_stage_cost import embed_stage_cost_section, embed_stage_cost_verdicts
from bench.exact_search_bench import exact_search_section
from bench.index_stage_bench import index_stage_section
from bench.nightly_scale_doc import nightly_scale_section, nightly_scale_verdicts
from bench.performance_notes import FINDINGS, INTRO, NOTES
from bench.performance_sections import (
    bucketing_section,
    embed_section,
    eval_join_section,
    index_section,
    recall10k_section,
    scaling_section,
)
from bench.saved_model_bench import saved_model_section
from bench.serving_doc import serving_section, serving_verdicts
from bench.serving_load import serving_load_section, serving_load_verdicts
from bench.sharded_eval_doc import sharded_eval_section, sharded_eval_verdicts

DOC = Path(__file__).resolve().parent.parent / "docs" / "PERFORMANCE.md"


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


SECTIONS: list[tuple[str, str, Callable[[dict[str, Any]], str]]] = [
    (
        "embed_peer",
        "Embedding: `madr embed` against sentence-transformers (fp32 and int8)",
        embed_peer_section,
    ),
    (
        "embed_profile",
        "Where `madr embed` spends its time, part by part, beside sentence-transformers",
        embed_profile_section,
    ),
    (
        "embed_stage_cost",
        "The embed stage's own cost per product, with a negligible model: before batching, batched, and "
        "columnar",
        embed_stage_cost_section,
    ),
    (
        "embed_cpu_peers",
        "`madr embed` against sentence-transformers' torch and ONNX Runtime backends on this CPU",
        embed_cpu_peers_section,
    ),
    (
        "embed_peer_vnni",
        "Embedding against sentence-transformers on a CPU with AVX-512 VNNI (25 Nov)",
        embed_peer_section,
    ),
    (
        "embed_peer_bf16",
        "Embedding against sentence-transformers on a CPU with AVX-512 bf16 and VNNI (30 Nov)",
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
        "sharded_eval",
        "The evaluation shard by shard against the whole index, at 1M and 10M vectors in 16 shards",
        sharded_eval_section,
    ),
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
    (
        "serving_load",
        "`madr serve` under concurrent load, beside sentence-transformers + plain ScaNN in a process",
        serving_load_section,
    ),
    (
        "saved_model",
        "The index as a TensorFlow SavedModel against the artifact it was made from",
        saved_model_section,
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
    for key, target, measured, met in embed_stage_cost_verdicts(results.get("embed_stage_cost")):
        add(key, target, measured, met)
    for key, target, measured, met in embed_cpu_peers_verdicts(results.get("embed_cpu_peers")):
        add(key, target, measured, met)
    # The seeded run is the later one, with the per-depth index build; the unseeded one is older.
    nightly = results.get("nightly_scale_seeded") or results.get("nightly_scale")
    for key, target, measured, met, full in nightly_scale_verdicts(nightly):
        add(key, target, measured, met, full)
    b = results.get("bucketing")
    if b:
        mixes = b["figures"]["bucketing"]
        # The catalog as generated decides; the constructed mix (half the texts title-only) is shown beside.
        built = next(m for m in mixes if m.startswith("title_only"))
        ratio = mixes["as_generated"]["bucketed_vs_naive"]
        add(
            "bucketing",
            "ablation: length bucketing ≥ 1.6× naive padding (own baseline)",
            f"{ratio}× on the catalog as generated ({mixes[built]['bucketed_vs_naive']}× on {built})",
            timing_met([ratio], 1.6, higher_is_better=True),
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
            timing_met([scann[0] / faiss[0]], 1.0, higher_is_better=True),
            i["config"]["n"] >= 1_000_000,
        )
        n = i["config"]["n"]
        build = min(v["build_s"] for name, v in s.items() if not name.startswith("FAISS") and v["build_s"])
        add(
            "build",
            "1M×128 ScaNN build ≤ 45 s",
            f"{build} s at {n:,} vectors",
            timing_met([build], 45),
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
            timing_met([f["beam_s"] if full else extrapolated], 120),
            full,
        )
    rows += serving_verdicts(results.get("serving_finals"))
    rows += sharded_eval_verdicts(results.get("sharded_eval"))
    for key, target, measured, met in serving_load_verdicts(results.get("serving_load")):
        add(key, target, measured, met)
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
