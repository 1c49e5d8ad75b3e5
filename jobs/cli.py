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

from jobs.command_table import BEAM_COMMANDS, INDEX, Command, CommandLine, load_command

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
    if beam_args and args.command not in BEAM_COMMANDS:
        parser.error(f"unrecognised arguments for {args.command}: {' '.join(beam_args)}")
    if beam_args:
        from pipelines.beam_flags import refused_flags  # Beam's options: only for flags left to Beam

        # The nightly passes madr's stage flags on to every stage; another command would not read them.
        refused = refused_flags(beam_args, args.command, stage_flags_allowed=args.command == "nightly")
        if refused:
            parser.error(f"{'; '.join(refused)} (`madr {args.command} --help` lists its flags)")
    line = CommandLine(args, tuple(beam_args), tuple(argv[argv.index(args.command) + 1 :]))
    try:
        from apache_beam.options.pipeline_options import PipelineOptions  # after --help: it takes a second

        beam_options = PipelineOptions(beam_args)
        if beam_args:
            from pipelines.runner import refuse_unusable_runner

            refuse_unusable_runner(beam_options)  # before the command reads or writes anything
        args.run(args.chosen.config(line), beam_options)
    except Exception as error:
        if args.debug:
            raise
        from jobs.cli_errors import report_error  # Beam's file systems: only when there is an error

        # A user's error (a bad value, a missing or damaged file) as one line, exit code 2; a bug's
        # traceback and how to report it, exit code 1 (jobs/cli_errors.py).
        return report_error(args.command, error)
    return 0


if __name__ == "__main__":
    sys.exit(main())
