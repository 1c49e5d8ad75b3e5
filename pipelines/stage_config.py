"""A stage's settings as one frozen dataclass, and the command-line flags generated from it.

Each field that is a flag carries its help in `setting(...)` metadata; `add_config_arguments`
turns the fields into flags (type, default, choices and help from the field: the pattern of
Hugging Face's `HfArgumentParser`), and `config_from_values` builds the dataclass back from
parsed flags, so its `__post_init__` validates them. Drivers build the dataclass themselves
and call the stage as a function; the CLI parses the same fields from the command line, so a
flag is defined once, with its default, in one place.
"""

from __future__ import annotations

import argparse
import dataclasses
import types
import typing
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from apache_beam.options.pipeline_options import PipelineOptions

Config = TypeVar("Config")
# Flags as Beam parsed them, as argparse did, or as a mapping of their destinations.
ParsedFlags = PipelineOptions | argparse.Namespace | Mapping[str, Any]
_SCALARS = (str, int, float, bool)


def setting(
    default: Any,
    help: str,
    *,
    choices: Sequence[str] | None = None,
    required: bool = False,
    bare: str | None = None,
    flag: str | None = None,
    aliases: Sequence[str] = (),
    positional: bool = False,
) -> Any:
    """A dataclass field that is also a flag `--<field name>` (or `--<flag>`, parsed into the field's name).

    `required` fields keep a falsy default (so the dataclass can be built field by field) and
    are checked by `config_from_values`, which names the flag that is missing. `bare` is the
    value of the flag given without one (`--compare_exact` alone means "true"). `flag` keeps a
    command line's established name for a field named otherwise in code (`--data` for `dataset`);
    `aliases` are further names of the flag (`--out`, the name of earlier releases for `--output`).
    A `positional` field is an argument without a flag (`madr compare RUN_A RUN_B`).
    """
    metadata = {
        "help": help,
        "choices": tuple(choices) if choices else None,
        "required": required,
        "bare": bare,
        "flag": flag,
        "aliases": tuple(aliases),
        "positional": positional,
    }
    return dataclasses.field(default=default, metadata=metadata)


def switch(help: str) -> Any:
    """A `setting` that is "true", "false" or None (the stage decides from its other flags), where the
    flag alone means "true": `--zero_shot` is `--zero_shot true`."""
    return setting(None, help, choices=("true", "false"), bare="true")


def flag_fields(config_class: type, only: Collection[str] | None = None) -> list[dataclasses.Field]:
    """The fields of `config_class` that are flags (declared with `setting`); those in `only` if given."""
    return [
        f
        for f in dataclasses.fields(config_class)
        if "help" in f.metadata and (only is None or f.name in only)
    ]


def flag_name(field: dataclasses.Field) -> str:
    """The command line's `--name` of a `setting` field (its metavar, for a positional one)."""
    if field.metadata.get("positional"):
        return field.name.upper()
    return "--" + (field.metadata.get("flag") or field.name)


def comma_separated(text: str) -> tuple[str, ...]:
    """A flag's `a,b,c` as ("a", "b", "c"), blanks dropped."""
    return tuple(part.strip() for part in text.split(",") if part.strip())


def _scalar_type(annotation: Any) -> type:
    """str / int / float / bool from `X` or `X | None`; tuple for `tuple[str, ...]` (comma-separated)."""
    if annotation in _SCALARS:
        return annotation
    if typing.get_origin(annotation) is tuple and typing.get_args(annotation) == (str, ...):
        return tuple
    arguments = [a for a in typing.get_args(annotation) if a is not type(None)]
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType) and len(arguments) == 1 and arguments[0] in _SCALARS:
        return arguments[0]
    raise TypeError(
        f"a flag must be str, int, float, bool (or one of them | None) or tuple[str, ...], not {annotation}"
    )


def add_config_arguments(
    parser: argparse.ArgumentParser,
    config_class: type,
    only: Collection[str] | None = None,
    enforce_required: bool = False,
) -> None:
    """Add one `--<name>` per `setting` field of `config_class` (those named in `only` if given), with its
    type, default, choices and help; each is parsed into the field's name. `enforce_required`: argparse
    itself requires the required ones (its usage line shows them unbracketed); never for a parser Beam's
    options are built from, which parses every stage's flags at once (`config_values` names them then)."""
    hints = typing.get_type_hints(config_class)
    for f in flag_fields(config_class, only):
        kind = _scalar_type(hints[f.name])
        if f.metadata.get("positional"):
            parser.add_argument(f.name, metavar=flag_name(f), type=kind, help=f.metadata["help"])
            continue
        text = ("(required) " if f.metadata.get("required") else "") + f.metadata["help"]
        names = (flag_name(f), *f.metadata.get("aliases", ()))
        if kind is bool:
            if f.default is not False:
                raise TypeError(f"{config_class.__name__}.{f.name}: a bool flag must default to False")
            parser.add_argument(*names, dest=f.name, action="store_true", help=text)
            continue
        extra = {"nargs": "?", "const": f.metadata["bare"]} if f.metadata.get("bare") is not None else {}
        if f.metadata.get("flag") or f.metadata.get("aliases"):
            extra["metavar"] = (f.metadata.get("flag") or f.name).upper()
        if kind is tuple:  # argparse converts a string default with `type` too
            kind, default = comma_separated, ",".join(f.default)
        else:
            # A required flag has no default to show (`config_values` names it when it is missing).
            default = argparse.SUPPRESS if f.metadata.get("required") else f.default
            if f.metadata.get("required") and enforce_required:
                extra["required"] = True
        parser.add_argument(
            *names,
            dest=f.name,
            type=kind,
            default=default,
            choices=f.metadata.get("choices"),
            help=text,
            **extra,
        )


