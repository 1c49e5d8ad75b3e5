"""How `madr` ends on an error: one line that names the problem and the fix, or a bug report.

A user can cause an error with a bad flag value, a missing, unreadable or damaged file, an artifact
that fails verification, a catalog with too many bad records, or a nightly run the publish guard
refuses. None of these is a bug, and a traceback would bury the one line that matters, so each is
printed as ``madr <command>: error: <message>`` on stderr with exit code 2, the code argparse
gives a bad flag. The messages raised for them say what to do; an OS error gets the fix added here.

`USER_ERRORS` are those exception types. ValueError is among them because it is what configuration
checks across madr raise (and what Arrow and JSON raise for a corrupt input file); the price is
that a ValueError from a bug is shown as one line too. ``madr --debug`` re-raises every error, for
its traceback. A failure of the engine (a Dask cluster that lost its workers, memory exhausted:
`pipelines.engine_failures`) is one line too, ``madr <command>: runner failure: ...``, exit code 1.
Any other exception is a bug: its traceback is printed, then a line saying how to report it, with
exit code 1.
"""

from __future__ import annotations

import errno
import sys
import traceback
from typing import TextIO

from pipelines.engine_failures import engine_failure
from pipelines.refusals import StageRefused
from pipelines.storage.staged_output import wrapped_os_error
from schemas.manifest import ArtifactError
from schemas.terminal_text import for_terminal

# ArtifactError and StageRefused (too many dead letters, a nightly catalog that shrank) are RuntimeErrors,
# a type that is otherwise a bug's; InvalidRecord and CheckpointError are ValueErrors.
USER_ERRORS: tuple[type[Exception], ...] = (ValueError, OSError, ArtifactError, StageRefused)
EXIT_USER_ERROR = 2
EXIT_BUG = 1  # also a runner's failure (pipelines.engine_failures): the input was not at fault
# An error line shows at most this many characters.
ERROR_LINE_CHARS = 2000

# The fix for an OS error raised by Python itself, whose message only names the problem.
_OS_FIXES = {
    errno.ENOENT: "check the path",
    errno.EACCES: "check its permissions",
    errno.EPERM: "check its permissions",
    errno.ENOSPC: "free some space or write elsewhere",
    errno.EISDIR: "give a file, not a folder",
    errno.ENOTDIR: "give a folder, not a file",
    errno.EEXIST: "remove it or choose another path",
}


def one_line(error: BaseException) -> str:
    """The error's message on one line (Beam adds lines naming the step), never empty."""
    if isinstance(error, OSError) and error.strerror:
        fix = _OS_FIXES.get(error.errno or 0)
        where = f": {error.filename}" if error.filename is not None else ""
        message = f"{error.strerror}{where}" + (f"; {fix}" if fix else "")
    else:
        message = str(error)
    # A message can quote a record (an id, a title, a path from a catalog): escaped, and cut past a screen.
    return for_terminal(" ".join(message.split()) or type(error).__name__, ERROR_LINE_CHARS)


def report_error(command: str, error: Exception, stream: TextIO | None = None) -> int:
    """Print `error` for the user of `madr <command>`; the exit code main() returns."""
    stream = stream if stream is not None else sys.stderr
    if not isinstance(error, USER_ERRORS):
        error = wrapped_os_error(error) or error
    if isinstance(error, USER_ERRORS):
        print(f"madr {command}: error: {one_line(error)}", file=stream)
        return EXIT_USER_ERROR
    failure = engine_failure(error)
    if failure is not None:  # the runner's, not madr's: one line, no traceback
        print(f"madr {command}: runner failure: {for_terminal(failure, ERROR_LINE_CHARS)}", file=stream)
        return EXIT_BUG
    traceback.print_exception(type(error), error, error.__traceback__, file=stream)
    print(
        f"madr {command}: unexpected error: {type(error).__name__}: {one_line(error)}; if your input and "
        "flags look right, this is a bug in madr: please report it with the command line and the "
        "traceback above",
        file=stream,
    )
    return EXIT_BUG
