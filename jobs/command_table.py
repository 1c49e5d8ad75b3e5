"""The command table of `madr`: every command listed once, and the machinery that registers each.

`INDEX` lists the commands in the order of `madr --help`: name, the module under `jobs.commands` that
registers it, the one line `madr --help` shows, and whether it takes Beam pipeline options. That is
all the CLI needs until it knows which command runs, so `madr --help` imports none of them and
`madr NAME` imports only NAME's module (`load_command`): importing every stage put 10 s of torch,
transformers and ScaNN in front of each command, even of `--help`.

Every command is one contract: a frozen config dataclass and a run function. Its flags are generated
from the config (`command_flags`: its `setting`, `nested` and `subcommands` fields, in the terms of
pipelines/settings/stage_config.py), which the parsed flags build, so the config validates them. The run is
called as ``run(config, beam_options)``, with the Beam pipeline options of the flags the command's parser left
(only commands with ``beam=True`` accept any; `jobs.cli.parse_command` parses a command line the same
way). Drivers build the same config and call the same run.

In its module, each command's run registers it with `@command(NAME, ConfigClass)` (its docstring is the
description of `madr NAME --help`); `COMMANDS` holds those registered so far. Adding a command means
a line here, a config, and a decorated run in a module of `jobs.commands`.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, NamedTuple, TypeVar

if TYPE_CHECKING:  # Beam is imported when a command runs, not for `madr --help`
    from apache_beam.options.pipeline_options import PipelineOptions

BEAM_NOTE = "Any other flag is passed to Beam as a pipeline option (e.g. --runner DataflowRunner)."

Config = TypeVar("Config")
AddArguments = Callable[[argparse.ArgumentParser], None]
Run = Callable[[Any, "PipelineOptions"], None]


class CommandLine(NamedTuple):
    """What `madr NAME ...` was given: the parsed flags, the flags argparse did not know (Beam's), and the
    command line after NAME (a preset yields to each flag written there)."""

    args: argparse.Namespace
    beam_args: tuple[str, ...] = ()
    argv: tuple[str, ...] = ()


@dataclass(frozen=True)
class Flags(Generic[Config]):
    """How a command line becomes a command's config: the flags `add_arguments` declares on the command's
    parser, and the config `build` makes of them (its `__post_init__` validates them)."""

    add_arguments: AddArguments
    build: Callable[[CommandLine], Config]


def command_flags(
    config_class: type[Config], then: Callable[[Config, set[str]], Config] | None = None
) -> Flags[Config]:
    """The flags of `config_class`'s `setting`, `nested` and `subcommands` fields
    (`pipelines.settings.stage_config`), and the config built of them and of the flags left for Beam (a
    `beam_options` field holds those); `then(config, written)` finishes it knowing which flags the command
    line wrote (a `--preset` fills the others)."""
    from pipelines.settings.stage_config import (
        BEAM_ARGS,
        add_config_arguments,
        config_from_values,
        written_flags,
    )

    def add_arguments(parser: argparse.ArgumentParser) -> None:
        add_config_arguments(parser, config_class, enforce_required=True)

    def build(line: CommandLine) -> Config:
        config = config_from_values(config_class, {**vars(line.args), BEAM_ARGS: line.beam_args})
        return config if then is None else then(config, written_flags(add_arguments, line.argv))

    return Flags(add_arguments, build)


@dataclass(frozen=True)
class CommandEntry:
    """A command as `madr --help` lists it, known before its module is imported."""

    name: str
    module: str  # under jobs.commands
    purpose: str  # the one line of `madr --help`; fits an 80-column terminal
    beam: bool = False  # accepts Beam pipeline options besides its own flags


INDEX: tuple[CommandEntry, ...] = (
    CommandEntry("generate", "data", "write the seeded synthetic benchmark as Parquet"),
    CommandEntry("ingest", "data", "ESCI, WANDS or your own files -> a dataset folder"),
    CommandEntry("pretrain", "training", "pre-train an encoder (MLM + aspect losses)"),
    CommandEntry("train", "training", "fine-tune an encoder variant on a dataset folder"),
    CommandEntry("adapt", "training", "adapt the shipped model to your catalog (no judgments)"),
    CommandEntry("embed", "embed", "Beam: embed a catalog into Parquet shards", beam=True),
    # One shard on the local runner is built in-process; any other runner or shard count runs in Beam.
    CommandEntry("build-index", "index", "build a ScaNN index artifact over the shards", beam=True),
    CommandEntry("build-sparse-index", "index", "inverted index over a UHD model's sparse vectors"),
    CommandEntry("evaluate", "evaluate", "Beam: retrieve for the test queries, report metrics", beam=True),
    CommandEntry("enrich", "embed", "Beam: fill the catalog's aspect gaps with predictions", beam=True),
    CommandEntry("export-vertex", "embed", "Beam: export for Vertex AI Vector Search", beam=True),
    CommandEntry("experiment", "runs", "train and evaluate variants under one budget"),
    CommandEntry("explain", "inspect", "Table 8: per-aspect predictions of a query and product"),
    CommandEntry("neighbours", "inspect", "Table 9: nearest values in an aspect value table"),
    CommandEntry("search", "inspect", "search an index with a query in words (filters)"),
    CommandEntry("export-serving", "serve", "a serving bundle: query encoder, index, BM25, filters"),
    CommandEntry("serve", "serve", "an HTTP search server on a serving bundle (no torch)"),
    CommandEntry("nightly", "runs", "the nightly job: embed, index, evaluate, publish", beam=True),
    CommandEntry("compare", "reports", "compare two evaluations query by query (paired t-test)"),
    CommandEntry("report", "reports", "a nightly run's morning report, as one HTML page"),
    CommandEntry("demo", "runs", "the whole job end to end on the embedded default data"),
    CommandEntry("extend-vocabulary", "training", "add your catalog's aspect values to a model"),
)
ENTRIES = {entry.name: entry for entry in INDEX}
BEAM_COMMANDS = tuple(entry.name for entry in INDEX if entry.beam)


@dataclass(frozen=True)
class Command:
    name: str
    purpose: str  # the one line of `madr --help`
    description: str  # the first paragraph of `madr NAME --help`
    config_class: type  # the frozen dataclass its flags are generated from
    flags: Flags[Any]
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
        parser.set_defaults(run=self.run, chosen=self)
        return parser

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        self.flags.add_arguments(parser)

    def config(self, line: CommandLine) -> Any:
        """The command's config from its command line."""
        return self.flags.build(line)


# The commands registered so far: a command's module registers it when imported (`load_command`).
COMMANDS: dict[str, Command] = {}


def command(
    name: str,
    config_class: type,
    *,
    then: Callable[[Any, set[str]], Any] | None = None,
    beam_note: bool | None = None,
    show_defaults: bool = False,
    epilog: str | None = None,
) -> Callable[[Run], Run]:
    """Register the decorated ``run(config, beam_options)`` as `madr NAME`, its flags generated from
    `config_class` and its config built of them (`then(config, written)` finishes it knowing which flags
    the command line wrote: a `--preset` or `--profile` fills the others); its docstring is the description
    of its --help, its purpose and whether it takes Beam options are NAME's line of `INDEX`.

    `beam_note` (default: the command takes Beam options) says so under its --help; `epilog` replaces
    that note with the command's own. `show_defaults`: --help appends each flag's default.
    """

    def register(run: Run) -> Run:
        entry = ENTRIES.get(name)
        if entry is None or run.__module__ != f"jobs.commands.{entry.module}":
            where = "is not in INDEX" if entry is None else f"belongs in jobs.commands.{entry.module}"
            raise ValueError(f"command {name!r} {where} (jobs/command_table.py)")
        if name in COMMANDS:
            raise ValueError(f"command {name!r} is registered twice")
        params = getattr(config_class, "__dataclass_params__", None)
        if params is None or not params.frozen:
            raise TypeError(f"command {name!r}: its config {config_class!r} is not a frozen dataclass")
        description = " ".join((run.__doc__ or entry.purpose).split())
        beam = entry.beam
        note = epilog or (BEAM_NOTE if (beam if beam_note is None else beam_note) else None)
        flags = command_flags(config_class, then)
        COMMANDS[name] = Command(
            name, entry.purpose, description, config_class, flags, run, beam, show_defaults, note
        )
        return run

    return register


def load_command(name: str) -> Command:
    """`madr NAME`'s command, its module imported (which registers it)."""
    importlib.import_module(f"jobs.commands.{ENTRIES[name].module}")
    return COMMANDS[name]


def load_all() -> dict[str, Command]:
    """Every command, in the order of `madr --help` (for tests and the README's check)."""
    return {entry.name: load_command(entry.name) for entry in INDEX}


__all__ = [
    "BEAM_COMMANDS",
    "BEAM_NOTE",
    "COMMANDS",
    "INDEX",
    "AddArguments",
    "Command",
    "CommandEntry",
    "CommandLine",
    "Flags",
    "Run",
    "command",
    "command_flags",
    "load_all",
    "load_command",
]
