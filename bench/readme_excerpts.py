"""The README's printed excerpts, regenerated from a demo run, or checked against one.

The README quotes what `make demo` prints (the annotated products, the metric tables, the store export)
and what `madr explain` and `madr search` print on its outputs. Each quoted block follows a marker line:

    <!-- excerpt: NAME -->        the block is runs/demo/excerpts/NAME.txt, as the demo wrote it
    <!-- excerpt: commands -->    each `$ madr ...` line of the block is run again; its output follows it

`python -m bench.readme_excerpts` rewrites the blocks from RUN (default runs/demo) and keeps what it
quoted in bench/results/demo_excerpts/ (the excerpt files and each command's output, `--keep`); `--check`
rewrites nothing and lists every quoted figure that a fresh run does not reproduce within the tolerances
below (exit code 1), which `make demo` runs after the demo. `--check --run bench/results/demo_excerpts`
checks the README against the kept copy without running anything (tests/test_readme_excerpts.py does).

Tolerances: the words must be the same; a number may differ by 2 % of itself or, for a figure near zero,
by 0.005 (a figure printed with 4 decimals from 180 queries moves by a few thousandths between runs of the
seeded demo: thread scheduling changes float sums), and its sign never flips (a delta of +0.0039 does not
pass as −0.0039); a p-value (written "p 0.32", or in a table's p-value column) keeps its verdicts, under
0.01 or not and under 0.05 or not, and its order of magnitude (within a factor of 10); times (a number
before "ms" or "s") are not compared.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

MARKER = re.compile(r"^<!-- excerpt: (?P<name>[a-z_-]+) -->$")
FENCE = "```"
COMMANDS = "commands"
ABSOLUTE_TOLERANCE = 0.005  # for figures near zero, where 2 % of the figure is below what a run moves
RELATIVE_TOLERANCE = 0.02
KEPT = Path("bench/results/demo_excerpts")  # the excerpts and command outputs the README quotes
COMMAND_OUTPUTS = "commands.json"
# A p-value's verdicts: under 0.01 (the threshold the documents' words and marks use) and under 0.05.
SIGNIFICANT = (0.01, 0.05)
TIME_UNITS = {"ms", "s"}
_TOKEN = re.compile(r"[-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?|[A-Za-z_']+|\S")


@dataclass(frozen=True)
class Block:
    """A quoted block: its excerpt name and its lines' span in the README (fences excluded)."""

    name: str
    start: int  # the first line inside the fence
    end: int  # the closing fence's line


def blocks(lines: list[str]) -> Iterator[Block]:
    """The marked blocks of a README's lines, in order; a marker without a fenced block is an error."""
    for number, line in enumerate(lines):
        found = MARKER.match(line.strip())
        if not found:
            continue
        if number + 1 >= len(lines) or not lines[number + 1].startswith(FENCE):
            raise ValueError(f"line {number + 1}: an excerpt marker must be followed by a fenced block")
        end = next((n for n in range(number + 2, len(lines)) if lines[n].startswith(FENCE)), None)
        if end is None:
            raise ValueError(f"line {number + 2}: the fenced block is never closed")
        yield Block(found["name"], number + 2, end)


