"""The retrieval depth, one flag for every command that reads it (issue 48).

How deep an evaluation retrieves per query and the deepest k an index is tuned to serve are one setting:
`--depth`. Each settings class that reads it (`EvaluateSettings`, `IndexSettings`) has a `depth` field
made by `retrieval_depth()`; a command whose config holds both declares the flag once
(`pipelines.settings.stage_config.flag_fields`), and one value sets both.
"""

from __future__ import annotations

from typing import Any

from pipelines.settings.stage_config import setting
from schemas import RETRIEVAL_DEPTH

DEPTH_HELP = (
    "Retrieval depth: products an evaluation retrieves per query (capped at the corpus), and the deepest k "
    "an index is tuned to serve well, which sizes its leaves and re-ranking; Recall@10k by default. The "
    "nightly evaluates to the depth its index was built for, so a metric at a deeper cut-off is not reported"
)
# Flags renamed in favour of one name; the old one still parses, with a warning.
OLD_FLAG_NAMES = {"max_k": "depth"}


def retrieval_depth() -> Any:
    """The `depth` field of a settings class (`EvaluateSettings`, `IndexSettings`); `--max_k`, its old name,
    still parses."""
    return setting(RETRIEVAL_DEPTH, DEPTH_HELP, old_names=tuple(f"--{old}" for old in OLD_FLAG_NAMES))


def check_depth(depth: int) -> None:
    """The one check of --depth, for every settings class that has it."""
    if isinstance(depth, bool) or not isinstance(depth, int) or depth < 1:
        raise ValueError(f"--depth must be an integer >= 1, got {depth!r}")


__all__ = ["DEPTH_HELP", "OLD_FLAG_NAMES", "check_depth", "retrieval_depth"]
