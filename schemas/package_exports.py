"""A package's names imported on first use instead of with the package (PEP 562).

`model`, `model.aspects` and `index_builder` export their classes from the package for short imports,
but importing all of them with the package brought torch, transformers' model code and ScaNN to every
reader of a plain setting (`madr --help` took 10 s). Each gives `exported_on_use` its submodules and the
names it exports from each, as its imports once read; `from model import DenseEncoder` then imports
`model.encoder` only then.
It lives in `schemas` because every package may import `schemas`.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any


def exported_on_use(
    package: str, exports: Mapping[str, Sequence[str]]
) -> tuple[Callable[[str], Any], Callable[[], list[str]], list[str]]:
    """`__getattr__`, `__dir__` and `__all__` for `package`, which exports `exports[submodule]` from each of
    its submodules (named relative to it)."""
    source = {name: f"{package}.{submodule}" for submodule, names in exports.items() for name in names}

    def __getattr__(name: str) -> Any:
        if name not in source:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(source[name]), name)
        setattr(sys.modules[package], name, value)  # looked up once
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *source})

    return __getattr__, __dir__, sorted(source)


__all__ = ["exported_on_use"]
