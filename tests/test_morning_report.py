"""The morning report (issue 51): `madr report` and the page the nightly writes into each run folder.

A nightly root made by the test, as a user makes one: Monday and Tuesday published, Wednesday refused by
the quality guard (the tiny untrained model is far below the backbone used zero-shot), Thursday failed
in its evaluation. The page is checked against the JSON files its numbers come from, and opened in
headless Chromium when the machine has it.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from jobs.cli import main
from pipelines.report.night import dead_letter_reasons
from tests.test_embed_pipeline import write_catalog
from tests.test_quality_guard import KINDS, _store_with_distinct_products


class _Page(HTMLParser):
    """The page's images, links and table rows (cell texts), as a reader would see them."""

    def __init__(self) -> None:
        super().__init__()
        self.images: list[dict[str, str]] = []
        self.links: list[str] = []
        self.external: list[str] = []
        self.rows: list[list[str]] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {name: value or "" for name, value in attrs}
        if tag == "img":
            self.images.append(values)
        if tag == "a":
            self.links.append(values.get("href", ""))
        for name in ("src", "href"):
            if values.get(name) and not values[name].startswith("data:") and "://" in values[name]:
                self.external.append(values[name])
        if tag in ("script", "link", "iframe"):
            self.external.append(tag)
        if tag == "tr":
            self.rows.append([])
        if tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None:
            self.rows[-1].append("".join(self._cell).strip())
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)

    def row(self, first: str) -> list[str]:
        return next(row for row in self.rows if row and row[0] == first)


def _page(path: Path) -> tuple[str, _Page]:
    text = path.read_text()
    page = _Page()
    page.feed(text)
    return text, page


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory, tiny_model_dir: Path) -> Path:
    folder = tmp_path_factory.mktemp("report")
    queries, judgments = _store_with_distinct_products(folder)
    products = folder / "catalog.parquet"
    out = folder / "nightly"
    # Without BM25, the dense ranking of the tiny random model is what is reported and guarded, so that
    # Wednesday falls below Monday (tests/test_nightly_bm25.py has the served ranking's page).
    argv = [
        *("nightly", "--model", str(tiny_model_dir), "--products", str(products)),
        *("--output", str(out), "--queries", queries, "--judgments", judgments, "--depth", "20"),
        *("--lexical", "false"),
    ]
    assert main([*argv, "--run_id", "mon"]) == 0
    # Tuesday: one product lost its title (a dead letter), one more is new.
    from tests.test_embed_pipeline import catalog

    rows = [
        {**catalog(1)[0], "product_id": f"p{i}", "title": t, "aspects": None}
        for i, (t, _) in enumerate(KINDS)
    ]
    rows[3]["title"] = ""
    rows.append({**rows[0], "product_id": "p-new", "title": "Linen tablecloth, 140 x 240 cm"})
    write_catalog(products, rows)
    argv += ["--embed_flags", "--max_dead_letter_fraction 0.1"]
    assert main([*argv, "--run_id", "tue"]) == 0
    assert main([*argv, "--run_id", "wed", "--quality_guard", "refuse"]) == 2
    corrupt = folder / "corrupt-judgments.parquet"
    corrupt.write_bytes(b"not parquet")
    broken = [*argv[: argv.index("--judgments") + 1], str(corrupt), *argv[argv.index("--judgments") + 2 :]]
    assert main([*broken, "--run_id", "thu"]) != 0
    return out


