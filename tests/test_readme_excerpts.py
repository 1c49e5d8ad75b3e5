"""The README's quoted demo output: regenerated from a run's excerpts and its commands, and checked
against a fresh run within the stated tolerances (issue 48: the README quoted figures no run printed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.readme_excerpts import blocks, check, drift, regenerate

README = """# Title

<!-- excerpt: results -->
```
metric          mean  queries
recall@10     0.7473      180
p-value    4.271e-05
```

<!-- excerpt: commands -->
```
$ madr search --query "red shoes" --k 1
query "red shoes": 1 result in 21.5 ms (index)
   1  0.7547  SP1  Red Shoes
```
"""


def _run(tmp_path: Path, results: str) -> Path:
    (tmp_path / "excerpts").mkdir(parents=True, exist_ok=True)
    (tmp_path / "excerpts" / "results.txt").write_text(results)
    return tmp_path


def _search(timing: str = "9.0", score: str = "0.7547") -> object:
    def execute(command: str) -> str:
        assert command.startswith("madr search")
        return f'query "red shoes": 1 result in {timing} ms (index)\n   1  {score}  SP1  Red Shoes'

    return execute


def test_regenerate_puts_the_runs_excerpt_and_each_commands_output_in_place(tmp_path) -> None:
    run = _run(tmp_path, "metric          mean  queries\nrecall@10     0.7000      180\np-value    1e-06\n")
    text = regenerate(README, run, _search())
    assert "recall@10     0.7000      180" in text and "0.7473" not in text
    assert "1 result in 9.0 ms" in text and "21.5 ms" not in text
    assert text.startswith("# Title\n\n<!-- excerpt: results -->\n```\nmetric")
    assert [b.name for b in blocks(text.split("\n"))] == ["results", "commands"]
    assert regenerate(text, run, _search()) == text  # a second pass changes nothing


def test_the_check_passes_within_the_tolerances_and_ignores_times(tmp_path) -> None:
    # 0.7473 -> 0.7530 is within 0.01; a p-value under 0.05 stays "significant"; the search took longer.
    run = _run(tmp_path, "metric          mean  queries\nrecall@10     0.7530      180\np-value    1e-06\n")
    assert check(README, run, _search(timing="180.2")) == []


def test_the_check_names_each_figure_that_drifted(tmp_path) -> None:
    run = _run(tmp_path, "metric          mean  queries\nrecall@10     0.7700      180\np-value    0.3\n")
    problems = check(README, run, _search(score="0.6000"))
    assert len(problems) == 3, problems
    assert "0.7473 is now 0.7700" in problems[0] and problems[0].startswith("results (README line 5)")
    assert "4.271e-05 is now 0.3" in problems[1]
    assert "0.7547 is now 0.6000" in problems[2] and problems[2].startswith("commands")


def test_changed_words_and_lines_are_drift() -> None:
    assert drift("brand=Nike (catalog)", "brand=Adidas (catalog)")
    assert drift("a\nb", "a")
    assert not drift(
        "recall@100 0.963; zero-shot 0.958 (p 0.32)", "recall@100 0.965; zero-shot 0.958 (p 0.45)"
    )
    assert drift("recall@100 0.963; zero-shot 0.958 (p 0.32)", "recall@100 0.965; zero-shot 0.958 (p 0.03)")


def test_a_missing_excerpt_says_to_run_the_demo(tmp_path) -> None:
    with pytest.raises(FileNotFoundError, match="run `make demo`"):
        regenerate(README, tmp_path, _search())


def test_the_readmes_markers_each_hold_a_block() -> None:
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text().split("\n")
    assert [b.name for b in blocks(readme)] == ["annotated", "commands", "commands", "results"]


def test_the_results_excerpt_keeps_the_quoted_sections_with_their_tables() -> None:
    """A note before the metric table (the searcher's choice) must not take the table with it, and an
    unquoted comparison keeps its table."""
    from jobs.demo import results_excerpt

    table = "\n\n".join(
        [
            "Searcher: ann, measured on 128 queries",
            "metric          mean\nrecall@10     0.9",
            "Recall lost to the index (exact − ann):\nmetric  exact",
            "Against bm25: bm25 alone\n9 queries in both; delta = B − A",
            "metric  mean A\nrecall@10  0.5",
            "Against the backbone used zero-shot (A = zero-shot)\n9 queries in both; delta = B − A",
            "metric  mean A\nrecall@10  0.7",
            "bm25+model against bm25+zero-shot: the gain\n9 queries in both; delta = B − A",
            "metric  mean A\nrecall@10  0.8",
            "Aspect annotations on 3 held-out products\naspect",
        ]
    )
    assert results_excerpt(table).split("\n\n") == [
        "metric          mean\nrecall@10     0.9",
        "Recall lost to the index (exact − ann):\nmetric  exact",
        "Against the backbone used zero-shot (A = zero-shot)\n9 queries in both; delta = B − A",
        "metric  mean A\nrecall@10  0.7",
        "Aspect annotations on 3 held-out products\naspect",
    ]


def test_p_values_keep_their_verdict_and_small_figures_are_still_compared() -> None:
    header = "metric        mean A  mean B    delta    p-value  queries"
    row = "recall@10     0.7222  0.7473  {delta}  {p}      180"
    table = "{h}\n{r}".format
    same = table(h=header, r=row.format(delta="+0.0251", p="0.4123"))
    # A p-value in the table's column moves freely on its side of 0.05 ...
    assert not drift(same, table(h=header, r=row.format(delta="+0.0251", p="0.3601")))
    # ... but not across it, in a table or written "p 0.045".
    assert drift(same, table(h=header, r=row.format(delta="+0.0251", p="0.0300")))
    assert drift("zero-shot 0.958 (p 0.045)", "zero-shot 0.958 (p 0.055)")
    # A small figure that is no p-value is held to 0.01: a delta changing sign, recall lost growing.
    assert drift(same, table(h=header, r=row.format(delta="-0.0251", p="0.4123")))
    lost = "metric         exact     ann     loss\nrecall@10     0.7473  0.7073  +0.0400"
    assert drift(lost, lost.replace("0.7073  +0.0400", "0.7463  +0.0010"))
    # The annotation table after a metric table has no p-value column: its second-last figure is compared.
    annotations = "aspect     products  Acc@1  written\ncategory         45  0.822  0.923"
    assert drift(same + "\n" + annotations, same + "\n" + annotations.replace("0.923", "0.700"))


def test_a_sign_never_flips_and_a_p_value_keeps_its_order_of_magnitude() -> None:
    # Issue 68: the old tolerance (0.01 absolute) let +0.0039 become −0.0039, and a p-value move anywhere
    # on its side of 0.05.
    assert drift("delta +0.0039 (p 0.32)", "delta -0.0039 (p 0.32)")
    assert not drift("delta +0.0039 (p 0.32)", "delta +0.0061 (p 0.32)")
    assert drift("delta +0.0609 (p 4.271e-05)", "delta +0.0609 (p 3e-07)")
    assert not drift("delta +0.0609 (p 4.271e-05)", "delta +0.0609 (p 2.1e-05)")
    assert drift("recall@10 0.7473 (p 0.45)", "recall@10 0.7473 (p 0.04)")  # the verdict, as before
    assert drift("recall@10 0.7473", "recall@10 0.7800")  # 4.4 % of the figure


def test_the_readme_equals_its_kept_demo_excerpts() -> None:
    """The README against the committed copy of what a demo run printed (bench/results/demo_excerpts,
    written by `python -m bench.readme_excerpts` when it rewrites the README), without running the demo:
    within the tolerances (the kept commands ran again after the README was written: their timings
    differ), and an edit that flips a quoted delta fails."""
    from bench.readme_excerpts import KEPT, replay

    root = Path(__file__).resolve().parents[1]
    text = (root / "README.md").read_text()
    kept = root / KEPT
    assert check(text, kept, replay(kept)) == []
    edited = text.replace("recall@10     0.7222  0.7831  +0.0609", "recall@10     0.7831  0.7222  -0.0609")
    assert edited != text
    assert any("-0.0609 is now +0.0609" in problem for problem in check(edited, kept, replay(kept)))
