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
import warnings
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, TypeVar

Config = TypeVar("Config")
# Flags as argparse parsed them, or as a mapping of their destinations.
ParsedFlags = argparse.Namespace | Mapping[str, Any]
_SCALARS = (str, int, float, bool)
_TRUE_OR_FALSE = ("true", "false")


def setting(
    default: Any,
    help: str,
    *,
    choices: Sequence[str] | None = None,
    required: bool = False,
    bare: str | None = None,
    flag: str | None = None,
    aliases: Sequence[str] = (),
    old_names: Sequence[str] = (),
    negated: bool = False,
    positional: bool = False,
    repeated: bool = False,
    metavar: str | None = None,
    parse: Callable[[Any], Any] | None = None,
) -> Any:
    """A dataclass field that is also a flag `--<field name>` (or `--<flag>`, parsed into the field's name).

    `required` fields keep a falsy default (so the dataclass can be built field by field) and
    are checked by `config_from_values`, which names the flag that is missing. `bare` is the
    value of the flag given without one (`--compare_exact` alone means "true"). `flag` keeps a
    command line's established name for a field named otherwise in code (`--data` for `dataset`);
    `aliases` are further names of the flag (`--out`, the name of earlier releases for `--output`);
    `old_names` still parse, with a warning naming the flag (`--max_k` for `--depth`). A `negated` bool
    defaults to True and its flag sets it False (`--no_verify` for `verify`). A `positional` field is an
    argument without a flag (`madr compare RUN_A RUN_B`). A `repeated` `tuple[str, ...]` field takes one
    value per flag given (`--query a --query b`), not a comma-separated list. With `parse` the field holds
    what `parse` makes of the flag's text (`--embed_flags '--precision int8'`: `shlex.split`), or of a
    repeated flag's values (`--variant_option KEY=VALUE` pairs). A bool with choices ("true", "false") is
    written `--report false`. `metavar` names the value in `--help` (`--filter ASPECT=VALUE`).
    """
    metadata = {
        "help": help,
        "choices": tuple(choices) if choices else None,
        "required": required,
        "bare": bare,
        "flag": flag,
        "aliases": tuple(aliases),
        "old_names": tuple(old_names),
        "negated": negated,
        "positional": positional,
        "repeated": repeated,
        "metavar": metavar,
        "parse": parse,
    }
    return dataclasses.field(default=default, metadata=metadata)


def nested(
    settings_class: type | None = None, *, only: Collection[str] | None = None, **defaults: Any
) -> Any:
    """A config field holding a settings dataclass whose flags are the command's own: `add_config_arguments`
    declares them with the config's and `config_values` builds the settings from them. With
    `settings_class` the field defaults to its defaults; without, the field must be given.

    `only`: the settings' fields that are this command's flags (the others keep their defaults); `defaults`:
    this command's defaults of some of them (`madr adapt`'s training loop is the shipped recipe's)."""
    metadata = {"nested": True, "only": None if only is None else frozenset(only), "defaults": defaults}
    if settings_class is None:
        if defaults:
            raise TypeError("nested(**defaults) needs the settings class they are defaults of")
        return dataclasses.field(metadata=metadata)
    unknown = set(defaults) - {f.name for f in dataclasses.fields(settings_class)}
    if unknown:
        raise TypeError(f"{settings_class.__name__} has no field(s) {sorted(unknown)}")
    return dataclasses.field(default_factory=lambda: settings_class(**defaults), metadata=metadata)


def subcommands(choices: Mapping[str, type], metavar: str) -> Any:
    """A config field holding one of several settings dataclasses, chosen by the word after the command
    (`madr ingest esci ...`): each choice is a sub-command whose flags are its class's, followed by the
    config's other flags (`--output`). A choice's docstring is its line of the command's --help."""
    return dataclasses.field(metadata={"subcommands": dict(choices), "metavar": metavar})


# Where `config_from_values` finds the flags the command's parser left for Beam (`beam_options`).
BEAM_ARGS = "beam_args"


def beam_options() -> Any:
    """A config field holding the command line's flags that are not the command's own, as written (its
    Beam pipeline options): `madr nightly` passes them on to each stage. Not a flag."""
    return dataclasses.field(default=(), metadata={"beam_args": True})


def switch(help: str) -> Any:
    """A `setting` that is "true", "false" or None (the stage decides from its other flags), where the
    flag alone means "true": `--zero_shot` is `--zero_shot true`."""
    return setting(None, help, choices=("true", "false"), bare="true")


def flag_fields(config_class: type, only: Collection[str] | None = None) -> list[dataclasses.Field]:
    """The fields of `config_class` that are flags (declared with `setting`), its `nested` settings' too,
    each name once (one flag sets every field of its name); those in `only` if given."""
    return [flag.field for flag in _typed_flag_fields(config_class, only)]