def options_class(
    config_class: type, name: str, doc: str | None = None, shared: Collection[str] = ()
) -> type[PipelineOptions]:
    """The Beam `PipelineOptions` subclass `name` whose flags are `config_class`'s `setting` fields, so
    that a runner's own arguments and the stage's are parsed together (`get_all_options`).

    `shared` names fields whose flag another options class declares: Beam parses every options class
    into one parser, so a flag that two stages read (`--depth`) is declared by one class for both.
    """
    own = [f.name for f in flag_fields(config_class) if f.name not in shared]

    def add_arguments(cls: type, parser: argparse.ArgumentParser) -> None:
        add_config_arguments(parser, config_class, only=own)

    namespace = {
        "__doc__": doc or f"The flags of `{config_class.__name__}`.",
        "__module__": config_class.__module__,
        "_add_argparse_args": classmethod(add_arguments),
    }
    return type(name, (PipelineOptions,), namespace)


def config_from_values(
    config_class: type[Config], values: PipelineOptions | argparse.Namespace | Mapping[str, Any]
) -> Config:
    """`config_class` built from parsed flags (Beam options, an argparse namespace or a mapping).

    Raises ValueError naming every required flag that was not given.
    """
    return config_class(**config_values(config_class, values))


def config_values(
    config_class: type,
    values: PipelineOptions | argparse.Namespace | Mapping[str, Any],
    only: Collection[str] | None = None,
) -> dict[str, Any]:
    """The `setting` fields of `config_class` (those named in `only` if given) that parsed flags give,
    for a config that also has fields no flag sets. Raises ValueError naming every missing required flag."""
    values = parsed_flags(values)
    fields = flag_fields(config_class, only)
    missing = [flag_name(f) for f in fields if f.metadata.get("required") and not values.get(f.name)]
    if missing:
        raise ValueError(f"missing required flag(s): {', '.join(missing)} (see --help)")
    return {f.name: values[f.name] for f in fields if values.get(f.name) is not None}


def parsed_flags(values: ParsedFlags) -> dict[str, Any]:
    """Parsed flags as a mapping, whether Beam or argparse parsed them; `add_output_argument`'s `out`
    is also `output`, the field every stage config calls it."""
    if isinstance(values, PipelineOptions):
        values = values.get_all_options(drop_default=False)
    elif isinstance(values, argparse.Namespace):
        values = vars(values)
    values = dict(values)
    if values.get("output") is None and values.get("out") is not None:
        values["output"] = values["out"]
    return values


def settings_record(*configs: Any) -> dict[str, Any]:
    """Every flag field of `configs` with its value, for a stage's manifest to say what the stage ran with
    (a later config's field of the same name wins)."""
    return {f.name: getattr(config, f.name) for config in configs for f in flag_fields(type(config))}


def require_flags(values: Mapping[str, Any], *names: str) -> None:
    """Raise ValueError naming every flag of `names` that `values` (parsed flags) lacks or leaves empty."""
    missing = [f"--{name}" for name in names if not values.get(name)]
    if missing:
        raise ValueError(f"missing required flag(s): {', '.join(missing)} (see --help)")


@dataclass(frozen=True, kw_only=True)
class StageOutput:
    """Where a stage writes, shared by the stage configs: `output` (required), `overwrite` (a folder
    that already holds files is refused without it) and `verify` (False is `--no_verify`)."""

    output: str
    overwrite: bool = False
    verify: bool = True

    def __post_init__(self) -> None:
        if not self.output:
            raise ValueError("missing required flag(s): --output (see --help)")

    @staticmethod
    def values_from(values: Mapping[str, Any]) -> dict[str, Any]:
        """The `StageOutput` fields that a stage's parsed flags give."""
        return {
            "output": values.get("output"),
            "overwrite": bool(values.get("overwrite")),
            "verify": not values.get("no_verify"),
        }


def add_output_argument(parser: argparse.ArgumentParser, help: str, **settings: Any) -> None:
    """`--output`, every command's name for the folder it writes (also `--out`, the name of earlier
    releases), parsed into `args.out`."""
    parser.add_argument("--output", "--out", dest="out", metavar="OUTPUT", help=help, **settings)
