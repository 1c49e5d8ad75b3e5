"""The command table's machinery: a `Command` (name, purpose, description, flags, run), the `COMMANDS`
registry in the order of `madr --help`, and the `@command(...)` decorator that fills it. The commands
themselves are registered in `jobs.commands`.

A run is called as ``run(args, beam_args, stage_argv)``: the parsed flags, the flags argparse did
not know (only commands with ``beam=True`` accept them, as Beam pipeline options), and the command
line after the command's name (what a Beam stage parses its `PipelineOptions` from).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass

BEAM_NOTE = "Any other flag is passed to Beam as a pipeline option (e.g. --runner DataflowRunner)."

Run = Callable[[argparse.Namespace, list[str], list[str]], None]
AddArguments = Callable[[argparse.ArgumentParser], None]


@dataclass(frozen=True)
class Command:
    name: str
    purpose: str  # the one line of `madr --help`
    description: str  # the first paragraph of `madr NAME --help`
    add_arguments: AddArguments
    run: Run
    beam: bool = False  # accepts Beam pipeline options besides its own flags
    show_defaults: bool = False  # `--help` appends each flag's default
    epilog: str | None = None

    def register(self, commands: argparse._SubParsersAction) -> argparse.ArgumentParser:
        formatter = argparse.ArgumentDefaultsHelpFormatter if self.show_defaults else argparse.HelpFormatter
        parser = commands.add_parser(
            self.name,
            help=self.purpose,
            description=self.description,
            epilog=self.epilog,
            formatter_class=formatter,
        )
        self.add_arguments(parser)
        parser.set_defaults(run=self.run)
        return parser


# The table, filled in the order of `madr --help`. Purposes fit one line of an 80-column terminal.
COMMANDS: dict[str, Command] = {}


def command(
    name: str,
    purpose: str,
    add_arguments: AddArguments,
    *,
    beam: bool = False,
    beam_note: bool | None = None,
    show_defaults: bool = False,
) -> Callable[[Run], Run]:
    """Register the decorated run as `madr NAME`, its docstring as the description of its --help.

    `beam`: the command accepts Beam pipeline options; `beam_note` (default: `beam`) says so under its
    --help. `show_defaults`: --help appends each flag's default.
    """

    def register(run: Run) -> Run:
        if name in COMMANDS:
            raise ValueError(f"command {name!r} is registered twice")
        description = " ".join((run.__doc__ or purpose).split())
        epilog = BEAM_NOTE if (beam if beam_note is None else beam_note) else None
        COMMANDS[name] = Command(name, purpose, description, add_arguments, run, beam, show_defaults, epilog)
        return run

    return register


__all__ = ["BEAM_NOTE", "COMMANDS", "AddArguments", "Command", "Run", "command"]