class _Flag(NamedTuple):
    field: dataclasses.Field
    annotation: Any  # resolved in the class that declares the field
    default: Any  # the field's, or the command's own (`nested(**defaults)`)


def _typed_flag_fields(
    config_class: type, only: Collection[str] | None, defaults: Mapping[str, Any] | None = None
) -> list[_Flag]:
    """`flag_fields` with each field's annotation and default."""
    found: dict[str, _Flag] = {}
    hints = typing.get_type_hints(config_class)
    defaults = defaults or {}
    for f in dataclasses.fields(config_class):
        if f.metadata.get("nested"):
            inner_only = _within(only, f.metadata.get("only"))
            for flag in _typed_flag_fields(hints[f.name], inner_only, f.metadata.get("defaults")):
                found.setdefault(flag.field.name, flag)
        elif "help" in f.metadata and (only is None or f.name in only):
            found.setdefault(f.name, _Flag(f, hints[f.name], defaults.get(f.name, f.default)))
    return list(found.values())


def _within(only: Collection[str] | None, narrower: Collection[str] | None) -> Collection[str] | None:
    if only is None or narrower is None:
        return narrower if only is None else only
    return set(only) & set(narrower)


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
    chooser = _subcommand_field(config_class)
    if chooser is not None:
        choices = parser.add_subparsers(dest=chooser.name, required=True, metavar=chooser.metadata["metavar"])
        for name, choice in chooser.metadata["subcommands"].items():
            sub = choices.add_parser(name, help=" ".join((choice.__doc__ or "").split()))
            add_config_arguments(sub, choice, only, enforce_required)
            _add_flags(sub, config_class, only, enforce_required)
        return
    _add_flags(parser, config_class, only, enforce_required)


def _subcommand_field(config_class: type) -> dataclasses.Field | None:
    return next((f for f in dataclasses.fields(config_class) if f.metadata.get("subcommands")), None)


def _add_flags(
    parser: argparse.ArgumentParser, config_class: type, only: Collection[str] | None, enforce_required: bool
) -> None:
    for f, hint, field_default in _typed_flag_fields(config_class, only):
        parse = f.metadata.get("parse")
        kind = tuple if parse and f.metadata.get("repeated") else parse or _scalar_type(hint)
        if f.metadata.get("positional"):
            parser.add_argument(f.name, metavar=flag_name(f), type=kind, help=f.metadata["help"])
            continue
        text = ("(required) " if f.metadata.get("required") else "") + f.metadata["help"]
        names = (flag_name(f), *f.metadata.get("aliases", ()))
        if f.metadata.get("repeated"):
            if kind is not tuple:
                raise TypeError(f"{config_class.__name__}.{f.name}: a repeated flag is a tuple[str, ...]")
            parser.add_argument(
                *names, dest=f.name, action="append", default=[], metavar=f.metadata.get("metavar"), help=text
            )
            continue
        if kind is bool and f.metadata.get("choices") == _TRUE_OR_FALSE:
            default = "true" if field_default else "false"
            parser.add_argument(*names, dest=f.name, choices=_TRUE_OR_FALSE, default=default, help=text)
            continue
        if kind is bool:
            if field_default is not bool(f.metadata.get("negated")):
                where = f"{config_class.__name__}.{f.name}"
                raise TypeError(f"{where}: a bool flag defaults to False (True if negated)")
            action = "store_false" if f.metadata.get("negated") else "store_true"
            parser.add_argument(*names, dest=f.name, action=action, help=text)
            continue
        extra = {"nargs": "?", "const": f.metadata["bare"]} if f.metadata.get("bare") is not None else {}
        if f.metadata.get("metavar"):
            extra["metavar"] = f.metadata["metavar"]
        elif f.metadata.get("flag") or f.metadata.get("aliases"):
            extra["metavar"] = (f.metadata.get("flag") or f.name).upper()
        if kind is tuple:  # argparse converts a string default with `type` too
            kind, default = comma_separated, ",".join(field_default)
        else:
            # A required flag has no default to show (`config_values` names it when it is missing).
            default = argparse.SUPPRESS if f.metadata.get("required") else field_default
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
        for old in f.metadata.get("old_names", ()):
            parser.add_argument(
                old,
                dest=f.name,
                type=kind,
                action=_OldFlagName,
                default=argparse.SUPPRESS,
                help=f"Deprecated: the old name of {flag_name(f)}",
            )


class _OldFlagName(argparse.Action):
    """An old flag name: parsed into the new one's field, with a warning naming the new flag."""

    def __call__(
        self, parser: Any, namespace: argparse.Namespace, values: Any, option_string: Any = None
    ) -> None:
        warnings.warn(f"{option_string} is deprecated: it is now --{self.dest}", FutureWarning, stacklevel=2)
        setattr(namespace, self.dest, values)


