"""The `madr` command: one entry point, a subcommand per stage.

`madr --help` lists the commands, each once with its purpose; the table they come from is
`jobs.commands.COMMANDS` (name, purpose, flags, run). This module builds the parser from it,
sets up logging and turns what a command raises into one line and an exit code
(`jobs.cli_errors`).
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from jobs import extend_vocabulary  # noqa: F401  registers `madr extend-vocabulary`
from jobs.cli_errors import report_error
from jobs.commands import BEAM_COMMANDS, COMMANDS

EPILOG = (
    f"The Beam commands ({', '.join(BEAM_COMMANDS)}; build-index with --num_index_shards > 1) accept "
    "every Beam pipeline option as well (--runner, --project, --region, --temp_location, --setup_file, "
    "--direct_running_mode, ...). `madr COMMAND --help` shows a command's flags."
)


def _parser() -> argparse.ArgumentParser:
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
    for command in COMMANDS.values():
        command.register(commands)
    return parser


def _quiet_libraries() -> None:
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    for noisy in ("apache_beam", "absl", "bm25s"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args, beam_args = _parser().parse_known_args(argv)
    logging.basicConfig(level=args.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    _quiet_libraries()
    if beam_args and args.command not in BEAM_COMMANDS:
        _parser().error(f"unrecognised arguments for {args.command}: {' '.join(beam_args)}")
    try:
        args.run(args, beam_args, argv[argv.index(args.command) + 1 :])
    except Exception as error:
        if args.debug:
            raise
        # A user's error (a bad value, a missing or damaged file) as one line, exit code 2; a bug's
        # traceback and how to report it, exit code 1 (jobs/cli_errors.py).
        return report_error(args.command, error)
    return 0


if __name__ == "__main__":
    sys.exit(main())
