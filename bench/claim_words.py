"""Words held to the figures beside them: a sentence of README.md or docs/ may say that one system is
ahead of, behind, above or below another, beats it, or is significantly different, only where the p-value
it quotes for that comparison is under 0.01 (the threshold every table here marks at); it may say level or
tie only where that p-value is 0.01 or more; and it may say a timing target is met only from the worst of
repeated runs (one run's figure moves by about 15 % on these machines, docs/PERFORMANCE.md).

The p-value beside a word is the first one quoted after it in its clause (up to the next such word, a
semicolon outside brackets, or the end of the sentence); a word with no p-value there is not checked here
(the claims of the main table are checked against its marks, `bench.results_claims`). A word after "not",
"no", "neither", "nor" or "none" (since the last comma, colon or bracket) is a denial and holds by
itself; "above" or "below" followed by a number
is a threshold ("none below 0.01"), not a comparison. `bench.results_claims` runs `overstated` over the
documents and fails on any sentence it returns.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

SIGNIFICANCE = 0.01
# One run's timing moves by about 15 % on these machines (three 5 % nights of one 1M catalog: 546.8, 638.3
# and 545.8 s, bench/results/nightly_scale_seeded.json).
TIMING_SPREAD = 0.15
DOCUMENTS = (Path("README.md"), Path("docs/RESULTS.md"), Path("docs/PERFORMANCE.md"), Path("docs/SCALING.md"))
STRONG = ("ahead", "behind", "beats", "beat", "above", "below", "significant", "significantly", "outperforms")
LEVEL = ("level", "tie", "tied")
NEGATIONS = ("not", "no", "neither", "nor", "none", "never", "without")
_WORD = re.compile(r"\b(" + "|".join(STRONG + LEVEL) + r")\b", re.IGNORECASE)
_NUMBER = r"\d+(?:\.\d+)?(?:e[-−]?\d+)?"
# `p 0.02`, `p = 0.004`, `p < 1e-19`, `p 0.0024 to 0.0054`, `p 0.05-0.11`, `p 0.13 / 0.036 / 0.062`.
_P = re.compile(
    rf"\bp\s*(=|<|≤|>|≥)?\s*({_NUMBER}(?:\s*(?:to|-|–|/|and)\s*{_NUMBER})*)(?!\d|\.\d)", re.IGNORECASE
)
_MET = re.compile(r"(?<!not )\bmet\b", re.IGNORECASE)
_TIMING = re.compile(r"\d\s*(?:ms|s|min|minutes|seconds|hours|×|x)\b")


@dataclass(frozen=True)
class Overstated:
    document: str
    line: int
    word: str
    why: str
    sentence: str

    def __str__(self) -> str:
        shown = self.sentence if len(self.sentence) <= 160 else self.sentence[:157] + "..."
        return f"{self.document}:{self.line}: {self.word!r} {self.why}: {shown}"


def sentences(markdown: str) -> Iterator[tuple[int, str]]:
    """(first line of its paragraph, text) of each prose sentence: paragraphs and list items, code blocks
    and tables left out, split at a full stop followed by a capital or a bracket."""
    block: list[str] = []
    start, fenced = 0, False
    lines = markdown.splitlines()
    for number, line in enumerate([*lines, ""], start=1):
        if line.startswith("```"):
            fenced = not fenced
        item = re.match(r"^\s*(?:[-*]|\d+\.)\s", line)
        ends = fenced or not line.strip() or line.startswith(("|", "#", "```")) or item
        if ends and block:
            for part in re.split(r"(?<=[.!?])\s+(?=[A-Z(*])", " ".join(block)):
                yield start, part
            block = []
        if fenced or not line.strip() or line.startswith(("|", "#", "```")):
            continue
        if not block:
            start = number
        block.append(line.strip())


def _clauses(sentence: str) -> list[str]:
    """The sentence cut at semicolons outside brackets."""
    parts, depth, current = [], 0, []
    for ch in sentence:
        depth += ch in "(["
        depth -= ch in ")]"
        if ch == ";" and depth <= 0:
            parts.append("".join(current))
            current = []
            continue
        current.append(ch)
    return [*parts, "".join(current)]


def _p_bounds(text: str) -> tuple[float, float] | None:
    """The lowest and highest p the first quoted p-value allows (`p < 0.01`: 0 to 0.01; `p ≥ 0.14`: 0.14
    to 1; `p 0.05-0.11`: 0.05 to 0.11), or None when the text quotes none."""
    found = _P.search(text)
    if not found:
        return None
    values = [float(n.replace("−", "-")) for n in re.findall(_NUMBER, found.group(2))]
    operator = found.group(1) or "="
    if operator in "<≤":
        return 0.0, max(values)
    if operator in ">≥":
        return min(values), 1.0
    return min(values), max(values)


def _denied(before: str) -> bool:
    """A negation between the word and the punctuation before it ("no aspect-aware variant is ahead")."""
    phrase = re.split(r"[,:()]", before)[-1]
    # Hyphenated names stay whole: "no-fusion is ahead" is no denial.
    return any(word in NEGATIONS for word in re.findall(r"[a-z'][a-z'-]*", phrase.lower()))


def _inside_its_brackets(after: str) -> str:
    """`after` up to the bracket that closes one opened before the word ("(55 % tie exactly), so p ...")."""
    depth = 0
    for i, ch in enumerate(after):
        depth += ch in "(["
        depth -= ch in ")]"
        if depth < 0:
            return after[:i]
    return after


def check_sentence(sentence: str) -> list[tuple[str, str]]:
    """(word, why) for each word of the vocabulary the figure beside it does not support."""
    wrong = []
    for clause in _clauses(sentence):
        words = list(_WORD.finditer(clause))
        for i, word in enumerate(words):
            name = word.group(1).lower()
            end = words[i + 1].start() if i + 1 < len(words) else len(clause)
            after = _inside_its_brackets(clause[word.end() : end])
            if _denied(clause[: word.start()]):
                continue
            if name in ("above", "below") and re.match(r"\s*[-−]?\d", after):
                continue  # a threshold: "none below 0.01"
            bounds = _p_bounds(after)
            if bounds is None:
                continue
            low, high = bounds
            if name in LEVEL and low < SIGNIFICANCE:
                wrong.append((name, f"beside p {low:g}, under {SIGNIFICANCE}"))
            elif name not in LEVEL and high > SIGNIFICANCE:
                wrong.append((name, f"beside p {high:g}, not under {SIGNIFICANCE}"))
    if _MET.search(sentence) and _TIMING.search(sentence) and "worst" not in sentence.lower():
        wrong.append(("met", "on a timing without the worst of repeated runs"))
    return wrong


def timing_met(runs: list[float], target: float, higher_is_better: bool = False) -> bool:
    """A timing target is met by the worst of repeated runs, or by one run that clears it by more than
    the machines' run-to-run spread."""
    worst = min(runs) if higher_is_better else max(runs)
    margin = 1.0 if len(runs) >= 2 else 1.0 + TIMING_SPREAD
    return worst >= target * margin if higher_is_better else worst * margin <= target


def overstated(document: Path, markdown: str | None = None) -> list[Overstated]:
    """Every word of `document` that says more than the figure beside it."""
    text = document.read_text() if markdown is None else markdown
    return [
        Overstated(str(document), line, word, why, sentence)
        for line, sentence in sentences(text)
        for word, why in check_sentence(sentence)
    ]