def run_madr(command: str) -> str:
    """What `madr ...` prints, run offline from the repository root."""
    argv = shlex.split(command)
    if argv[0] != "madr":
        raise ValueError(f"only madr commands are rerun, not {command!r}")
    done = subprocess.run(
        [sys.executable, "-m", "jobs.cli", *argv[1:]],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    return done.stdout.rstrip("\n")


def fresh_body(block: Block, old: list[str], run: Path, execute: Callable[[str], str]) -> list[str]:
    """The block's lines as the run gives them: its excerpt file, or each command's output again."""
    if block.name != COMMANDS:
        path = run / "excerpts" / f"{block.name}.txt"
        if not path.is_file():
            raise FileNotFoundError(f"{path} is missing: run `make demo` (it writes the excerpts) first")
        fresh = path.read_text().rstrip("\n").split("\n")
    else:
        fresh = []
        for line in old:
            if line.startswith("$ "):
                fresh += [line, *execute(line[2:]).split("\n")]
    return [line.rstrip() for line in fresh]  # padded table columns leave trailing blanks


def regenerate(text: str, run: Path, execute: Callable[[str], str] = run_madr) -> str:
    """`text` (a README) with every marked block as the run gives it."""
    lines = text.split("\n")
    for block in reversed(list(blocks(lines))):
        lines[block.start : block.end] = fresh_body(block, lines[block.start : block.end], run, execute)
    return "\n".join(lines)


def _tokens(text: str) -> list[str]:
    return _TOKEN.findall(text)


def _number(token: str) -> float | None:
    try:
        return float(token)
    except ValueError:
        return None


def _close(a: float, b: float, pvalue: bool = False) -> bool:
    if pvalue:  # a p-value keeps its verdict and its order of magnitude; its digits move between runs
        if a <= 0 or b <= 0:
            return a == b
        same_verdicts = all((a < level) == (b < level) for level in SIGNIFICANT)
        return same_verdicts and abs(math.log10(a) - math.log10(b)) < 1
    if a * b < 0:
        return False  # a sign never flips
    bound = max(ABSOLUTE_TOLERANCE, RELATIVE_TOLERANCE * max(abs(a), abs(b)))
    return abs(a - b) <= bound + 1e-9  # printed figures: 0.33 - 0.32 is 0.0100000000000000009


def _pvalue_column(line: str) -> int | None:
    """A table header's p-value column, counted from the end of its words ("... p-value  queries": 1)."""
    words = line.split()
    return len(words) - 1 - words.index("p-value") if "p-value" in words else None


def drift(quoted: str, fresh: str) -> list[str]:
    """Where a fresh block departs from the quoted one beyond the tolerances, one line each."""
    problems = []
    # Blank lines only space the sections: a quote may leave one out or add one.
    quoted_lines = [line for line in quoted.split("\n") if line.strip()]
    fresh_lines = [line for line in fresh.split("\n") if line.strip()]
    column: int | None = None  # the p-value column of the table the lines are in
    for number, (old, new) in enumerate(zip(quoted_lines, fresh_lines, strict=False), start=1):
        first = old.split()[0]
        if first == "metric":
            column = _pvalue_column(old)
        elif "@" not in first and first != "auc":  # not a row of a metric table (recall@10, auc)
            column = None
        problems += _line_drift(number, old, new, column)
        if problems and problems[-1].startswith(f"line {number}: {old.strip()!r}"):
            break  # out of step: the rest would only repeat it
    if len(quoted_lines) != len(fresh_lines):
        problems.append(f"{len(quoted_lines)} lines quoted, {len(fresh_lines)} now (blank lines aside)")
    return problems


def _line_drift(number: int, old: str, new: str, column: int | None) -> list[str]:
    old_tokens, new_tokens = _tokens(old), _tokens(new)
    if len(old_tokens) != len(new_tokens):
        return [f"line {number}: {old.strip()!r} is now {new.strip()!r}"]
    # A table row's p-value: its word at the header's p-value column, from the end.
    words = old.split()
    in_column = words[-1 - column] if column is not None and column < len(words) else None
    problems = []
    for at, (a, b) in enumerate(zip(old_tokens, new_tokens, strict=True)):
        x, y = _number(a), _number(b)
        timed = at + 1 < len(old_tokens) and old_tokens[at + 1] in TIME_UNITS
        pvalue = (at > 0 and old_tokens[at - 1] == "p") or a == in_column
        if x is None or y is None:
            if a != b:
                problems.append(f"line {number}: {a!r} is now {b!r} in {new.strip()!r}")
        elif not timed and not _close(x, y, pvalue):
            problems.append(f"line {number}: {a} is now {b} in {new.strip()!r}")
    return problems


def check(text: str, run: Path, execute: Callable[[str], str] = run_madr) -> list[str]:
    """Every drift of the README's quoted blocks from the run, named by excerpt."""
    lines, fresh = text.split("\n"), regenerate(text, run, execute).split("\n")
    old_blocks, new_blocks = list(blocks(lines)), list(blocks(fresh))
    problems = []
    for old, new in zip(old_blocks, new_blocks, strict=True):
        quoted = "\n".join(lines[old.start : old.end])
        now = "\n".join(fresh[new.start : new.end])
        problems += [f"{old.name} (README line {old.start + 1}), non-blank {p}" for p in drift(quoted, now)]
    return problems


def keep(text: str, run: Path, folder: Path, execute: Callable[[str], str] = run_madr) -> None:
    """Write what the README quotes from `run` into `folder`: its excerpt files and, in commands.json,
    the output of each `$ madr ...` line of its command blocks."""
    lines = text.split("\n")
    outputs: dict[str, str] = {}
    (folder / "excerpts").mkdir(parents=True, exist_ok=True)
    for block in blocks(lines):
        if block.name != COMMANDS:
            name = f"{block.name}.txt"
            (folder / "excerpts" / name).write_text((run / "excerpts" / name).read_text())
            continue
        for line in lines[block.start : block.end]:
            if line.startswith("$ "):
                outputs[line[2:]] = execute(line[2:])
    (folder / COMMAND_OUTPUTS).write_text(json.dumps(outputs, indent=1, ensure_ascii=False) + "\n")


def replay(folder: Path) -> Callable[[str], str]:
    """An `execute` that answers each command with the output kept in `folder` (see `keep`)."""
    outputs = json.loads((folder / COMMAND_OUTPUTS).read_text())

    def execute(command: str) -> str:
        if command not in outputs:
            raise KeyError(
                f"{folder / COMMAND_OUTPUTS} has no output of {command!r}: keep the excerpts again"
            )
        return outputs[command]

    return execute


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--readme", default="README.md", type=Path)
    parser.add_argument("--run", default="runs/demo", type=Path, help="A `madr demo` output folder")
    parser.add_argument("--check", action="store_true", help="Rewrite nothing; list what drifted")
    parser.add_argument(
        "--keep", default=str(KEPT), type=Path, help="Where a rewrite keeps what the README quotes"
    )
    args = parser.parse_args(argv)
    text = args.readme.read_text()
    if args.check:
        # A kept copy answers the commands itself; a demo run's folder has them run again.
        kept = (args.run / COMMAND_OUTPUTS).is_file()
        problems = check(text, args.run, replay(args.run) if kept else run_madr)
        for problem in problems:
            print(problem)
        print(f"{args.readme}: {len(problems)} quoted figure(s) differ from {args.run} beyond the tolerances")
        return 1 if problems else 0
    outputs: dict[str, str] = {}

    def execute(command: str) -> str:  # each command run once; its output is quoted and kept
        outputs[command] = run_madr(command)
        return outputs[command]

    text = regenerate(text, args.run, execute)
    args.readme.write_text(text)
    keep(text, args.run, args.keep, outputs.__getitem__)
    print(f"{args.readme}: excerpts rewritten from {args.run} and kept in {args.keep}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
