"""The error a stage raises when it stops on purpose: its input is not fit to go on with.

A catalog with more bad records than allowed, or a nightly catalog that shrank past the guard, is the
input's fault, not madr's: `madr` prints such an error as one line, with no traceback (`jobs.cli_errors`).
The class lives apart from the stages so that the CLI can name it without importing them.
"""

from __future__ import annotations


class StageRefused(RuntimeError):
    """A stage stopped on purpose; the message says why and what to do."""


__all__ = ["StageRefused"]
