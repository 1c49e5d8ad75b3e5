"""A guard against another `model`, `schemas`, `evaluation`, ... taking the place of madr's own.

madr's packages keep the short top-level names the project is laid out in (schemas, model,
index_builder, product_data, evaluation, pipelines, jobs). Renaming them under one `madr.` namespace
would make them unique, but would rewrite every import of the code base and of users' scripts;
instead, importing `pipelines` (which every Beam worker does first, and every command through `jobs`)
checks that the packages it imports come from the same folder as itself, and otherwise stops with a
message that names the impostor and the fix. A package on sys.path with one of these names would else
fail later with a confusing ImportError, or, worse, run someone else's code. `jobs` is not among them:
`pipelines` never imports it, and a foreign `jobs` must not stop a Beam worker; `jobs/__init__.py`
checks the other way round, that the `pipelines` it is about to import is the one next to it.
tests/test_installation.py puts a fake `model` (and a fake `pipelines`) first on the path and checks
the message.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

SIBLING_PACKAGES = ("schemas", "model", "index_builder", "product_data", "evaluation")


class ShadowedPackageError(ImportError):
    """A top-level package madr needs resolves to a folder that is not madr's."""


def _folder_of(name: str) -> Path | None:
    spec = importlib.util.find_spec(name)
    if spec is None:
        return None
    if spec.origin and spec.origin not in ("namespace", "built-in"):
        return Path(spec.origin).resolve().parent
    locations = list(spec.submodule_search_locations or [])
    return Path(locations[0]).resolve() if locations else None


def check_sibling_packages(home: Path | None = None) -> None:
    """Raise `ShadowedPackageError` unless each sibling package sits next to `pipelines` in `home`."""
    home = home or Path(__file__).resolve().parent.parent
    for name in SIBLING_PACKAGES:
        found = _folder_of(name)
        if found != home / name:
            where = "is not importable" if found is None else f"is imported from {found}"
            raise ShadowedPackageError(
                f"madr's package {name!r} {where}, not from {home / name}: another package or folder "
                f"named {name!r} comes first on sys.path (the current directory counts). Run madr from "
                "another directory, remove it from PYTHONPATH, or install madr in its own virtual "
                "environment"
            )