def config_from_values(config_class: type[Config], values: ParsedFlags) -> Config:
    """`config_class` built from parsed flags (an argparse namespace or a mapping), its `nested`
    settings built from the same flags.

    Raises ValueError naming every required flag that was not given.
    """
    return config_class(**config_values(config_class, values))


def config_values(
    config_class: type, values: ParsedFlags, only: Collection[str] | None = None
) -> dict[str, Any]:
    """The fields of `config_class` that parsed flags give: its `setting` fields and its `nested` settings
    built from the same flags (of those only the fields named in `only`, if given); for a config that also
    has fields no flag sets. Raises ValueError naming every missing required flag."""
    values = parsed_flags(values)
    missing = [
        flag_name(f)
        for f in flag_fields(config_class, only)
        if f.metadata.get("required") and not values.get(f.name)
    ]
    if missing:
        raise ValueError(f"missing required flag(s): {', '.join(missing)} (see --help)")
    return _given(config_class, values, only)


def _given(config_class: type, values: Mapping[str, Any], only: Collection[str] | None) -> dict[str, Any]:
    hints = typing.get_type_hints(config_class)
    given: dict[str, Any] = {}
    for f in dataclasses.fields(config_class):
        if f.metadata.get("beam_args"):
            if BEAM_ARGS in values:
                given[f.name] = tuple(values[BEAM_ARGS])
        elif f.metadata.get("subcommands"):
            chosen = f.metadata["subcommands"][values[f.name]]
            given[f.name] = config_from_values(chosen, values)
        elif f.metadata.get("nested"):
            inner = _given(hints[f.name], values, _within(only, f.metadata.get("only")))
            given[f.name] = hints[f.name](**{**f.metadata.get("defaults", {}), **inner})
        elif "help" in f.metadata and (only is None or f.name in only) and values.get(f.name) is not None:
            given[f.name] = _value(f, values[f.name])
    return given


def _value(f: dataclasses.Field, parsed: Any) -> Any:
    if isinstance(f.default, bool) and f.metadata.get("choices") == _TRUE_OR_FALSE:
        return parsed == "true" if isinstance(parsed, str) else parsed
    if not f.metadata.get("repeated"):
        return parsed
    parse = f.metadata.get("parse")
    return parse(tuple(parsed)) if parse else tuple(parsed)


def parsed_flags(values: ParsedFlags) -> dict[str, Any]:
    """Parsed flags as a mapping."""
    return dict(vars(values) if isinstance(values, argparse.Namespace) else values)


def written_flags(add_arguments: Callable[[argparse.ArgumentParser], None], argv: Sequence[str]) -> set[str]:
    """The destinations of the flags written on the command line `argv` (parsed again with every default
    suppressed), for a `--preset` or profile that fills only the others."""
    probe = argparse.ArgumentParser(add_help=False)
    add_arguments(probe)
    for action in probe._actions:
        action.default = argparse.SUPPRESS
        action.required = False
    given, _ = probe.parse_known_args(list(argv))
    return set(vars(given))


def settings_record(*configs: Any) -> dict[str, Any]:
    """Every flag field of the settings `configs` with its value, for a stage's manifest to say what the
    stage ran with (a later config's field of the same name wins)."""
    return {
        f.name: getattr(config, f.name)
        for config in configs
        for f in dataclasses.fields(config)
        if "help" in f.metadata
    }


def output_setting(help: str) -> Any:
    """`--output`, every command's name for the folder it writes (also `--out`, the name of earlier
    releases): a required `setting`."""
    return setting("", help, required=True, aliases=("--out",))


def input_checks() -> Any:
    """`verify`, False under `--no_verify`: whether a command checks its input artifacts against their
    manifests (`pipelines.storage.verify`)."""
    return setting(
        True,
        "For experts: do not check the sha256 of the input artifacts (model, tokenizer, vocabularies, "
        "embeddings) against their manifests; a warning names what was not checked. Index artifacts are "
        "always checked when they are opened",
        flag="no_verify",
        negated=True,
    )


def overwrite_setting() -> Any:
    """`--overwrite`: whether a command may replace an output folder that already holds files."""
    return setting(
        False,
        "Replace the output folder if it already holds files (without it, such a folder is refused, so no "
        "stale file can mix with the new ones). Either way the new output is written beside it and moved "
        "into place only when the run succeeds",
    )


@dataclass(frozen=True, kw_only=True)
class StageOutput:
    """Where a stage writes, shared by the stage configs: `output` (required; a stage redeclares it with
    its own help), `overwrite` (a folder that already holds files is refused without it) and `verify`
    (False is `--no_verify`)."""

    output: str = output_setting("Output folder, local or gs://")
    overwrite: bool = overwrite_setting()
    verify: bool = input_checks()

    def __post_init__(self) -> None:
        if not self.output:
            raise ValueError("missing required flag(s): --output (see --help)")
