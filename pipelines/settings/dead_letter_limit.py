"""--max_dead_letter_fraction, one flag for every stage that reads records and refuses too many bad ones,
and the commonest reasons of a stage's dead letters, which its refusal and the morning report quote.

The embed stage reads products, the evaluation queries and judgments; past this share of dead letters
each stops (exit 2) rather than go on with what is left. Each settings class that reads it
(`EmbedSettings`, `EvaluateSettings`) has a field made by `dead_letter_limit()`; a command whose config
holds both declares the flag once, as `--depth` (`pipelines.settings.depth`).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any

from apache_beam.io.filesystems import FileSystems

from pipelines.settings.stage_config import setting

DEFAULT_MAX_DEAD_LETTER_FRACTION = 0.01
# Reasons the morning report lists.
TOP_REASONS = 5


def dead_letter_limit() -> Any:
    """The `max_dead_letter_fraction` field of a settings class (`EmbedSettings`, `EvaluateSettings`)."""
    return setting(
        DEFAULT_MAX_DEAD_LETTER_FRACTION,
        "Fail the stage when more than this fraction of its records (products; queries or judgments) are "
        "dead letters. They are still written first, so the failure can be inspected",
    )


def check_dead_letter_limit(fraction: float) -> None:
    if not 0 <= fraction <= 1:
        raise ValueError(f"--max_dead_letter_fraction must be in [0, 1], got {fraction}")


def dead_letter_reasons(paths: list[str], top: int = TOP_REASONS) -> list[tuple[str, int]]:
    """The most frequent reasons in dead-letter files, with record ids and numbers generalised (a
    reason names its record: "p17: title is empty" and "p18: title is empty" are one reason)."""
    counts: Counter[str] = Counter()
    for path in paths:
        with FileSystems.open(path) as handle:
            for line in handle.read().decode("utf-8").splitlines():
                if line.strip():
                    letter = json.loads(line)
                    counts[_general(str(letter.get("reason", "")), letter.get("record_id"))] += 1
    return counts.most_common(top)


def _general(reason: str, record_id: Any) -> str:
    if record_id:
        reason = reason.replace(str(record_id), "<id>")
    return re.sub(r"\d+", "N", reason)


__all__ = [
    "DEFAULT_MAX_DEAD_LETTER_FRACTION",
    "check_dead_letter_limit",
    "dead_letter_limit",
    "dead_letter_reasons",
]
