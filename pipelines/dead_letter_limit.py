"""--max_dead_letter_fraction, one flag for every stage that reads records and refuses too many bad ones.

The embed stage reads products, the evaluation queries and judgments; past this share of dead letters
each stops (exit 2) rather than go on with what is left. Beam parses every options class into one
parser, so the flag is declared once, here (`DeadLetterOptions`); each settings class that reads it
(`EmbedSettings`, `EvaluateSettings`) has a field made by `dead_letter_limit()` and leaves the flag to
this class (`options_class(..., shared=...)`), as `--depth` is shared (`pipelines.depth`).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any

from apache_beam.options.pipeline_options import PipelineOptions

from pipelines.stage_config import add_config_arguments, setting

DEFAULT_MAX_DEAD_LETTER_FRACTION = 0.01


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


@dataclass(frozen=True)
class DeadLetterLimit:
    """The field that declares --max_dead_letter_fraction (DeadLetterOptions)."""

    max_dead_letter_fraction: float = dead_letter_limit()


class DeadLetterOptions(PipelineOptions):
    """--max_dead_letter_fraction, read by embed, evaluate and the nightly's stages."""

    @classmethod
    def _add_argparse_args(cls, parser: argparse.ArgumentParser) -> None:
        add_config_arguments(parser, DeadLetterLimit)


__all__ = [
    "DEFAULT_MAX_DEAD_LETTER_FRACTION",
    "DeadLetterLimit",
    "DeadLetterOptions",
    "check_dead_letter_limit",
    "dead_letter_limit",
]
