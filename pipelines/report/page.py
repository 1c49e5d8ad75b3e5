"""`madr report`: one self-contained HTML page for a night of a nightly root.

No server and no network: the CSS is inline, the plots are PNG data URIs, and the only links are
relative ones to files in the run folder (the dead letters). The verdict comes first, then the
catalog, retrieval against last night and the backbone used zero-shot, trends over the last nights,
the annotations, the index, the cost, and the queries that got worst.
"""

from __future__ import annotations

import datetime as dt
import html
import os
from collections.abc import Sequence
from dataclasses import dataclass

from apache_beam.io.filesystems import FileSystems

from pipelines.report import figures, sections
from pipelines.report.figures import LAST_NIGHT, TONIGHT, ZERO_SHOT, Picture
from pipelines.report.night import (
    SERVING_FOLDER,
    NightSummary,
    published_runs,
    read_json,
    read_night,
    run_ids,
)
from schemas.terminal_text import for_terminal

REPORT_FILE = "report.html"
_TEXT_CELL = ' class="text"'
DEFAULT_NIGHTS = 14

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2em auto;max-width:1100px;
color:#1b1b1b;padding:0 1em}
h1{font-size:1.5em;margin-bottom:.2em}h2{font-size:1.15em;margin-top:1.8em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:.5em 0}td,th{padding:.25em .7em;border-bottom:1px solid #eee;
text-align:right;vertical-align:top}th{background:#f6f6f6}td:first-child,th:first-child{text-align:left}
td.text{text-align:left;max-width:32em}.verdict{padding:.8em 1em;border-radius:6px;font-size:1.1em}
.published{background:#e6f4ea;border:1px solid #8bc79a}
.warned{background:#fff4e0;border:1px solid #e0b060}.stopped{background:#fdecea;border:1px solid #e59a94}
.note{color:#555;font-size:.9em}.trends img{margin:.3em}.worse{color:#b3261e}.better{color:#1e7b34}
"""


@dataclass(frozen=True)
class RootHistory:
    """The nights a report shows: `night` (the one reported on) and the earlier ones, oldest first."""

    root: str
    night: NightSummary
    nights: list[NightSummary]
    judgments: str | None
    queries: str | None
    latest: str | None  # the run LATEST points to now

    @property
    def previous(self) -> NightSummary | None:
        wanted = self.night.previous_run_id
        return next((n for n in self.nights if n.run_id == wanted), None)


def read_root(root: str, run_id: str | None = None, last: int = DEFAULT_NIGHTS) -> RootHistory:
    """The nights of ROOT up to `run_id` (default: the last started), the last `last` of them."""
    latest = read_json(FileSystems.join(root, "LATEST"))
    ids = run_ids(root)
    if not ids and FileSystems.exists(FileSystems.join(root, "embeddings", "manifest.json")):
        # A single run folder (`madr demo --output`): one night, reported as it stands.
        night = read_night(root, run_id or root.rstrip("/").split("/")[-1], published=False)
        night.standalone = True
        return RootHistory(root, night, [night], None, None, None)
    if not ids:
        raise FileNotFoundError(
            f"{root} holds no nightly run (no <run>/catalog.json) and is no run folder (no "
            "embeddings/manifest.json): pass a nightly --output or a demo --output"
        )
    run_id = run_id or ids[-1]
    if run_id not in ids:
        raise ValueError(f"{root} has no run {run_id!r}; its runs: {', '.join(ids)}")
    published = set(published_runs(root, latest))
    shown = ids[: ids.index(run_id) + 1][-last:]
    nights = [read_night(FileSystems.join(root, name), name, name in published) for name in shown]
    run = read_json(FileSystems.join(root, run_id, "manifest.json")) or {}
    inputs = run.get("info", run)
    latest_id = None if latest is None else latest.get("run_id")
    return RootHistory(root, nights[-1], nights, inputs.get("judgments"), inputs.get("queries"), latest_id)


def render(history: RootHistory) -> str:
    night = history.night
    parts = [
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>",
        f"<title>madr report: {_e(night.run_id)}</title><style>{_CSS}</style></head><body>",
        f"<h1>madr report: run {_e(night.run_id)}</h1>",
        f"<p class='note'>Root {_e(history.root)}; written {_e(_now())} by <code>madr report</code> "
        "from the files the run's stages wrote (named under each section).</p>",
        _verdict(night, history.latest),
        _catalog(night, history.previous),
        _retrieval(night, history.previous),
        _trends(history.nights),
        _annotations(night),
        _index(night),
        _cost(night),
        _worst(night, history),
        "</body></html>",
    ]
    return "\n".join(part for part in parts if part)


def write_report(
    root: str, run_id: str | None = None, output: str | None = None, last: int = DEFAULT_NIGHTS
) -> str:
    """Render the report of ROOT's run (default: the last started) to `output` (default: the run
    folder's report.html) and return the path written."""
    history = read_root(root, run_id, last)
    target = output or FileSystems.join(history.night.folder, REPORT_FILE)
    with FileSystems.create(target) as handle:
        handle.write(render(history).encode("utf-8"))
    return target


def _verdict(night: NightSummary, latest: str | None) -> str:
    headline, lines = sections.verdict(night, latest)
    below = bool((night.quality or {}).get("below"))
    style = ("warned" if below else "published") if night.published or night.standalone else "stopped"
    items = "".join(f"<li>{_e(line)}</li>" for line in lines)
    return f"<div class='verdict {style}'><strong>{_e(headline)}</strong><ul>{items}</ul></div>"


def _catalog(night: NightSummary, previous: NightSummary | None) -> str:
    if night.embed_counts is None:
        return _section("Catalog", "<p>The embed stage did not finish: no counts.</p>", [])
    body = _table(("", "products"), sections.catalog_rows(night, previous))
    if night.dead_letter_reasons:
        body += "<p>Top dead-letter reasons:</p>" + _table(
            ("reason", "records"), [(reason, f"{count:,}") for reason, count in night.dead_letter_reasons]
        )
        links = ", ".join(
            f"<a href='{_e(os.path.relpath(p, night.folder))}'>{_e(os.path.basename(p))}</a>"
            for p in night.dead_letter_files
        )
        body += f"<p>Dead letters (every rejected record with its reason): {links}</p>"
    return _section("Catalog", body, [night.sources.get("embeddings")])


def _retrieval(night: NightSummary, previous: NightSummary | None) -> str:
    if night.metrics is None:
        return _section("Retrieval", "<p>No evaluation in this run (no --queries and --judgments).</p>", [])
    rows = [
        (
            row.metric,
            _f(row.tonight),
            _f(row.last_night),
            _diff(row.last_delta, row.last_pvalue),
            _f(row.zero_shot),
            _diff(row.zero_delta, row.zero_pvalue),
        )
        for row in sections.retrieval_rows(night)
    ]
    header = ("metric", TONIGHT, LAST_NIGHT, "tonight − last night (p)", ZERO_SHOT, "tonight − zero-shot (p)")
    body = _served(night) + _table(header, rows, raw=True)
    curves = {
        TONIGHT: sections.recall_points(night.metrics),
        LAST_NIGHT: sections.recall_points(previous.metrics if previous else None),
        ZERO_SHOT: sections.recall_points(night.zero_shot_metrics),
    }
    body += _picture(figures.recall_curves(curves))
    body += (
        "<p class='note'>Differences are paired over the queries both runs judged; p from a two-sided "
        "paired t-test (the quality guard acts on a loss over a point at p &lt; 0.01).</p>"
    )
    names = ("metrics", "zero_shot_metrics", "zero_shot_comparison", "lexical_comparison", "run")
    return _section("Retrieval", body, [night.sources.get(name) for name in names])


def _served(night: NightSummary) -> str:
    """Which ranking servers get from tonight's index, and its lead over the BM25 + zero-shot hybrid."""
    ranking = night.ranking or {}
    served = ranking.get("served") or "the dense ranking (the index carries no BM25)"
    text = f"<p>Servers get {_e(served)}; the figures below are that ranking's."
    hybrid = ((night.lexical_comparison or {}).get("systems") or {}).get("bm25+zero-shot") or {}
    leads = [
        f"{_e(metric)} {_f(row.get('mean_b'))} against {_f(row.get('mean_a'))}, "
        + _diff(row.get("delta"), row.get("pvalue"))
        for metric, row in (hybrid.get("metrics") or {}).items()
        if metric in ("ndcg@10", "recall@100")
    ]
    if leads:
        text += f" Against the BM25 + zero-shot hybrid: {'; '.join(leads)}."
    return text + "</p>"


def _trends(nights: Sequence[NightSummary]) -> str:
    if len(nights) < 2:
        return ""
    runs = [n.run_id for n in nights]
    drawn = "".join(_picture(figures.trend(*trend, runs=runs)) for trend in sections.trend_series(nights))
    return _section(f"Trends over the last {len(nights)} runs", f"<div class='trends'>{drawn}</div>", [])


def _annotations(night: NightSummary) -> str:
    rows = sections.annotation_rows(night)
    if not rows:
        return _section("Annotations", "<p>No annotation quality in this run.</p>", [])
    products = (night.annotation_quality or {}).get("products") or {}
    header = (
        "aspect",
        "products",
        "precision written",
        "coverage",
        "Acc@1",
        "outside vocabulary",
        "embed run's values",
    )
    body = _table(header, rows)
    body += (
        f"<p class='note'>On {_e((night.annotation_quality or {}).get('held_out', 'held-out products'))}; "
        f"written at confidence ≥ {products.get('min_confidence', '–')}"
        + (
            ""
            if night.annotation_unseen
            else "; the model may have trained on these, so they are left out of the trend of unseen products"
        )
        + ".</p>"
    )
    body += _picture(figures.reliability(products.get("reliability") or {}))
    fills = sections.fill_rows(night)
    if fills:
        body += "<p>Written into the catalog by the enrich stage (enriched/):</p>"
        body += _table(
            ("aspect", "from the catalog", "predicted into a gap", "withheld", "left empty"), fills
        )
    return _section("Annotations", body, [night.sources.get(k) for k in ("annotation_quality", "enriched")])


def _index(night: NightSummary) -> str:
    recall = night.index_recall or {}
    if not recall and night.index_config is None:
        return _section("Index", "<p>No index in this run.</p>", [])
    config = night.index_config or {}
    settings = ", ".join(f"{k} {v}" for k, v in config.items() if v is not None)
    exact = recall.get("exact") and not recall.get("schedule")
    choice = recall.get("choice") or ("exact" if exact else "approximate")
    reason = recall.get("reason") or (
        "exact scoring of every vector (too few products for a tree to pay)" if exact else ""
    )
    body = f"<p>{_e(str(choice))}: {_e(str(reason))}</p>"
    target = recall.get("target", "–")
    body += f"<p class='note'>Configuration: {_e(settings)}; target recall {_e(str(target))}.</p>"
    header = ("depth", "serves", "leaves", "re-ranked", "tree recall", "tree q/s", "exact q/s", "why")
    rows = sections.schedule_rows(night)
    body += _table(header, rows, text_columns=(7,)) if rows else ""
    if night.searcher_choice:
        choice, why = night.searcher_choice.get("choice"), night.searcher_choice.get("reason", "")
        body += f"<p>The evaluation searched with {_e(str(choice))}: {_e(str(why))}.</p>"
    body += _serving(night)
    return _section("Index", body, [night.sources.get("index"), night.sources.get("serving")])


def _serving(night: NightSummary) -> str:
    """The serving bundle tonight wrote (`--export_serving`), or nothing: what a server reloads."""
    bundle = night.serving_bundle
    if bundle is None:
        return ""
    index, encoder = bundle.get("index") or {}, bundle.get("encoder") or {}
    products = index.get("products")
    count = f"{products:,}" if isinstance(products, int) else "?"
    lexical = "with BM25" if index.get("lexical") else "without BM25 (dense only)"
    cosine = encoder.get("probe_cosine")
    probe = f", least cosine to the model {cosine:.6f}" if isinstance(cosine, int | float) else ""
    saved = "; a TensorFlow SavedModel beside it" if bundle.get("saved_model") else ""
    described = f"{count} products {lexical}, query encoder at {encoder.get('precision', '?')}{probe}{saved}"
    folder = FileSystems.join(night.folder, SERVING_FOLDER)
    return (
        f"<p>Serving bundle: {_e(described)}. Servers load it with "
        f"<code>madr serve --bundle {_e(folder)}</code>, or take it into a running one (POST /reload).</p>"
    )


def _cost(night: NightSummary) -> str:
    if not night.seconds:
        return ""
    header = ("stage", "wall s", "CPU s", "peak memory MB", "core-hours per million products")
    return _section("Cost", _table(header, sections.cost_rows(night)), [night.sources.get("run")])


def _worst(night: NightSummary, history: RootHistory) -> str:
    previous = history.previous
    baseline, name = (
        (previous.per_query_file, f"last night ({previous.run_id})")
        if previous
        else (FileSystems.join(night.zero_shot_evaluation, "per_query.parquet"), ZERO_SHOT)
    )
    worst = sections.worst_queries(night, baseline, history.judgments, history.queries)
    if not worst:
        return ""
    rows = [
        (
            f"{w.query_id}: {w.text}" if w.text else w.query_id,
            f"{w.tonight:.3f}",
            f"{w.baseline:.3f}",
            ", ".join(f"{p} ({'–' if g is None else g})" for p, g in w.top),
        )
        for w in worst
    ]
    header = ("query", "NDCG@10 tonight", f"NDCG@10 {name}", "tonight's top products (grade)")
    return _section(
        f"The queries that fell most against {name}",
        _table(header, rows, text_columns=(3,)),
        [night.per_query_file, baseline],
    )


def _section(title: str, body: str, sources: Sequence[str | None]) -> str:
    named = [s for s in sources if s]
    note = f"<p class='note'>From {', '.join(_e(s) for s in named)}.</p>" if named else ""
    return f"<section><h2>{_e(title)}</h2>{body}{note}</section>"


def _table(
    header: Sequence[str], rows: Sequence[Sequence[str]], raw: bool = False, text_columns: Sequence[int] = ()
) -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in header)
    cells = []
    for row in rows:
        tds = "".join(
            f"<td{_TEXT_CELL if i in text_columns else ''}>{cell if raw and i else _e(cell)}</td>"
            for i, cell in enumerate(row)
        )
        cells.append(f"<tr>{tds}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(cells)}</tbody></table>"


def _picture(picture: Picture | None) -> str:
    if picture is None:
        return ""
    return f"<img src='{picture.data_uri()}' alt='{_e(picture.alt)}'>"


def _diff(delta: float | None, pvalue: float | None) -> str:
    if delta is None:
        return "–"
    tone = "worse" if delta < 0 else "better" if delta > 0 else ""
    p = "–" if pvalue is None else f"{pvalue:.3g}"
    return f"<span class='{tone}'>{delta:+.4f}</span> ({_e(p)})"


def _f(value: float | None) -> str:
    return "–" if value is None else f"{value:.4f}"


# One value on the page is cut past this many characters (a 1 MB title is one long line, not a page).
PAGE_VALUE_CHARS = 2_000


def _e(text: str) -> str:
    # HTML-escaped, and a catalog's control and bidi characters shown as escapes: a browser obeys U+202E
    # as a terminal obeys ESC[2J (one value is at most a long line on the page too).
    return html.escape(for_terminal(text, PAGE_VALUE_CHARS), quote=True)


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


__all__ = ["DEFAULT_NIGHTS", "REPORT_FILE", "RootHistory", "read_root", "render", "write_report"]
