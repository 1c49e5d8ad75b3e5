"""The nightly-scale benchmark's section of docs/PERFORMANCE.md and its verdicts on the targets
(`bench.nightly_scale` measures; `bench.performance_doc` renders)."""

from __future__ import annotations

from typing import Any

from bench.claim_words import timing_met
from bench.common import table
from bench.nightly_scale import NIGHT_TWO_TARGET_S, PEAK_RSS_TARGET_MB, STAGES


def nightly_scale_section(r: dict[str, Any]) -> str:
    """This benchmark's section of docs/PERFORMANCE.md (`bench.performance_doc` renders it)."""
    f, c = r["figures"], r["config"]
    rows = []
    for night in f["nights"]:
        for stage, row in night["stages"].items():
            rows.append(
                [
                    night["number"],
                    stage,
                    row["seconds"],
                    row["products_per_s"],
                    row["cpu_seconds"],
                    row["peak_rss_mb"],
                    row["core_hours_per_million"],
                ]
            )
    header = ["night", "stage", "wall s", "products/s", "CPU-s", "peak RSS MB", "core-hours per 1M"]
    lines = [
        f"Catalog: {c['products']:,} generated products, {c['queries']:,} queries; each night after the "
        f"first changes {c['change']:.0%} of the last one's catalog. Recall@10k over the judged test "
        "queries: "
        + ", ".join(f"night {n['number']} {_figure(n['recall_at_10000'])}" for n in f["nights"])
        + f" (searched by {f['nights'][-1]['searcher']})."
    ]
    seed = c.get("seed")
    if seed:
        lines[0] = (
            f"Catalog: {c['products']:,} products: the {seed['data']} benchmark's, already embedded by the "
            f"same model into {seed['embeddings']} (published as a run 'seed', whose rows night 1 reuses "
            "as any night reuses last night's), plus generated products up to the total (a different seed, "
            "ids prefixed X, unjudged); its queries and judgments. Each night after the first changes "
            f"{c['change']:.0%} of the last one's catalog. Recall@10k over the judged test queries: "
            + ", ".join(f"night {n['number']} {_figure(n['recall_at_10000'])}" for n in f["nights"])
            + f" (searched by {f['nights'][-1]['searcher']})."
        )
    for night in f["nights"]:
        lines.append(_night_line(night))
    resumed = [str(n["number"]) for n in f["nights"] if n.get("resumed")]
    if resumed:
        lines.append(
            f"Nights {', '.join(resumed)} were run by an earlier invocation (`--resume`) and read from their "
            "manifests, with the code of their day."
        )
    if c.get("note"):
        lines.append(c["note"])
    lines.append(
        f"Model {c['model']}, nightly flags `{c['nightly_flags']}`, {c['runner']}; one `madr nightly` "
        "process per night; CPU-s counts that process and the workers it waited for; peak RSS is each "
        "stage's own."
    )
    return table(header, rows) + "\n\n" + "\n".join(f"- {line}" for line in lines)


def _night_line(night: dict[str, Any]) -> str:
    """What one night changed, embedded and reused, and what its index build shipped and why."""
    total = round(sum(night["seconds"].get(s, 0) for s in STAGES), 1)
    text = f"Night {night['number']} ({night['products']:,} products, {total:,} s in all)"
    changes, split = night.get("changes"), night.get("embed_split")
    if changes:
        text += (
            f": {changes['edited']:,} titles edited, {changes['added']:,} products added, "
            f"{changes['removed']:,} removed"
        )
    if split:
        text += (
            f"; {split['products_embedded']:,} embedded and {split['products_reused']:,} reused: reading, "
            f"hashing and copying the unchanged products accounts for {split['unchanged_overhead_s']:,} s "
            f"of the embed stage, the changed ones for {split['changed_embedding_s']:,} s ("
            + _split_method(night)
            + ")"
        )
    for shard in night.get("index", {}).values():
        schedule = shard.get("schedule")
        if schedule:
            reason = shard.get("reason") or ""
            if reason.startswith("last night's tree updated"):
                text += f". Index: {reason}"
            text += ". Index schedule shipped: " + "; ".join(_depth_entry(entry) for entry in schedule)
        else:
            why = f": {shard['reason']}" if shard.get("reason") else ""
            text += f". Index: shipped {shard.get('choice') or 'its index'}{why}"
    return text + "."


