"""The `madr` command: one entry point, a subcommand per stage.

`madr --help` lists the commands, each once with its purpose, from `jobs.command_table.INDEX`,
without importing any of them. A command line is parsed twice: once with every command a stub, which
names the command; then with that command's module imported and its flags added (the others stay
stubs). This module also sets up logging and turns what a command raises into one line and an exit
code (`jobs.cli_errors`).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from jobs.command_table import BEAM_COMMANDS, INDEX, Command, CommandLine, load_all, load_command

if TYPE_CHECKING:  # Beam is imported when a command runs, not for `madr --help`
    from apache_beam.options.pipeline_options import PipelineOptions

EPILOG = (
    f"The Beam commands ({', '.join(BEAM_COMMANDS)}) accept "
    "every Beam pipeline option as well (--runner, --project, --region, --temp_location, --setup_file, "
    "--direct_running_mode, ...). `madr COMMAND --help` shows a command's flags."
)


def _parser(chosen: Command | None = None) -> argparse.ArgumentParser:
    """`madr`'s parser, with `chosen`'s flags; every other command is a stub that only names it."""
    parser = argparse.ArgumentParser(
        prog="madr",
        description="Multi-aspect dense retrieval over product catalogs, as Apache Beam batch jobs.",
        epilog=EPILOG,
    )
    parser.add_argument(
        "--log_level",
        default="INFO",
        type=str.upper,
        choices=("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"),
        help="Python logging level (default: %(default)s)",
    )
    parser.add_argument(
        "--debug",
        action="store_true",
        help="On an error, show the Python traceback instead of the one-line message (give it before "
        "the command: madr --debug embed ...)",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for entry in INDEX:
        if chosen is not None and entry.name == chosen.name:
            chosen.register(commands)
        else:
            # Without its own --help, so that `madr NAME --help` reaches NAME's full parser.
            commands.add_parser(entry.name, help=entry.purpose, add_help=False)
    return parser


def _quiet_transformers() -> None:
    # transformers reads these when it is first imported, by the command's module or later in its run;
    # importing it here only to quiet it cost commands that never use it a second.
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")


def _quiet_libraries() -> None:
    """After the command's module is imported: libraries that set their loggers' levels on import (bm25s
    does) would undo a level set before."""
    if "transformers" in sys.modules:  # imported already: tell it directly
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()
        hf_logging.disable_progress_bar()
    for noisy in ("apache_beam", "absl", "bm25s", "distributed"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def parser_for(argv: Sequence[str]) -> argparse.ArgumentParser:
    """The parser of the command line `argv`: its command's module imported and its flags added.

    Exits as argparse does on --help before a command, or on no command or an unknown one."""
    named, _ = _parser().parse_known_args(argv)
    return _parser(load_command(named.command))


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    _quiet_transformers()
    parser = parser_for(argv)
    args, beam_args = parser.parse_known_args(argv)
    logging.basicConfig(level=args.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    _quiet_libraries()
    _refuse_leftovers(parser, args.command, beam_args)
    line = CommandLine(args, tuple(beam_args), tuple(argv[argv.index(args.command) + 1 :]))
    try:
        args.run(args.chosen.config(line), _beam_options(beam_args))
    except Exception as error:
        if args.debug:
            raise
        from jobs.cli_errors import report_error  # Beam's file systems: only when there is an error

        # A user's error (a bad value, a missing or damaged file) as one line, exit code 2; a bug's
        # traceback and how to report it, exit code 1 (jobs/cli_errors.py).
        return report_error(args.command, error)
    return 0


def parse_command(name: str, argv: Sequence[str]) -> tuple[Any, PipelineOptions]:
    """`madr NAME ARGV`'s config and Beam options, parsed and checked as `main` does before it runs the
    command: what tests and benchmarks call a stage with, as a user types it."""
    full = [name, *argv]
    parser = parser_for(full)
    args, beam_args = parser.parse_known_args(full)
    _refuse_leftovers(parser, name, beam_args)
    return args.chosen.config(CommandLine(args, tuple(beam_args), tuple(argv))), _beam_options(beam_args)


def _refuse_leftovers(parser: argparse.ArgumentParser, name: str, beam_args: Sequence[str]) -> None:
    """Exit (argparse's error) when a flag the command's parser left would reach no one: a typo, or another
    command's flag, named with its owners. The nightly passes its stages' flags on to them."""
    if beam_args and name not in BEAM_COMMANDS:
        parser.error(f"unrecognised arguments for {name}: {' '.join(beam_args)}")
    if not beam_args:
        return
    from pipelines.settings.beam_flags import refused_flags  # Beam's options: only for flags left to Beam

    passed_on: set[str] = set()
    if name == "nightly":
        from pipelines.nightly.job import passed_on_flags

        passed_on = {flag.lstrip("-") for flags in passed_on_flags().values() for flag in flags}
    if refused_flags(beam_args, name, passed_on=passed_on):  # then name whose flag it is
        refused = refused_flags(beam_args, name, _flag_owners(name), passed_on)
        parser.error(f"{'; '.join(refused)} (`madr {name} --help` lists its flags)")


def _flag_owners(but: str) -> dict[str, str]:
    """Each flag of a command but `but`, and the commands that declare it ("build-index, evaluate")."""
    from pipelines.settings.beam_flags import flag_owners

    parsers = {}
    for command in load_all().values():
        if command.name != but:
            parsers[command.name] = argparse.ArgumentParser(add_help=False)
            command.add_arguments(parsers[command.name])
    return flag_owners(parsers)


def _beam_options(beam_args: Sequence[str]) -> PipelineOptions:
    """The Beam pipeline options of the flags left to Beam; a runner that cannot run here is refused before
    the command reads or writes anything."""
    from apache_beam.options.pipeline_options import PipelineOptions  # after --help: it takes a second

    options = PipelineOptions(list(beam_args))
    if beam_args:
        from pipelines.runner import refuse_unusable_runner

        refuse_unusable_runner(options)
    return options


if __name__ == "__main__":
    sys.exit(main())
