"""The flags a command hands on to Beam, checked before Beam drops any of them without a word.

A Beam command (`madr embed`, `evaluate`, ...) parses its own flags from its config
(`pipelines.settings.stage_config`) and passes the flags left over to Beam as pipeline options, so that
--runner, --project or --direct_num_workers reach the runner. None of madr's flags is a Beam option, and Beam
is lenient with what it does not know: it logs "Discarding unparseable args" and runs. Two mistakes would
then pass silently:
- a typo (`madr embed --precison int8`): the stage runs at the default precision;
- another command's flag (`madr embed --depth 100`): the stage never reads it.
`refused_flags` names both, another command's flag with its owner, for the command to stop with; only
Beam's own options (and the runners', `pipelines.cluster`) pass.
"""

from __future__ import annotations

import argparse
from collections.abc import Collection, Mapping, Sequence

from apache_beam.options.pipeline_options import PipelineOptions


def flag_names(flags: Sequence[str]) -> list[str]:
    """The option names written in `flags`, in order (`--depth 100` and `--depth=100` alike)."""
    return [token[2:].split("=", 1)[0] for token in flags if token.startswith("--") and len(token) > 2]


def beam_unknown(flags: Sequence[str]) -> set[str]:
    """The option names of `flags` that no Beam options class declares (as Beam spells them, `_` for `-`)."""
    options = PipelineOptions(list(flags))
    # Beam's own parse: what none of its options classes declares comes back only when kept.
    return set(options.get_all_options(retain_unknown_options=True)) - set(options.get_all_options())


def flag_owners(parsers: Mapping[str, argparse.ArgumentParser], joiner: str = ", ") -> dict[str, str]:
    """Each flag the `parsers` declare (by name, no dashes) and who declares it, the parsers' names joined
    ("build-index, evaluate"): what `refused_flags` says of a flag that belongs elsewhere."""
    owners: dict[str, list[str]] = {}
    for owner, parser in parsers.items():
        for option in dict.fromkeys(
            o.lstrip("-") for action in parser._actions for o in action.option_strings
        ):
            owners.setdefault(option, []).append(owner)
    return {option: joiner.join(names) for option, names in owners.items()}


def refused_flags(
    flags: Sequence[str],
    reader: str,
    owners: Mapping[str, str] | None = None,
    passed_on: Collection[str] = (),
) -> list[str]:
    """Why each flag of `flags` would not reach the command, one line per flag; empty when all are Beam's.

    `flags` are what the command's own parser left; `reader` names the command or stage for the message
    ("embed", "the index stage"). `owners` names, for a flag of other commands or stages, which
    ("build-index, evaluate"), so the message can say where it belongs. `passed_on`: flags the command
    hands on to stages that read them (`madr nightly --precision int8` sets every stage's precision), so
    they are not refused here.
    """
    if not flags:
        return []
    owners = owners or {}
    unknown = beam_unknown(flags)
    reasons = []
    for name in dict.fromkeys(flag_names(flags)):
        if name in passed_on or name.replace("-", "_") not in unknown:
            continue
        if name in owners:
            reasons.append(f"--{name} is a flag of {owners[name]}: {reader} never reads it")
        else:
            reasons.append(f"--{name} is not a flag of {reader} or of Beam")
    return reasons


__all__ = ["beam_unknown", "flag_names", "flag_owners", "refused_flags"]