def _depth_entry(entry: dict[str, Any]) -> str:
    """One depth of a shipped search schedule (`index_builder.schedule.DepthEntry.to_dict`)."""
    text = f"k = {entry['depth']:,} {entry['searcher']}"
    if entry["searcher"] == "tree":
        text += f" ({entry['leaves_to_search']} leaves, re-rank {entry['pre_reorder_num_neighbors']:,})"
    speeds = [
        f"{name} {entry[key]:,.0f}/s"
        for name, key in (("tree", "tree_qps"), ("exact", "exact_qps"))
        if entry.get(key) is not None
    ]
    recall = f"recall {entry['tree_recall']:.3f}, " if entry.get("tree_recall") is not None else ""
    return text + (f" [{recall}{', '.join(speeds)}]" if speeds or recall else "")


def _split_method(night: dict[str, Any]) -> str:
    measured = night.get("unchanged_pass")
    if not measured:  # results of an earlier version of this benchmark
        return "the changed ones estimated at night 1's seconds per product"
    return (
        f"measured right after the night: its catalog embedded again over its own output, "
        f"{measured['products_reused']:,} products all reused in {measured['seconds']:,} s"
    )


def _figure(value: float | None) -> str:
    return "—" if value is None else f"{value:.4f}"


def nightly_scale_verdicts(result: dict[str, Any] | None) -> list[tuple[str, str, str, bool | None, bool]]:
    """(key, target, measured, met, full size) rows of the performance targets this benchmark checks."""
    night_target = f"5 % night of a 1M catalog ≤ {NIGHT_TWO_TARGET_S // 60} minutes on 2 cores"
    memory_target = f"peak RSS of every nightly stage ≤ {PEAK_RSS_TARGET_MB // 1024} GB at 1M products"
    churn_target = "5 % night: embedding the changed products costs more than the unchanged ones"
    tree_target = "5 % night of a 1M catalog ships a tree for the serving depths (issue 46)"
    if result is None:
        return [
            (key, target, "—", None, True)
            for key, target in (
                ("nightly_time", night_target),
                ("nightly_memory", memory_target),
                ("nightly_churn", churn_target),
                ("nightly_tree", tree_target),
            )
        ]
    f, products = result["figures"], result["config"]["products"]
    full = products >= 1_000_000 and not result["benchmark"].endswith("_quick")
    t, split = f["targets"], f["nights"][-1]["embed_split"]
    size = f"at {products:,} products (night {len(f['nights'])})"
    # Every churn night's total (night 1 embeds the whole catalog): "met" needs the worst of them.
    churn = [round(sum(night["seconds"].get(s, 0) for s in STAGES), 1) for night in f["nights"][1:]]
    entries = [e for shard in f["nights"][-1].get("index", {}).values() for e in shard.get("schedule") or []]
    tree_depths = [f"{e['depth']:,}" for e in entries if e["searcher"] == "tree"]
    shipped = f"tree at k = {', '.join(tree_depths)}" if tree_depths else "exact scoring at every depth"
    return [
        ("nightly_tree", tree_target, f"{shipped} {size}", bool(tree_depths), full),
        (
            "nightly_time",
            night_target,
            f"worst of {len(churn)} churn nights {max(churn):,} s ({', '.join(f'{s:,}' for s in churn)} s, "
            f"nights 2-{len(f['nights'])}) at {products:,} products",
            timing_met(churn, NIGHT_TWO_TARGET_S),
            full,
        ),
        (
            "nightly_memory",
            memory_target,
            f"{t['peak_rss_mb_max']:,.0f} MB at {products:,} products (the most of any stage and night)",
            t["peak_rss_mb_max"] <= PEAK_RSS_TARGET_MB,
            full,
        ),
        (
            "nightly_churn",
            churn_target,
            f"{split['changed_embedding_s']:,} s changed vs {split['unchanged_overhead_s']:,} s "
            f"unchanged {size}",
            split["changed_embedding_s"] > split["unchanged_overhead_s"],
            full,
        ),
    ]
