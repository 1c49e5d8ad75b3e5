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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from apache_beam.options.pipeline_options import PipelineOptions

Config = TypeVar("Config")
_SCALARS = (str, int, float, bool)


def setting(
    default: Any,
    help: str,
    *,
    choices: Sequence[str] | None = None,
    required: bool = False,
    bare: str | None = None,
) -> Any:
    """A dataclass field that is also a flag `--<field name>`.

    `required` fields keep a falsy default (so the dataclass can be built field by field) and
    are checked by `config_from_values`, which names the flag that is missing. `bare` is the
    value of the flag given without one (`--compare_exact` alone means "true").
    """
    metadata = {
        "help": help,
        "choices": tuple(choices) if choices else None,
        "required": required,
        "bare": bare,
    }
    return dataclasses.field(default=default, metadata=metadata)


def flag_fields(config_class: type) -> list[dataclasses.Field]:
    """The fields of `config_class` that are flags (declared with `setting`)."""
    return [f for f in dataclasses.fields(config_class) if "help" in f.metadata]


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


def add_config_arguments(parser: argparse.ArgumentParser, config_class: type) -> None:
    """Add one `--<name>` per `setting` field of `config_class`, with its type, default, choices, help."""
    hints = typing.get_type_hints(config_class)
    for f in flag_fields(config_class):
        kind = _scalar_type(hints[f.name])
        text = ("(required) " if f.metadata.get("required") else "") + f.metadata["help"]
        if kind is bool:
            if f.default is not False:
                raise TypeError(f"{config_class.__name__}.{f.name}: a bool flag must default to False")
            parser.add_argument(f"--{f.name}", action="store_true", help=text)
            continue
        bare = {"nargs": "?", "const": f.metadata["bare"]} if f.metadata.get("bare") is not None else {}
        if kind is tuple:  # argparse converts a string default with `type` too
            kind, default = comma_separated, ",".join(f.default)
        else:
            default = f.default
        parser.add_argument(
            f"--{f.name}", type=kind, default=default, choices=f.metadata.get("choices"), help=text, **bare
        )


def config_from_values(
    config_class: type[Config], values: PipelineOptions | argparse.Namespace | Mapping[str, Any]
) -> Config:
    """`config_class` built from parsed flags (Beam options, an argparse namespace or a mapping).

    Raises ValueError naming every required flag that was not given.
    """
    if isinstance(values, PipelineOptions):
        values = values.get_all_options(drop_default=False)
    elif isinstance(values, argparse.Namespace):
        values = vars(values)
    require_flags(values, *(f.name for f in flag_fields(config_class) if f.metadata.get("required")))
    return config_class(
        **{f.name: values[f.name] for f in flag_fields(config_class) if values.get(f.name) is not None}
    )


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