def test_madr_report_writes_one_page_whose_numbers_are_the_runs_files(root: Path, tmp_path, capsys) -> None:
    out = tmp_path / "tuesday.html"
    assert main(["report", "--root", str(root), "--run", "tue", "--output", str(out)]) == 0
    assert capsys.readouterr().out.strip() == str(out)
    text, page = _page(out)
    assert "<strong>published</strong>" in text and "quality guard: tonight is significantly below" in text
    metrics = json.loads((root / "tue" / "eval" / "metrics.json").read_text())["metrics"]
    zero_shot = json.loads((root / "tue" / "eval" / "zero_shot" / "eval" / "metrics.json").read_text())[
        "metrics"
    ]
    ndcg = page.row("ndcg@10")
    assert ndcg[1] == f"{metrics['ndcg@10']['mean']:.4f}" and ndcg[4] == f"{zero_shot['ndcg@10']['mean']:.4f}"
    # Last night's mean over the queries both nights judged (Tuesday lost q3's only relevant product),
    # as the quality guard paired them in the run's manifest.
    quality = json.loads((root / "tue" / "manifest.json").read_text())["quality"]["comparisons"]
    paired = quality["last night (run mon)"]["metrics"]["ndcg@10"]
    assert ndcg[2] == f"{paired['mean_a']:.4f}" and ndcg[3].startswith(f"{paired['delta']:+.4f}")
    counts = json.loads((root / "tue" / "embeddings" / "manifest.json").read_text())["counts"]
    assert page.row("products read")[1] == f"{counts['products_read']:,}" == "25"
    assert page.row("dead-lettered")[1] == "1" and page.row("reused from last night")[1] == "23"
    letters = sorted((root / "tue" / "embeddings").glob("dead_letters-*.jsonl"))
    assert page.row(dead_letter_reasons([str(p) for p in letters])[0][0])[1] == "1"
    assert [link.split("/")[-1] for link in page.links] == [p.name for p in letters if p.stat().st_size]
    # 25 products: scored exactly, which the index section says (a schedule table needs a tree).
    recall = json.loads((root / "tue" / "index" / "shard-00000-of-00001" / "manifest.json").read_text())[
        "recall"
    ]
    assert recall["exact"] and "exact: exact scoring of every vector" in text
    assert [row[0] for row in page.rows if row and row[0] in ("embed", "index", "evaluate")] == [
        "embed",
        "index",
        "evaluate",
    ]
    # One picture per plot, each embedded and described: the recall curves of the three systems, then
    # the trends (no annotation plot: this model does not annotate).
    assert all(image["src"].startswith("data:image/png;base64,") and image["alt"] for image in page.images)
    alts = [image["alt"] for image in page.images]
    assert alts[0].startswith("Recall at k for tonight, last night, zero-shot backbone")
    # (Recall@100 is not reported at this depth, 20: no plot for it.)
    assert [alt.split(" over ")[0] for alt in alts[1:]] == [
        "ndcg@10",
        "wall time per stage",
        "products per second per stage",
    ]
    assert not page.external
    # The queries that fell most against Monday, each with its text from the run's queries file.
    worst = [row for row in page.rows if row and re.match(r"q\d+: ", row[0])]
    assert all(row[0].split(": ", 1)[1] == KINDS[int(row[0][1:].split(":")[0])][1] for row in worst)


def test_the_nightly_writes_the_page_into_every_run_even_one_that_stopped(root: Path) -> None:
    for run in ("mon", "tue", "wed", "thu"):
        assert (root / run / "report.html").is_file(), run
    text, _ = _page(root / "wed" / "report.html")
    assert "<strong>not published</strong>" in text
    assert "refused by the quality guard: quality guard: tonight is significantly below" in text
    assert "servers keep reading run tue (LATEST)" in text
    # Thursday's judgments are no Parquet: refused before anything was embedded, and the page says why.
    thursday, _ = _page(root / "thu" / "report.html")
    assert "refused by the check of the evaluation&#x27;s queries and judgments: --judgments" in thursday
    assert "cannot be read as Parquet" in thursday and "servers keep reading run tue" in thursday
    status = json.loads((root / "thu" / "status.json").read_text())
    assert (
        status["state"] == "refused"
        and status["stage"] == "the check of the evaluation's queries and judgments"
    )
    assert not (root / "thu" / "embeddings").exists()
    assert not (root / "tue" / "status.json").exists()


def test_a_report_of_an_unknown_run_names_the_runs_there(root: Path, capsys) -> None:
    assert main(["report", "--root", str(root), "--run", "fri"]) == 2
    assert "has no run 'fri'; its runs: mon, tue, wed, thu" in capsys.readouterr().err


def test_the_page_opens_in_headless_chromium_without_errors_or_requests(root: Path, tmp_path) -> None:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        pytest.skip("no chromium on this machine (Debian: apt-get install chromium; .ci/run installs it)")
    screenshot = tmp_path / "report.png"
    result = subprocess.run(
        [
            browser,
            *("--headless", "--no-sandbox", "--disable-gpu", "--window-size=1200,2400"),
            # Every host name fails to resolve: a request the page made would be an error in the log.
            "--host-resolver-rules=MAP * ~NOTFOUND",
            *("--enable-logging=stderr", "--v=0", f"--screenshot={screenshot}"),
            (root / "tue" / "report.html").as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert screenshot.is_file() and screenshot.stat().st_size > 10_000, result.stderr[-2000:]
    console = [
        line for line in result.stderr.splitlines() if "CONSOLE" in line or "ERR_NAME_NOT_RESOLVED" in line
    ]
    assert not console, console
    assert not re.search(r"Failed to load resource", result.stderr)
    artifacts = Path("runs/test-artifacts")
    artifacts.mkdir(parents=True, exist_ok=True)
    shutil.copy(screenshot, artifacts / "morning-report.png")
