"""The retrieval depth, one flag for every command that reads it (issue 48).

How deep an evaluation retrieves per query and the deepest k an index is tuned to serve are one setting:
`--depth`. Beam parses every options class into one parser, so the flag is declared once, here
(`DepthOptions`); each settings class that reads it (`EvaluateSettings`, `IndexSettings`) has a `depth`
field made by `retrieval_depth()` and leaves the flag to this class (`options_class(..., shared=...)`).
"""

from __future__ import annotations

import argparse
import warnings
from dataclasses import dataclass
from typing import Any

from apache_beam.options.pipeline_options import PipelineOptions

from pipelines.stage_config import add_config_arguments, setting
from schemas import RETRIEVAL_DEPTH

DEPTH_HELP = (
    "Retrieval depth: products an evaluation retrieves per query (capped at the corpus), and the deepest k "
    "an index is tuned to serve well, which sizes its leaves and re-ranking; Recall@10k by default. The "
    "nightly evaluates to the depth its index was built for, so a metric at a deeper cut-off is not reported"
)
# Flags renamed in favour of one name; the old one still parses, with a warning.
OLD_FLAG_NAMES = {"max_k": "depth"}


def retrieval_depth() -> Any:
    """The `depth` field of a settings class (`EvaluateSettings`, `IndexSettings`)."""
    return setting(RETRIEVAL_DEPTH, DEPTH_HELP)


class _OldFlagName(argparse.Action):
    """An old flag name: parsed into the new one's field, with a warning naming the new flag."""

    def __call__(
        self, parser: Any, namespace: argparse.Namespace, values: Any, option_string: Any = None
    ) -> None:
        warnings.warn(f"{option_string} is deprecated: it is now --{self.dest}", FutureWarning, stacklevel=2)
        setattr(namespace, self.dest, values)


@dataclass(frozen=True)
class RetrievalDepth:
    """The field that declares --depth (DepthOptions); a settings class that reads it has its own."""

    depth: int = retrieval_depth()


class DepthOptions(PipelineOptions):
    """--depth, read by build-index, evaluate, the nightly and the demo (and --max_k, its old name)."""

    @classmethod
    def _add_argparse_args(cls, parser: argparse.ArgumentParser) -> None:
        add_config_arguments(parser, RetrievalDepth)
        for old, new in OLD_FLAG_NAMES.items():
            parser.add_argument(
                f"--{old}",
                dest=new,
                type=int,
                action=_OldFlagName,
                default=argparse.SUPPRESS,
                help=f"Deprecated: the old name of --{new}",
            )


__all__ = ["DEPTH_HELP", "OLD_FLAG_NAMES", "DepthOptions", "RetrievalDepth", "retrieval_depth"]
