"""The one rule for a name a user or a file gives that becomes part of a path (a run id, a folder name).

A name is one path component: letters, digits, `.`, `_` and `-`, starting with a letter or a digit, at
most 128 characters. That excludes `.` and `..`, separators of every system (`/`, `\\`), a drive's `:`,
spaces (a trailing one makes two names look equal), NUL and every other control character, so a path
joined from a folder and a name always lies inside that folder.
"""

from __future__ import annotations

import os
import re

NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
NAME_RULE = "1-128 letters, digits, '.', '_' or '-', starting with a letter or a digit"


class UnsafeName(ValueError):
    """A name that would not stay one path component inside its folder."""


def checked_name(name: object, what: str) -> str:
    """`name` when it is a safe path component, else UnsafeName naming `what` (e.g. "--run_id")."""
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
        raise UnsafeName(f"{what} {name!r} is not a usable name: it must be {NAME_RULE}")
    return name


def require_inside(root: str, path: str, what: str) -> str:
    """`path` when it lies strictly inside the folder `root` (local paths, links resolved), else
    UnsafeName. Object-store paths have no `..` or links; their names are held by `checked_name`."""
    if "://" in root or "://" in path:
        return path
    base = os.path.realpath(root)
    target = os.path.realpath(path)
    if os.path.commonpath([base, target]) != base or target == base:
        raise UnsafeName(f"{what} {path} is not inside {root}: nothing outside it is written or deleted")
    return path
