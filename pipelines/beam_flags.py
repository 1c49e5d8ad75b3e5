"""The flags a command hands on to Beam, checked before Beam drops any of them without a word.

A Beam command (`madr embed`, `evaluate`, ...) passes the flags its own parser does not know to Beam as
pipeline options, so that --runner, --project or --direct_num_workers reach the runner. Beam is lenient
with what else it gets, and two mistakes then pass silently:
- a typo (`madr embed --precison int8`): Beam logs "Discarding unparseable args" and the stage runs at
  the default precision;
- another stage's flag (`madr embed --depth 100`): every madr options class is registered with Beam,
  so Beam parses it, and the stage, which never reads it, runs as if it had not been given.
`refused_flags` names both, for the command to stop with; only Beam's own options pass.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator, Sequence

from apache_beam.options.pipeline_options import PipelineOptions


def flag_names(flags: Sequence[str]) -> list[str]:
    """The option names written in `flags`, in order (`--depth 100` and `--depth=100` alike)."""
    return [token[2:].split("=", 1)[0] for token in flags if token.startswith("--") and len(token) > 2]


def _option_classes(root: type[PipelineOptions] = PipelineOptions) -> Iterator[type[PipelineOptions]]:
    for subclass in root.__subclasses__():
        yield subclass
        yield from _option_classes(subclass)


def madr_option_flags() -> dict[str, str]:
    """Each flag declared by one of madr's options classes (those imported so far), and its class."""
    declared: dict[str, str] = {}
    for options_class in _option_classes():
        # Runner options (`--dask_address`) are the runner's, like Beam's own: every stage passes them on.
        if options_class.__module__.startswith(("apache_beam", "pipelines.cluster")):
            continue
        parser = argparse.ArgumentParser(add_help=False)
        options_class._add_argparse_args(parser)
        for action in parser._actions:
            for option in action.option_strings:
                declared.setdefault(option.lstrip("-"), options_class.__name__)
    return declared


def refused_flags(flags: Sequence[str], reader: str, stage_flags_allowed: bool = False) -> list[str]:
    """Why each flag of `flags` would not reach the command, one line per flag; empty when all are Beam's.

    `flags` are what the command's own parser left; `reader` names the command or stage for the message
    ("embed", "the index stage"). `stage_flags_allowed`: madr's stage flags are the
    command's to pass on (`madr nightly --precision int8` sets every stage's precision), so only typos
    are refused.
    """
    options = PipelineOptions(list(flags))
    # Beam's own parse: what none of the registered options classes declares comes back only when kept.
    unknown = set(options.get_all_options(retain_unknown_options=True)) - set(options.get_all_options())
    madr_flags = {} if stage_flags_allowed else madr_option_flags()
    reasons = []
    for name in dict.fromkeys(flag_names(flags)):
        if name.replace("-", "_") in unknown:
            reasons.append(f"--{name} is not a flag of {reader} or of Beam")
        elif name in madr_flags:
            reasons.append(f"--{name} is another stage's flag ({madr_flags[name]}): {reader} never reads it")
    return reasons


__all__ = ["flag_names", "madr_option_flags", "refused_flags"]
